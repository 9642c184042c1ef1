"""Pilot tests of the request log in the TUI (`watch --latency`): the header, the p99
sparkline, the routes screen (`l`) and the worker detail, from states as a driver publishes
them with a latency view from a real recorder."""

from __future__ import annotations

from dataclasses import replace

from tests.support.latencymix import traffic_view
from tests.tui.fakes import make_app, snapshot
from tests.tui.frames import history
from uwsgitune.core.latencyreport import LatencyView
from uwsgitune.core.units import ms
from uwsgitune.pipeline import InstanceState
from uwsgitune.tui.app import WatchApp
from uwsgitune.tui.screens import DetailScreen, RoutesScreen
from uwsgitune.tui.widgets import HistoryPanel, QuietLabel, QuietSparkline, SummaryPanel


def with_latency(view: LatencyView | None, n: int = 5) -> tuple[int, InstanceState]:
    index, state = snapshot(history(n))
    return index, replace(state, latency=view)


def footer_keys(app: WatchApp) -> set[str]:
    return {b.binding.key for b in app.active_bindings.values() if b.enabled and b.binding.show}


async def test_without_latency_nothing_changes_and_l_is_not_offered() -> None:
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        app.show(*with_latency(None))
        await pilot.pause()
        assert "latency" not in app.pane(0).query_one(SummaryPanel).plain
        assert not app.pane(0).query_one(HistoryPanel).has_class("latency")
        assert not app.pane(0).query_one("#hs-p99", QuietSparkline).display
        assert "l" not in footer_keys(app)
        await pilot.press("l")
        await pilot.pause()
        assert not isinstance(app.screen, RoutesScreen)


async def test_the_header_the_sparkline_and_the_routes_key_follow_the_view() -> None:
    app = make_app()
    view = traffic_view(coverage=0.98, little_wait_ms=3.2)
    async with app.run_test(size=(120, 40)) as pilot:
        app.show(*with_latency(view))
        await pilot.pause()
        text = app.pane(0).query_one(SummaryPanel).plain
        assert view.short.service is not None
        assert "service 10s" in text and ms(view.short.service.p99_ms) in text
        assert "logged 98%" in text and "≈ 3.2 ms mean (estimate" in text
        history_panel = app.pane(0).query_one(HistoryPanel)
        spark = history_panel.query_one("#hs-p99", QuietSparkline)
        assert spark.display and spark.data is not None and len(spark.data) == 60
        label = history_panel.query_one("#hl-p99", QuietLabel)
        assert "p99 60s" in str(label.render())
        assert "l" in footer_keys(app)

        await pilot.press("l")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, RoutesScreen)
        assert "last 60s" in screen.plain and "/api/orders" in screen.plain
        assert screen.plain.splitlines()[-1].startswith("other")
        await pilot.press("t")
        await pilot.pause()
        assert "last 10s" in screen.plain
        # Live: a new state reaches the open screen.
        app.show(*with_latency(traffic_view(trusted=False)))
        await pilot.pause()
        assert "UNTRUSTED" in screen.plain
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, RoutesScreen)
        assert "UNTRUSTED:" in app.pane(0).query_one(SummaryPanel).plain


async def test_the_worker_detail_shows_the_workers_percentiles() -> None:
    app = make_app()
    view = traffic_view(slow_worker=3)
    async with app.run_test(size=(120, 40)) as pilot:
        app.show(*with_latency(view))
        await pilot.pause()
        await pilot.press("down", "down", "enter")  # worker 3
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, DetailScreen)
        slow = view.long.workers[3]
        assert "latency of this worker" in screen.plain
        assert f"p99 {ms(slow.p99_ms)}" in screen.plain
