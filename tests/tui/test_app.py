"""Pilot tests of the keys and views (no sockets: snapshots are given to the app)."""

from __future__ import annotations

from tests.tui.fakes import ScriptedSource, driver, make_app, snapshot
from tests.tui.frames import disconnected, emperor_frame, history, history_polls, instance, load
from uwsgitune.tui.app import WatchApp, next_rate, next_sort
from uwsgitune.tui.pane import InstancePane
from uwsgitune.tui.screens import DetailScreen, HelpScreen
from uwsgitune.tui.table import KeyedTable
from uwsgitune.tui.widgets import AnnotationsPane, SummaryPanel


def summary_text(app: WatchApp, index: int = 0) -> str:
    return app.pane(index).query_one(SummaryPanel).plain


def test_rate_and_sort_steps() -> None:
    assert next_rate(1.0, True) == 0.5 and next_rate(1.0, False) == 2.0
    assert next_rate(0.25, True) == 0.25 and next_rate(10.0, False) == 10.0
    assert next_sort(["a", "b"], None) == "a" and next_sort(["a", "b"], "b") == "a"


async def test_q_quits() -> None:
    app = make_app()
    async with app.run_test() as pilot:
        await pilot.press("q")
    assert app.return_code == 0


async def test_frames_fill_the_table_and_cursor_survives_refresh_and_sort() -> None:
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        app.show(*snapshot(history(3)))
        await pilot.pause()
        table = app.pane(0).query_one("#workers", KeyedTable)
        assert table.row_count == 4
        await pilot.press("down", "down")
        assert table.cursor_key() == "w2"
        app.show(*snapshot(history(4)))
        await pilot.pause()
        assert table.cursor_key() == "w2"
        await pilot.press("S")  # reverse: w3 first, cursor still on w2
        assert table.reverse and table.cursor_key() == "w2"
        assert table.get_row_index("w3") == 0
        await pilot.press("s")  # next column: share %
        assert table.sort_key == "share" and table.cursor_key() == "w2"


async def test_updates_change_cells_in_place() -> None:
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        inst = instance()
        frames = [inst.frame(i, load()) for i in range(-1, 2)][1:]
        app.show(*snapshot(frames))
        await pilot.pause()
        inst.pids[0] = 4242  # worker 0 respawned
        f = inst.frame(2, load())
        app.show(*snapshot((*frames, f)))
        await pilot.pause()
        table = app.pane(0).query_one("#workers", KeyedTable)
        assert table.get_cell("w0", "pid").text == "4242"


async def test_pause_freezes_the_display() -> None:
    app = make_app()
    async with app.run_test() as pilot:
        app.show(*snapshot(history(2)))
        await pilot.press("p")
        assert app.paused and "PAUSED" in app.sub_title
        app.show(*snapshot(history(2, queue=16)))
        await pilot.pause()
        assert "FULL" not in summary_text(app)
        await pilot.press("p")
        await pilot.pause()
        assert "FULL" in summary_text(app)


async def test_help_and_detail_screens() -> None:
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("escape")
        app.show(*snapshot(history(3, busy=1)))
        await pilot.pause()
        app.pane(0).query_one("#workers", KeyedTable).focus()
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, DetailScreen) and app.screen.slot == 0
        text = app.screen.plain
        assert "GET /io/0" in text and "respawns 1" in text
        await pilot.press("escape")
        assert not isinstance(app.screen, DetailScreen)


async def test_cores_toggle_and_rate_keys() -> None:
    d = driver(ScriptedSource())
    app = WatchApp([d], autopoll=False)
    async with app.run_test() as pilot:
        app.show(*snapshot(history(2, busy=1)))
        await pilot.press("c")
        await pilot.pause()
        pane = app.pane(0)
        assert pane.table_id == "cores"
        assert pane.query_one("#cores", KeyedTable).row_count == 4
        await pilot.press("plus")
        assert app.interval == 0.5 and d.interval == 0.5 and "0.5s" in app.sub_title
        await pilot.press("minus", "minus")
        assert app.interval == 2.0


async def test_disconnected_then_reconnected() -> None:
    app = make_app()
    async with app.run_test() as pilot:
        app.show(*snapshot(disconnected(3), retry_in=2.0))
        await pilot.pause()
        assert "DISCONNECTED" in summary_text(app) and "reconnecting in 2s" in summary_text(app)
        assert app.pane(0).has_class("stale")
        app.show(*snapshot(history(5)))
        await pilot.pause()
        assert "DISCONNECTED" not in summary_text(app) and not app.pane(0).has_class("stale")


async def test_annotations_pane_shows_warnings() -> None:
    # A full queue with every worker busy is the rules' finding now (issue 13).
    app = make_app()
    frames = history(30, busy=4, queue=16)
    async with app.run_test(size=(120, 40)) as pilot:
        app.show(*snapshot(frames, findings=True))
        await pilot.pause()
        text = app.pane(0).query_one(AnnotationsPane).plain
        assert "CRITICAL" in text and "listen queue is saturated" in text and "→" in text


async def test_several_instances_are_tabs() -> None:
    app = make_app(2)
    async with app.run_test(size=(100, 30)) as pilot:
        app.show(*snapshot(history(2)))
        app.show(*snapshot(history(2, workers=6), index=1))
        await pilot.press("right_square_bracket")
        assert app.current_pane().index == 1
        assert app.pane(1).query_one("#workers", KeyedTable).row_count == 6
        await pilot.press("1")
        assert app.current_pane().index == 0


async def test_emperor_shows_vassals() -> None:
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        app.show(*snapshot([emperor_frame()]))
        await pilot.pause()
        pane: InstancePane = app.pane(0)
        assert pane.table_id == "vassals"
        assert pane.query_one("#vassals", KeyedTable).row_count == 2
        pane.query_one("#vassals", KeyedTable).focus()
        await pilot.press("enter")  # pid 2001 is not a vassal here: "unknown" notice
        await pilot.pause()
        assert any("unknown" in n.message for n in app._notifications)


async def test_tiny_and_resized_terminals_never_crash() -> None:
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        app.show(*snapshot(history(5, busy=4, queue=16)))
        for size in ((10, 4), (1, 1), (3, 40), (200, 50), (80, 24)):
            await pilot.resize_terminal(*size)
            app.show(*snapshot(history(6, busy=4, queue=16)))
            await pilot.pause()
        await pilot.press("c", "question_mark", "escape", "q")
    assert app.return_code == 0


async def test_poll_threads_deliver_frames() -> None:
    source = ScriptedSource(history_polls(3))
    app = WatchApp([driver(source)])
    async with app.run_test() as pilot:
        for _ in range(50):
            await pilot.pause(0.05)
            if 0 in app.latest and len(app.latest[0].frames) == 3:
                break
        frame = app.latest[0].frame
        assert source.polls == 3 and frame is not None and frame.t == history(3)[-1].t
        assert "2.0.31" in summary_text(app)


async def test_mouse_sorts_on_header_and_selects_rows() -> None:
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        app.show(*snapshot(history(3)))
        await pilot.pause()
        table = app.pane(0).query_one("#workers", KeyedTable)
        await pilot.click(table, offset=(6, 0))  # the "%" header
        assert table.sort_key == "share" and not table.reverse
        await pilot.click(table, offset=(6, 0))
        assert table.reverse and table.get_row_index("w3") == 0
        await pilot.click(table, offset=(2, 2))  # second row: w2 when reversed
        assert table.cursor_key() == "w2"
        await pilot.click(table, offset=(2, 2))  # clicked again: detail
        await pilot.pause()
        assert isinstance(app.screen, DetailScreen) and app.screen.slot == 2
