"""Snapshot tests: the whole screen as SVG, from fixed frames (the views never read the clock).

Update after an intended change: `.venv/bin/pytest tests/tui/test_snapshots.py --snapshot-update`
and look at the SVGs under tests/tui/__snapshots__ before keeping them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from textual.pilot import Pilot

from tests.tui.fakes import make_app, snapshot
from tests.tui.frames import emperor_frame, history


def showing(
    frames: Any, keys: tuple[str, ...] = (), findings: bool = False
) -> Callable[[Pilot[Any]], Any]:
    async def run_before(pilot: Pilot[Any]) -> None:
        pilot.app.show(*snapshot(frames, findings=findings))  # type: ignore[attr-defined]
        await pilot.pause()
        if keys:
            await pilot.press(*keys)
        await pilot.pause()

    return run_before


def test_overloaded_80x24(snap_compare: Any) -> None:
    # A full queue, every worker busy, CPU saturated: findings now, not built-ins (issue 13).
    frames = history(60, workers=8, cheap=4, busy=4, queue=16, cpu=1.9)
    run_before = showing(frames, findings=True)
    assert snap_compare(make_app(), terminal_size=(80, 24), run_before=run_before)


def test_wide_200x50(snap_compare: Any) -> None:
    frames = history(60, workers=16, busy=6, queue=5)
    assert snap_compare(make_app(), terminal_size=(200, 50), run_before=showing(frames))


def test_cores_view(snap_compare: Any) -> None:
    frames = history(10, busy=2)
    assert snap_compare(make_app(), terminal_size=(100, 30), run_before=showing(frames, ("c",)))


def test_emperor(snap_compare: Any) -> None:
    assert snap_compare(make_app(), terminal_size=(100, 24), run_before=showing([emperor_frame()]))


def with_latency(frames: Any, keys: tuple[str, ...] = (), **view: Any) -> Any:
    """`showing`, with the request log's view of a minute of varied traffic (issue 38)."""
    from dataclasses import replace

    from tests.support.latencymix import traffic_view

    async def run_before(pilot: Pilot[Any]) -> None:
        index, state = snapshot(frames)
        pilot.app.show(index, replace(state, latency=traffic_view(**view)))  # type: ignore[attr-defined]
        await pilot.pause()
        if keys:
            await pilot.press(*keys)
        await pilot.pause()

    return run_before


def test_latency_header_80x24(snap_compare: Any) -> None:
    # Unstamped: the Little's-law estimate, said to be one; coverage; the p99 sparkline.
    frames = history(60, workers=8, busy=4, queue=5)
    run_before = with_latency(frames, coverage=0.98, little_wait_ms=3.2)
    assert snap_compare(make_app(), terminal_size=(80, 24), run_before=run_before)


def test_latency_stamped_untrusted_120x40(snap_compare: Any) -> None:
    frames = history(60, workers=8, busy=4, queue=5)
    run_before = with_latency(frames, stamped=True, trusted=False, coverage=0.7)
    assert snap_compare(make_app(), terminal_size=(120, 40), run_before=run_before)


def test_latency_routes_screen(snap_compare: Any) -> None:
    frames = history(60, workers=8, busy=4, queue=5)
    run_before = with_latency(frames, ("l",), coverage=0.98)
    assert snap_compare(make_app(), terminal_size=(100, 30), run_before=run_before)
