"""Widgets of an instance pane. Each one is given data (attributes down) and renders it."""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Group
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import Label, Sparkline, Static

from uwsgitune.render.units import duration
from uwsgitune.tui.history import METRICS, Series
from uwsgitune.tui.warnings import Annotation

SEVERITY_STYLE = {
    "critical": "bold white on red",
    "warning": "bold black on yellow",
    "info": "bold white on blue",
}


class SummaryPanel(Static):
    plain = ""  # the text shown, for tests and screen readers

    _count = -1

    def show(self, lines: Sequence[Text]) -> None:
        self.plain = "\n".join(line.plain for line in lines)
        for line in lines:
            line.no_wrap, line.overflow = True, "ellipsis"
        self.update(Group(*lines), layout=len(lines) != self._count)
        self._count = len(lines)


class HistoryPanel(Vertical):
    """One labelled sparkline per metric over the last minutes."""

    def compose(self) -> ComposeResult:
        for m in METRICS:
            with Horizontal(classes="hrow"):
                yield Label(m.label, id=f"hl-{m.key}", classes="hlabel")
                yield Sparkline([], id=f"hs-{m.key}", classes="hspark")

    def show(self, series: Sequence[Series]) -> None:
        for s in series:
            self.query_one(f"#hl-{s.key}", Label).update(
                Text.assemble(
                    (f"{s.label:<8}", "bold"), f"{s.latest:>7}", (f" max {s.peak}", "dim")
                ),
                layout=False,
            )
            self.query_one(f"#hs-{s.key}", Sparkline).data = list(s.values)


def annotation_text(a: Annotation, now: float | None) -> Text:
    held = f" for {duration(now - a.since)}" if now is not None and a.since is not None else ""
    out = Text.assemble(
        (f" {a.severity.upper()} ", SEVERITY_STYLE.get(a.severity, "")),
        (f"{held} ", "dim"),
        " ",
        (a.reason, "bold"),
    )
    if a.evidence:
        out.append(f"\n    evidence: {a.evidence}")
    if a.recommendation:
        out.append(f"\n    → {a.recommendation}", style="cyan")
    return out


class AnnotationsPane(Static):
    """Warnings and findings: severity, one-line reason, evidence, recommendation."""

    plain = ""

    def show(self, items: Sequence[Annotation], now: float | None) -> None:
        texts = [annotation_text(a, now) for a in items]
        plain = "\n".join(t.plain for t in texts)
        if plain == self.plain and self.plain:
            return
        layout = plain.count("\n") != self.plain.count("\n") or not self.plain
        self.plain = plain
        content = Group(*texts) if texts else Text("no warnings", style="dim green")
        self.update(content, layout=layout)
