"""The TUI at 1,000 workers: only the rows in view are built, and nothing that did not change
is repainted (issue 15). Behaviour (sort, scroll, cursor) stays what it is at 4 workers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from textual.renderables.sparkline import Sparkline as SparklineRenderable
from textual.widget import Widget

from tests.tui.fakes import make_app, snapshot
from tests.tui.frames import history
from uwsgitune.core.derive import Tracker
from uwsgitune.core.model import parse_stats
from uwsgitune.core.samples import Poll
from uwsgitune.tui import workers
from uwsgitune.tui.table import KeyedTable
from uwsgitune.tui.widgets import Bars, QuietLabel, QuietSparkline, SummaryPanel
from uwsgitune.tui.workers import (
    CORE_COLUMNS,
    WORKER_COLUMNS,
    core_rows,
    core_table,
    sort_value,
    worker_rows,
    worker_table,
)

SIZE = (120, 40)  # 40 lines: under 40 table rows in view


REAL = Path(__file__).resolve().parent.parent / "data" / "stats" / "64-workers.json"


@pytest.fixture(scope="module")
def big() -> tuple[Any, ...]:
    """Three polls of a 1,000-worker instance: the real 64-worker document, its workers
    replicated with new ids and pids, each serving at its own rate, a third busy."""
    doc = json.loads(REAL.read_text())
    base, tracker, frames = doc["workers"], Tracker("big"), []
    top, t0 = max(w["pid"] for w in base), max(w["last_spawn"] for w in base) + 600.0
    for step in range(3):
        ws = []
        for k in range(1000):
            w = dict(base[k % len(base)], id=k + 1, status="busy" if (k + step) % 3 else "idle")
            w["pid"] = w["pid"] if k < len(base) else top + k - len(base) + 1
            w["requests"] += step * (k % 7)
            ws.append(w)
        raw = json.dumps(dict(doc, workers=ws)).encode()
        frames.append(tracker.update(Poll("big", t0 + step, 1e3 + step, doc=parse_stats(raw))))
    return tuple(frames)


def count_builds(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Every worker row built from now on (its slot)."""
    built: list[int] = []
    real = workers.worker_row

    def counting(w: Any, total: int, now: float) -> Any:
        built.append(w.slot)
        return real(w, total, now)

    monkeypatch.setattr(workers, "worker_row", counting)
    return built


def count_refreshes(widget: Widget) -> list[tuple[Any, ...]]:
    """The regions of every refresh of `widget` from now on (() for the whole widget)."""
    calls: list[tuple[Any, ...]] = []
    real = widget.refresh

    def counting(*regions: Any, **kw: Any) -> Any:
        calls.append(regions)
        return real(*regions, **kw)

    widget.refresh = counting  # type: ignore[method-assign]
    return calls


def test_sort_values_are_the_cells_sort_values(big: tuple[Any, ...]) -> None:
    # The table sorts 1,000 workers on WORKER_SORT without building cells: the same values.
    f = big[-1]
    rows, lazy = worker_rows(f), worker_table(f)
    assert lazy.keys == tuple(k for k, _ in rows)
    for c in range(len(WORKER_COLUMNS)):
        assert [lazy.sort(i, c) for i in range(len(rows))] == [r[1][c].sort for r in rows]
        assert lazy.column(c) == [r[1][c].sort for r in rows]  # the whole column at once


def test_core_sort_values_are_the_cells_sort_values(big: tuple[Any, ...]) -> None:
    f = big[-1]
    rows, lazy = core_rows(f), core_table(f)
    assert len(rows) == 1000 and lazy.keys == tuple(k for k, _ in rows)
    for c in range(len(CORE_COLUMNS)):
        assert [lazy.sort(i, c) for i in range(len(rows))] == [r[1][c].sort for r in rows]


async def test_1000_workers_cores_view_builds_only_the_rows_in_view(
    big: tuple[Any, ...], monkeypatch: pytest.MonkeyPatch
) -> None:
    built: list[Any] = []
    real = workers.core_cells
    monkeypatch.setattr(workers, "core_cells", lambda c: built.append(c) or real(c))
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        app.show(*snapshot(big))
        await pilot.press("c")
        await pilot.pause()
        table = app.pane(0).query_one("#cores", KeyedTable)
        assert table.row_count == 1000 and 0 < len(built) < 60


async def test_1000_workers_build_only_the_rows_in_view(
    big: tuple[Any, ...], monkeypatch: pytest.MonkeyPatch
) -> None:
    built = count_builds(monkeypatch)
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        app.show(*snapshot(big))
        await pilot.pause()
        table = app.pane(0).query_one("#workers", KeyedTable)
        assert table.row_count == 1000 and 0 < len(built) < 60
        assert set(built) <= set(range(60))  # the top of the table, sorted on WID
        built.clear()
        table.focus()
        await pilot.press("end")
        await pilot.pause()
        assert table.cursor_key() == "w999" and table.get_cell("w999", "wid").text == "1000"
        y = table.cursor - table.scroll_offset.y + 1
        assert table.render_line(y).text.lstrip().startswith("1000 ")  # on screen
        assert 0 < len(built) < 60 and min(built) > 900


async def test_1000_workers_sort_over_the_whole_set(
    big: tuple[Any, ...], monkeypatch: pytest.MonkeyPatch
) -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        app.show(*snapshot(big))
        await pilot.pause()
        table = app.pane(0).query_one("#workers", KeyedTable)
        col = [c.key for c in WORKER_COLUMNS].index("req")
        rows = worker_rows(big[-1])  # every cell built: the reference
        want = [k for k, _ in sorted(rows, key=lambda r: sort_value(r[1][col]), reverse=True)]
        built = count_builds(monkeypatch)
        table.set_sort("req", True)  # most requests first
        app.show(*snapshot(big))
        await pilot.pause()
        assert table._order == want and table.cursor_key() == "w0"  # the cursor kept its row
        assert 0 < len(built) < 60


async def test_a_state_shown_twice_repaints_nothing() -> None:
    # The pane itself is not repainted either: a container's repaint re-composes all in it.
    app = make_app()
    frames = history(30, workers=16, busy=6, queue=5)
    async with app.run_test(size=SIZE) as pilot:
        app.show(*snapshot(frames))
        await pilot.pause()
        pane = app.pane(0)
        leaves = [*pane.query(SummaryPanel), *pane.query(QuietLabel)]
        leaves += [*pane.query(QuietSparkline), pane.query_one("#workers", KeyedTable), pane]
        calls = {w: count_refreshes(w) for w in leaves}
        app.show(*snapshot(frames))  # a new state with the same frames
        await pilot.pause()
        assert {w.id: c for w, c in calls.items() if c} == {}


async def test_the_table_repaints_only_the_lines_that_changed() -> None:
    app = make_app()
    frames = history(30, workers=16, busy=6, queue=5)
    async with app.run_test(size=SIZE) as pilot:
        app.show(*snapshot(frames[:-1]))
        await pilot.pause()
        table = app.pane(0).query_one("#workers", KeyedTable)
        calls = count_refreshes(table)
        app.show(*snapshot(frames))  # every worker served requests: 16 lines change
        await pilot.pause()
        regions = [r for c in calls for r in c]
        assert len(calls) == 1 and all(r.height == 1 for r in regions)
        assert sorted(r.y for r in regions) == list(range(1, 17))


async def test_a_sparkline_repaints_only_when_its_bars_change() -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        spark = app.pane(0).query_one("#hs-rps", QuietSparkline)
        for _ in range(2):  # the second at the width of the wide layout
            spark.show([1.0] * 300)
            await pilot.pause()
        calls = count_refreshes(spark)
        spark.show([1.0] * 301)  # the window slid over a steady load: the same bars
        await pilot.pause()
        assert calls == [] and len(spark.data or ()) == 301  # the newest data kept
        spark.show([1.0] * 300 + [5.0])  # a peak: new bars
        await pilot.pause()
        assert len(calls) == 1


def test_bars_cut_the_buckets_textual_cuts() -> None:
    for n in (0, 1, 2, 7, 35, 36, 299, 301):
        data = [float(i % 11) for i in range(n)]
        for width in (1, 13, 35, 64):
            assert list(Bars._buckets(data, width)) == list(
                SparklineRenderable._buckets(data, width)
            )
