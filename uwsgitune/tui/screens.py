"""Modal screens: help (?), worker detail (Enter on a worker row), the slowest routes (l)."""

from __future__ import annotations

from typing import ClassVar

from rich.console import Group
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.reactive import reactive
from textual.screen import ModalScreen
from textual.widgets import Label, Static

from uwsgitune.pipeline import InstanceState
from uwsgitune.tui.detail import detail_lines, memory_trend, rps_trend
from uwsgitune.tui.percentiles import route_lines
from uwsgitune.tui.widgets import QuietSparkline
from uwsgitune.tui.workers import WORKER_COLUMNS

KEYS = (
    ("q", "quit (closes this window first)"),
    ("?", "this help"),
    ("p", "pause / resume the display (polling goes on)"),
    ("s / S", "sort on the next column / reverse the sort (or click a header)"),
    ("c", "cores view (one row per thread, as uwsgitop's) / workers view"),
    ("+ / -", "faster / slower refresh"),
    ("Enter", "worker detail; on an Emperor's vassal: drill down"),
    ("a", "apply the tuner's advice, after a confirmation (watch --fifo)"),
    ("l", "slowest routes: count, p50, p99, share of time (watch --latency)"),
    ("[ / ] or 1-9", "previous / next / n-th instance (or click a tab)"),
)


def help_text() -> Group:
    lines = [Text("uwsgitune watch", style="bold")]
    lines += [Text.assemble((f"  {k:<14}", "bold cyan"), v) for k, v in KEYS]
    lines.append(Text("\nColumns", style="bold"))
    lines += [Text.assemble((f"  {c.label:<9}", "bold"), c.help) for c in WORKER_COLUMNS]
    lines.append(
        Text(
            "\nAVG½ is uWSGI's avg_rt = (avg + last)/2, a half-life average; MEAN is "
            "the true mean, Δrunning_time/Δrequests.",
            style="dim",
        )
    )
    lines.append(
        Text(
            "\nWith --latency (the request log): p50, p95, p99 and max of service time over the "
            "last 10 s and 60 s; queue wait measured from the proxy's X-Request-Start stamp, "
            "else its mean estimated from the listen queue (Little's law, marked ≈ estimate); "
            "logged: the share of the requests the stats counted that arrived as log lines. "
            "UNTRUSTED data is shown, never acted on.",
            style="dim",
        )
    )
    return Group(*lines)


class HelpScreen(ModalScreen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q,question_mark", "dismiss", "close"),
    ]

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="dialog"):
            yield Static(help_text())


class ConfirmScreen(ModalScreen[bool]):
    """A yes/no question: y applies, n or Escape cancels."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y", "answer(True)", "yes"),
        Binding("n,escape,q", "answer(False)", "no"),
    ]

    def __init__(self, text: str) -> None:
        super().__init__()
        self.text = text

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="dialog"):
            yield Static(Text(self.text))
            yield Label("y: apply   n / Esc: cancel", classes="hlabel")

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)


class DetailScreen(ModalScreen[None]):
    """One worker slot, live: the app keeps assigning the instance's state."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q,enter", "dismiss", "close"),
    ]
    state: reactive[InstanceState | None] = reactive(None, repaint=False)  # see InstancePane
    plain = ""

    def __init__(self, index: int, slot: int, state: InstanceState | None) -> None:
        super().__init__()
        self.index = index
        self.slot = slot
        self.set_reactive(DetailScreen.state, state)

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="dialog"):
            yield Static(id="detail-text")
            yield Label("memory (RSS) trend", classes="hlabel")
            yield QuietSparkline([], id="mem-trend")
            yield Label("req/s trend", classes="hlabel")
            yield QuietSparkline([], id="rps-trend")

    def on_mount(self) -> None:
        self.show(self.state)

    def watch_state(self, state: InstanceState | None) -> None:
        if self.is_mounted:
            self.show(state)

    def show(self, state: InstanceState | None) -> None:
        frames = state.frames if state is not None else ()
        lines = detail_lines(frames, self.slot, state.latency if state is not None else None)
        self.plain = "\n".join(line.plain for line in lines)
        self.query_one("#detail-text", Static).update(Group(*lines))
        self.query_one("#mem-trend", QuietSparkline).show(memory_trend(frames, self.slot)[0])
        self.query_one("#rps-trend", QuietSparkline).show(rps_trend(frames, self.slot))


class RoutesScreen(ModalScreen[None]):
    """The slowest routes of one instance, live (`l`, with `watch --latency`): the app keeps
    assigning the instance's state. `t` switches between the last 60 s and the last 10 s."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q,l", "dismiss", "close"),
        Binding("t", "window", "10s / 60s"),
    ]
    state: reactive[InstanceState | None] = reactive(None, repaint=False)
    long: reactive[bool] = reactive(True, init=False)
    plain = ""

    def __init__(self, index: int, state: InstanceState | None) -> None:
        super().__init__()
        self.index = index
        self.set_reactive(RoutesScreen.state, state)

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="dialog"):
            yield Static(id="routes-text")
            yield Label("t: last 10 s / last 60 s   l / Esc: close", classes="hlabel")

    def on_mount(self) -> None:
        self.show()

    def watch_state(self, _state: InstanceState | None) -> None:
        if self.is_mounted:
            self.show()

    def watch_long(self, _long: bool) -> None:
        self.show()

    def action_window(self) -> None:
        self.long = not self.long

    def show(self) -> None:
        state = self.state
        lines = route_lines(state.latency if state is not None else None, self.long)
        for line in lines:
            line.no_wrap, line.overflow = True, "ellipsis"
        self.plain = "\n".join(line.plain for line in lines)
        self.query_one("#routes-text", Static).update(Group(*lines))
