"""One instance's pane: summary, history, the worker/cores/vassal table, annotations.

The app assigns each new `InstanceState` to `state`; the pane renders it. Selections go up as
messages (`WorkerSelected`, `VassalSelected`); nothing here polls or reads the clock.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.reactive import reactive
from textual.widgets import ContentSwitcher

from uwsgitune.core.frame import Frame
from uwsgitune.pipeline import InstanceState
from uwsgitune.tui.annotate import annotations_for
from uwsgitune.tui.percentiles import header_lines, p99_series
from uwsgitune.tui.sparklines import Memo, series
from uwsgitune.tui.summary import emperor_lines, summary_lines
from uwsgitune.tui.table import KeyedTable
from uwsgitune.tui.widgets import AnnotationsPane, HistoryPanel, SummaryPanel
from uwsgitune.tui.workers import (
    CORE_COLUMNS,
    VASSAL_COLUMNS,
    WORKER_COLUMNS,
    Row,
    Rows,
    core_table,
    vassal_rows,
    worker_table,
)

TABLES: dict[str, Callable[[Frame], Rows | Sequence[Row]]] = {
    "workers": worker_table,  # built lazily: only the rows on screen
    "cores": core_table,
    "vassals": vassal_rows,
}


class WorkerSelected(Message):
    def __init__(self, index: int, slot: int) -> None:
        super().__init__()
        self.index = index
        self.slot = slot


class VassalSelected(Message):
    def __init__(self, index: int, name: str, pid: int) -> None:
        super().__init__()
        self.index = index
        self.name = name
        self.pid = pid


class InstancePane(Vertical):
    # No repaint of the pane itself: a container's repaint re-composes every widget in it;
    # each widget repaints what changed (render_state).
    state: reactive[InstanceState | None] = reactive(None, repaint=False)
    cores: reactive[bool] = reactive(False)

    def __init__(self, index: int, **kwargs: str) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.index = index
        self._memo: Memo = {}  # each frame's history values, computed once

    def compose(self) -> ComposeResult:
        with Horizontal(id="top"):
            yield SummaryPanel(id="summary")
            yield HistoryPanel(id="history")
        with ContentSwitcher(initial="workers", id="tables"):
            yield KeyedTable(WORKER_COLUMNS, id="workers")
            yield KeyedTable(CORE_COLUMNS, id="cores")
            yield KeyedTable(VASSAL_COLUMNS, id="vassals")
        yield AnnotationsPane(id="annotations")

    def on_mount(self) -> None:
        # The widgets a state goes to, looked up once (a query per widget per poll adds up).
        self._tables = {k: self.query_one(f"#{k}", KeyedTable) for k in TABLES}
        self._switcher = self.query_one("#tables", ContentSwitcher)
        self._summary = self.query_one(SummaryPanel)
        self._history = self.query_one(HistoryPanel)
        self._annotations = self.query_one(AnnotationsPane)
        self._tables["workers"].set_sort("wid", False)

    @property
    def table_id(self) -> str:
        state = self.state
        if state is not None and state.frame is not None and state.frame.emperor:
            return "vassals"
        return "cores" if self.cores else "workers"

    def active_table(self) -> KeyedTable:
        return self._tables[self.table_id]

    def focus_table(self) -> None:
        self.active_table().focus()

    def watch_state(self, state: InstanceState | None) -> None:
        if state is not None:
            self.render_state(state)

    def watch_cores(self, _cores: bool) -> None:
        if self.state is not None:
            self.render_state(self.state)

    def render_state(self, state: InstanceState) -> None:
        f = state.frame
        if f is None:
            return
        switcher = self._switcher
        if switcher.current != self.table_id:
            had_focus = self.app.focused is not None and self.app.focused.parent is switcher
            switcher.current = self.table_id
            if had_focus:
                self.focus_table()
        self.set_class(f.kind == "error", "stale")
        summary = emperor_lines(f, state.retry_in) if f.emperor else None
        lines = summary or summary_lines(f, state.frames, state.retry_in)
        latency = state.latency
        if latency is not None:  # `watch --latency`: the request log's percentiles
            self.add_class("latency")
            lines = [*lines, *header_lines(latency, f)]
        self._summary.show(lines)
        p99 = p99_series(latency) if latency is not None else None
        self._history.show(series(state.frames, memo=self._memo), p99)
        self.active_table().show(TABLES[self.table_id](f))
        self._annotations.show(annotations_for(state), f.t)

    def on_keyed_table_row_selected(self, event: KeyedTable.RowSelected) -> None:
        event.stop()
        key = event.key
        f = self.state.frame if self.state is not None else None
        if key.startswith("v") and f is not None:
            for v in f.vassals:
                if f"v{v.name}" == key:
                    self.post_message(VassalSelected(self.index, v.name, v.pid))
        elif key[:1] in ("w", "c"):
            self.post_message(WorkerSelected(self.index, int(key[1:].split(".")[0])))

    def on_keyed_table_header_selected(self, event: KeyedTable.HeaderSelected) -> None:
        """A click on a column header sorts on it; a second click reverses."""
        event.stop()
        table = event.table
        key = event.column
        reverse = not table.reverse if table.sort_key == key else False
        table.set_sort(key, reverse)
