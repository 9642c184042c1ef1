"""The `uwsgitune watch` Textual app and its entry point `run_tui`.

The app starts one driver per instance (pipeline/driver.py: each polls in its own thread)
and only assigns the `InstanceState`s they publish to the panes: attributes down, messages
up. Keys: q quit, ? help, p pause, s/S sort, c cores, +/- refresh, [ ] 1-9 tabs, a apply
the tuner's advice (with `watch --fifo`, after a confirmation), l the slowest routes (with
`watch --latency`: the key shows in the footer once a state carries a latency view).

The tuner beside the TUI (`watch ADDR --fifo PATH`) is the driver's, in recommend mode: it
advises at every poll and never acts by itself. `a` opens a confirmation with the advice on
screen; `y` asks the tuner (`request`) and polls at once. In the poll thread, the tuner
decides afresh on fresh stats and applies only if the decision is still the one confirmed,
under the apply lock (actuate/service.py); what became of it comes back typed in the state
(`StepResult.requested`) and is shown once. Quitting halts an apply in flight (verified
within its grace, else rolled back) and waits for its thread (`run_tui`).
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

from uwsgitune.core.address import AddressError, parse_address
from uwsgitune.pipeline import InstanceDriver, InstanceState, live_driver
from uwsgitune.tui.pane import InstancePane, VassalSelected, WorkerSelected
from uwsgitune.tui.screens import ConfirmScreen, DetailScreen, HelpScreen, RoutesScreen
from uwsgitune.tui.vassals import vassal_stats_address
from uwsgitune.tui.workers import CORE_COLUMNS, VASSAL_COLUMNS, WORKER_COLUMNS

RATES = (0.25, 0.5, 1.0, 2.0, 5.0, 10.0)
APPLY_WAIT_SECONDS = 20.0  # at quit: an apply's grace (10 s) and its rollback
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
        Binding("l", "routes", "routes"),
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
        drivers: Sequence[InstanceDriver],
        *,
        names: Sequence[str] | None = None,
        autopoll: bool = True,
        status: Callable[[], str] | None = None,
        handle_signals: bool = False,
    ) -> None:
        super().__init__()
        self.drivers = list(drivers)
        self.names = list(names or [d.state.stats_uri for d in drivers])
        self.autopoll = autopoll
        self.status = status
        self.handle_signals = handle_signals
        self.latest: dict[int, InstanceState] = {}
        self.latency = any(d.latency is not None for d in self.drivers)  # the `l` key shown
        self._told: dict[int, object] = {}  # the tuning whose apply outcome was shown
        first = self.drivers[0].interval if drivers else 1.0
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
            for i, d in enumerate(self.drivers):
                self._start(i, d)
        if self.status is not None:
            self.set_interval(1.0, self._subtitle)

    def _start(self, index: int, driver: InstanceDriver) -> None:
        """Its states posted to the app (thread-safe in Textual), polled in its thread."""
        driver.subscribe(lambda state: self.post_message(FrameArrived(index, state)))
        driver.start(name=f"poll-{index}")

    def stop_and_exit(self) -> None:
        self._stop_drivers()
        self.exit(0)

    def on_unmount(self) -> None:
        self._stop_drivers()

    def _stop_drivers(self) -> None:
        for d in self.drivers:
            d.stop()  # an apply in flight ends within its grace, in its own thread

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
        if state.latency is not None and not self.latency:
            self.latency = True
            self.refresh_bindings()
        tuning = state.tuning
        if tuning is not None and self._told.get(index) is not tuning:
            self._told[index] = tuning  # a poll mid-apply carries the same result: once
            if tuning.opened is not None:  # the tuner beside the TUI could not open whole
                for problem in tuning.opened.problems:
                    self.notify(f"tuner: {problem}", severity="warning", timeout=15)
            asked = tuning.requested
            if asked is not None:
                self.notify(asked.text, severity="information" if asked.ok else "error", timeout=8)
        if self.paused:
            return
        self.pane(index).state = state
        screen = self.screen
        if isinstance(screen, DetailScreen | RoutesScreen) and screen.index == index:
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
        tuner = self.drivers[index].tuner if index < len(self.drivers) else None
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
            f"Apply: {d.headline()}?\n\n"
            f"[{d.code}] {d.reason}\n\nThe stats are read again first; if the advice has "
            "changed, nothing is applied."
        )

        def confirmed(yes: bool | None) -> None:
            if yes:
                tuner.request(d.action, d.desired)
                self.drivers[index].poll_now()
                self.notify("applying after a fresh poll...", timeout=2)

        self.push_screen(ConfirmScreen(text), confirmed)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """The routes key only where there is a request log (`watch --latency`)."""
        if action == "routes":
            return self.latency
        return True

    def action_routes(self) -> None:
        """The slowest routes of this instance, live."""
        index = self.current_pane().index
        self.push_screen(RoutesScreen(index, self.latest.get(index)))

    def action_rate(self, faster: bool) -> None:
        self.interval = next_rate(self.interval, faster)
        for d in self.drivers:
            d.set_interval(self.interval)

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
        """The Emperor drill-down: a vassal's own stats socket in a new tab, where known."""
        name = message.name
        text = vassal_stats_address(message.pid, name)
        if text is None:
            self.notify(
                f"the stats socket of vassal {name} is unknown (no `stats` in its ini); "
                "give it as another ADDR",
                severity="warning",
            )
            return
        if text in self.names:
            self.action_goto(self.names.index(text))
            return
        try:
            address = parse_address(text)
        except AddressError as exc:
            self.notify(f"vassal {name}: {exc}", severity="warning")
            return
        driver = live_driver(address, interval=self.interval)
        self.run_worker(self.add_instance(text, driver), group="drill")

    async def add_instance(self, name: str, driver: InstanceDriver) -> int:
        """A new tab for `driver` (the Emperor drill-down), polled like the others."""
        index = len(self.names)
        self.names.append(name)
        self.drivers.append(driver)
        tabs = self.query_one(TabbedContent)
        await tabs.add_pane(TabPane(name, InstancePane(index, id=f"inst{index}"), id=f"tab{index}"))
        tabs.set_class(False, "single")
        if self.autopoll:
            self._start(index, driver)
        self.action_goto(index)
        return index


def run_tui(drivers: Sequence[InstanceDriver], args: argparse.Namespace | None = None) -> int:
    """Entry point of `uwsgitune watch` (TUI mode). Returns the exit code: 1 when an apply
    in flight at the quit did not end within `APPLY_WAIT_SECONDS` (see the audit log)."""
    app = WatchApp(drivers, handle_signals=True)
    code = int(app.run() or 0)
    return code or finish(app.drivers)


def finish(drivers: Sequence[InstanceDriver], wait: float = APPLY_WAIT_SECONDS) -> int:
    """After the app quit (its drivers stopped): wait for an apply in flight to end in its
    own thread (the driver's, which releases the lock). 1 if one did not end in time."""
    code = 0
    for d in drivers:
        if d.tuner is None or d.join(0.5):
            continue
        print("uwsgitune: waiting for the apply in flight to verify or roll back", flush=True)
        if not d.join(wait):
            print("uwsgitune: the apply in flight did not end within 20 s; see the audit log")
            code = 1
    return code
