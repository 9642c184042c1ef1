"""The `uwsgitune watch` Textual app and its entry point `run_tui`.

The app owns the poll threads (one per instance, each stepping its pipeline) and only assigns
the `InstanceState`s they post to the panes. Keys: q quit, ? help, p pause, s/S sort,
c cores, +/- refresh, [ ] 1-9 tabs, a apply the tuner's advice (with `watch --fifo`,
after a confirmation).
"""

from __future__ import annotations

import argparse
import asyncio
import signal
from collections.abc import Callable, Sequence
from typing import ClassVar

from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.reactive import reactive
from textual.widgets import ContentSwitcher, Footer, Header, TabbedContent, TabPane

from uwsgitune.pipeline import InstancePipeline, InstanceState
from uwsgitune.tui.instance import InstancePane, VassalSelected, WorkerSelected
from uwsgitune.tui.polling import PollLoop
from uwsgitune.tui.screens import ConfirmScreen, DetailScreen, HelpScreen
from uwsgitune.tui.tuning import TuiTuner, applied, finish_applies
from uwsgitune.tui.workers import CORE_COLUMNS, VASSAL_COLUMNS, WORKER_COLUMNS

RATES = (0.25, 0.5, 1.0, 2.0, 5.0, 10.0)
EXIT_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class FrameArrived(Message):
    def __init__(self, index: int, state: InstanceState) -> None:
        super().__init__()
        self.index = index
        self.state = state


def next_rate(current: float, faster: bool) -> float:
    """The next step of RATES from `current` (an interval in seconds)."""
    if faster:
        return max([r for r in RATES if r < current] or [RATES[0]])
    return min([r for r in RATES if r > current] or [RATES[-1]])


def next_sort(keys: Sequence[str], current: str | None) -> str:
    if current is None or current not in keys:
        return keys[0]
    return keys[(list(keys).index(current) + 1) % len(keys)]


class WatchApp(App[int]):
    CSS_PATH = "app.tcss"
    TITLE = "uwsgitune"
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (120, "-wide")]  # noqa: RUF012
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "quit", "quit"),
        Binding("ctrl+c", "quit", "quit", show=False, priority=True),
        Binding("question_mark", "help", "help"),
        Binding("p", "pause", "pause"),
        Binding("s", "sort", "sort"),
        Binding("S", "sort_reverse", "reverse", show=False),
        Binding("c", "cores", "cores"),
        Binding("a", "apply", "apply"),
        Binding("plus,equals_sign", "rate(True)", "faster"),
        Binding("minus", "rate(False)", "slower"),
        Binding("right_square_bracket", "tab(1)", "next", show=False),
        Binding("left_square_bracket", "tab(-1)", "prev", show=False),
        *(Binding(str(n), f"goto({n - 1})", show=False) for n in range(1, 10)),
    ]
    paused: reactive[bool] = reactive(False)
    interval: reactive[float] = reactive(1.0)

    def __init__(
        self,
        pipelines: Sequence[InstancePipeline],
        *,
        names: Sequence[str] | None = None,
        autopoll: bool = True,
        status: Callable[[], str] | None = None,
        handle_signals: bool = False,
        tuners: dict[int, TuiTuner] | None = None,
    ) -> None:
        super().__init__()
        self.tuners = dict(tuners or {})
        self.pipelines = list(pipelines)
        self.names = list(names or [p.state.stats_uri for p in pipelines])
        self.autopoll = autopoll
        self.status = status
        self.handle_signals = handle_signals
        self.loops: list[PollLoop] = []
        self.latest: dict[int, InstanceState] = {}
        first = self.pipelines[0].watch.interval if pipelines else 1.0
        self.set_reactive(WatchApp.interval, first)

    def compose(self) -> ComposeResult:
        yield Header()
        with TabbedContent(id="instances"):
            for i, name in enumerate(self.names):
                with TabPane(name, id=f"tab{i}"):
                    yield InstancePane(i, id=f"inst{i}")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one(TabbedContent).set_class(len(self.names) == 1, "single")
        self.pane(0).focus_table()
        self._subtitle()
        if self.handle_signals:
            loop = asyncio.get_running_loop()
            for sig in EXIT_SIGNALS:
                loop.add_signal_handler(sig, self.stop_and_exit)
        if self.autopoll:
            for i, p in enumerate(self.pipelines):
                self._start_loop(i, p)
        if self.status is not None:
            self.set_interval(1.0, self._subtitle)

    def _start_loop(self, index: int, pipeline: InstancePipeline) -> None:
        loop = PollLoop(index, pipeline, self._deliver)
        tuner = self.tuners.get(index)
        if tuner is not None:  # its apply's waits poll through the pipeline, shown at once
            tuner.loop.poll = loop.poll_and_show
        self.loops.append(loop)
        self.run_worker(loop.run, thread=True, group="poll", name=f"poll-{index}")

    def _deliver(self, index: int, state: InstanceState) -> None:
        self.post_message(FrameArrived(index, state))  # thread-safe in Textual

    def stop_and_exit(self) -> None:
        self._stop_loops()
        self.exit(0)

    def on_unmount(self) -> None:
        self._stop_loops()

    def _stop_loops(self) -> None:
        for loop in self.loops:
            loop.stop()
        for tuner in self.tuners.values():
            tuner.halt()

    def pane(self, index: int) -> InstancePane:
        return self.query_one(f"#inst{index}", InstancePane)

    def current_pane(self) -> InstancePane:
        active = self.query_one(TabbedContent).active or "tab0"
        return self.pane(int(active.removeprefix("tab")))

    def on_frame_arrived(self, message: FrameArrived) -> None:
        self.show(message.index, message.state)

    def show(self, index: int, state: InstanceState) -> None:
        """Keep the latest state of each instance; display it unless paused."""
        self.latest[index] = state
        outcome = applied(state.tuning) if state.tuning is not None else None
        if outcome is not None:
            ok = outcome.startswith("applied")
            self.notify(outcome, severity="information" if ok else "error", timeout=8)
        if self.paused:
            return
        self.pane(index).state = state
        screen = self.screen
        if isinstance(screen, DetailScreen) and screen.index == index:
            screen.state = state

    def _subtitle(self) -> None:
        parts = [f"refresh {self.interval:g}s"]
        if self.paused:
            parts.append("PAUSED (p resumes)")
        if self.status is not None:
            parts.append(self.status())
        self.sub_title = "  ·  ".join(parts)

    def watch_paused(self, paused: bool) -> None:
        self._subtitle()
        if not paused:
            for index, state in list(self.latest.items()):
                self.show(index, state)

    def watch_interval(self, _interval: float) -> None:
        self._subtitle()

    async def action_quit(self) -> None:
        self.stop_and_exit()

    def action_help(self) -> None:
        self.push_screen(HelpScreen())

    def action_pause(self) -> None:
        self.paused = not self.paused

    def _sort(self, reverse_only: bool) -> None:
        pane = self.current_pane()
        table = pane.active_table()
        cols = {"workers": WORKER_COLUMNS, "cores": CORE_COLUMNS, "vassals": VASSAL_COLUMNS}
        keys = [c.key for c in cols[pane.table_id]]
        if reverse_only:
            table.set_sort(table.sort_key or keys[0], not table.reverse)
        else:
            table.set_sort(next_sort(keys, table.sort_key), table.reverse)
        self.notify(
            f"sorted on {table.sort_key}{' (reversed)' if table.reverse else ''}", timeout=1.5
        )

    def action_sort(self) -> None:
        self._sort(reverse_only=False)

    def action_sort_reverse(self) -> None:
        self._sort(reverse_only=True)

    def action_cores(self) -> None:
        pane = self.current_pane()
        pane.cores = not pane.cores
        pane.query_one("#tables", ContentSwitcher).current = pane.table_id
        pane.focus_table()

    def action_apply(self) -> None:
        """Apply the tuner's advice for this instance, after a confirmation."""
        index = self.current_pane().index
        tuner = self.tuners.get(index)
        if tuner is None:
            self.notify("no tuner here: start with `uwsgitune watch ADDR --fifo PATH`", timeout=4)
            return
        state = self.latest.get(index)
        d = state.tuning.decision if state is not None and state.tuning is not None else None
        if d is None or not d.is_change:
            why = d.reason if d is not None else "no stats yet"
            self.notify(f"nothing to apply: {why}", timeout=4)
            return
        text = (
            f"Apply: {d.action} {d.live} -> {d.desired} live workers via {d.via}?\n\n"
            f"[{d.code}] {d.reason}\n\nThe stats are read again first; if the advice has "
            "changed, nothing is applied."
        )

        def confirmed(yes: bool | None) -> None:
            if yes:
                tuner.request(d.action, d.desired)
                for loop in self.loops:
                    if loop.index == index:
                        loop.poll_now()
                self.notify("applying after a fresh poll...", timeout=2)

        self.push_screen(ConfirmScreen(text), confirmed)

    def action_rate(self, faster: bool) -> None:
        self.interval = next_rate(self.interval, faster)
        for loop in self.loops:
            loop.set_interval(self.interval)
        if not self.loops:
            for p in self.pipelines:
                p.watch.interval = self.interval

    def action_tab(self, step: int) -> None:
        index = self.current_pane().index
        self.action_goto((index + step) % len(self.names))

    def action_goto(self, index: int) -> None:
        if 0 <= index < len(self.names):
            self.query_one(TabbedContent).active = f"tab{index}"
            self.pane(index).focus_table()

    def on_worker_selected(self, message: WorkerSelected) -> None:
        state = self.latest.get(message.index)
        self.push_screen(DetailScreen(message.index, message.slot, state))

    def on_vassal_selected(self, message: VassalSelected) -> None:
        from uwsgitune.tui.drill import drill_down

        drill_down(self, message.name, message.pid)

    async def add_instance(self, name: str, pipeline: InstancePipeline) -> int:
        """A new tab for `pipeline` (the Emperor drill-down), polled like the others."""
        index = len(self.names)
        self.names.append(name)
        self.pipelines.append(pipeline)
        tabs = self.query_one(TabbedContent)
        await tabs.add_pane(TabPane(name, InstancePane(index, id=f"inst{index}"), id=f"tab{index}"))
        tabs.set_class(False, "single")
        if self.autopoll:
            self._start_loop(index, pipeline)
        self.action_goto(index)
        return index


def run_tui(
    pipelines: Sequence[InstancePipeline],
    args: argparse.Namespace | None = None,
    tuners: dict[int, TuiTuner] | None = None,
) -> int:
    """Entry point of `uwsgitune watch` (TUI mode). Returns the exit code."""
    app = WatchApp(pipelines, handle_signals=True, tuners=tuners)
    code = app.run()
    return int(code or 0) or finish_applies((tuners or {}).values())
