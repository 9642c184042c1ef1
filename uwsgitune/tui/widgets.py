"""Widgets of an instance pane. Each one is given data (attributes down) and renders it."""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Group
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import DataTable, Label, Sparkline, Static

from uwsgitune.render.units import duration
from uwsgitune.tui.history import METRICS, Series
from uwsgitune.tui.warnings import Annotation
from uwsgitune.tui.workers import Cell, Column, Row, sort_value

SEVERITY_STYLE = {"critical": "bold white on red", "warning": "bold black on yellow",
                  "info": "bold white on blue"}


class SummaryPanel(Static):
    plain = ""  # the text shown, for tests and screen readers

    def show(self, lines: Sequence[Text]) -> None:
        self.plain = "\n".join(line.plain for line in lines)
        for line in lines:
            line.no_wrap, line.overflow = True, "ellipsis"
        self.update(Group(*lines))


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
                Text.assemble((f"{s.label:<8}", "bold"), f"{s.latest:>7}", (f" max {s.peak}", "dim"))
            )
            self.query_one(f"#hs-{s.key}", Sparkline).data = list(s.values)


def annotation_text(a: Annotation, now: float | None) -> Text:
    held = f" for {duration(now - a.since)}" if now is not None and a.since is not None else ""
    out = Text.assemble((f" {a.severity.upper()} ", SEVERITY_STYLE.get(a.severity, "")),
                        (f"{held} ", "dim"), " ", (a.reason, "bold"))
    if a.evidence:
        out.append(f"\n    evidence: {a.evidence}")
    if a.recommendation:
        out.append(f"\n    → {a.recommendation}", style="cyan")
    return out


class AnnotationsPane(Static):
    """Warnings and findings: severity, one-line reason, evidence, recommendation."""

    plain = ""

    def show(self, items: Sequence[Annotation], now: float | None) -> None:
        self.plain = "\n".join(annotation_text(a, now).plain for a in items)
        if not items:
            self.update(Text("no warnings", style="dim green"))
            return
        self.update(Group(*(annotation_text(a, now) for a in items)))


class KeyedTable(DataTable[Cell]):
    """A table whose rows are keyed: cursor and sort survive every refresh."""

    def __init__(self, columns: Sequence[Column], **kwargs: object) -> None:
        super().__init__(cursor_type="row", **kwargs)  # type: ignore[arg-type]
        self.spec = tuple(columns)
        self.fixed_columns = 1
        self.sort_key: str | None = None
        self.reverse = False
        self._cells: dict[str, tuple[Cell, ...]] = {}

    def on_mount(self) -> None:
        for c in self.spec:
            self.add_column(c.label, width=c.width, key=c.key)

    def cursor_key(self) -> str | None:
        if not self.row_count:
            return None
        row_key = self.coordinate_to_cell_key(self.cursor_coordinate).row_key
        return None if row_key.value is None else str(row_key.value)

    def show(self, rows: Sequence[Row]) -> None:
        """Add, update (changed cells only) and remove rows, then re-apply the sort."""
        current = self.cursor_key()
        seen = set()
        for key, cells in rows:
            seen.add(key)
            old = self._cells.get(key)
            if old is None:
                self.add_row(*cells, key=key)
            else:
                for col, before, after in zip(self.spec, old, cells):
                    if before != after:
                        self.update_cell(key, col.key, after)
            self._cells[key] = cells
        for key in [k for k in self._cells if k not in seen]:
            self.remove_row(key)
            del self._cells[key]
        self._resort(current)

    def set_sort(self, key: str | None, reverse: bool) -> None:
        current = self.cursor_key()
        self.sort_key, self.reverse = key, reverse
        for c in self.spec:
            arrow = ("▲" if not reverse else "▼") if c.key == key else ""
            self.columns[c.key].label = Text(c.label + arrow)  # type: ignore[index]
        self._resort(current)

    def _resort(self, cursor: str | None) -> None:
        if self.sort_key is None or not self.row_count:
            return
        self.sort(self.sort_key, key=sort_value, reverse=self.reverse)
        if cursor is not None and cursor in self._cells:
            self.move_cursor(row=self.get_row_index(cursor), animate=False, scroll=True)
