"""Modal screens: help (?) and worker detail (Enter on a worker row)."""

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
        lines = detail_lines(frames, self.slot)
        self.plain = "\n".join(line.plain for line in lines)
        self.query_one("#detail-text", Static).update(Group(*lines))
        self.query_one("#mem-trend", QuietSparkline).show(memory_trend(frames, self.slot)[0])
        self.query_one("#rps-trend", QuietSparkline).show(rps_trend(frames, self.slot))
