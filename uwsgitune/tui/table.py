"""A keyed, sortable table on Textual's line API: one cheap strip per visible row.

Textual's DataTable re-renders every visible cell through Rich whenever any cell changes,
which is most of a "top" screen's CPU at a 1 s refresh. Here the rows come as `Rows`: every
row is sorted on its sort value, but only the rows on screen are built (their cells, then
their strip), and only the lines whose row changed are repainted. At 1,000 workers a refresh
builds the 30-odd rows in view, not 1,000. Rows are keyed (`w3`), so the cursor follows its
row across refreshes and sorts. The first column stays in place while
the rest scrolls sideways. Mouse: click a row to move the cursor, click it again (or press
Enter) to select it; click a header to sort on it.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import ClassVar

from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.binding import Binding, BindingType
from textual.geometry import Offset, Region, Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip

from uwsgitune.tui.strips import view_line
from uwsgitune.tui.workers import Cell, Column, Row, Rows, sort_key

GAP = 1  # blank columns between cells
MARGIN = 8  # rows kept built beyond the view, either side
Painted = tuple[str | None, Strip | None, bool]
NO_ROWS = Rows((), lambda i: (), lambda i, c: 0.0)


@lru_cache(maxsize=256)
def _style(spec: str) -> Style:
    return Style.parse(spec) if spec else Style()


def _fit(text: str, width: int, right: bool) -> str:
    text = text[:width]
    return text.rjust(width) if right else text.ljust(width)


def _same(old: Painted | None, new: Painted) -> bool:
    """Whether a line shows the same: the same row, cursor, and strip (the very object: a
    row's strip is kept while its cells are unchanged)."""
    return old is not None and old[0] == new[0] and old[1] is new[1] and old[2] == new[2]


class KeyedTable(ScrollView, can_focus=True):
    COMPONENT_CLASSES: ClassVar[set[str]] = {"keyed-table--header", "keyed-table--cursor"}
    DEFAULT_CSS = """
    KeyedTable { background: $surface; }
    KeyedTable > .keyed-table--header { background: $primary 40%; text-style: bold; }
    KeyedTable > .keyed-table--cursor { background: $accent 50%; }
    KeyedTable:blur > .keyed-table--cursor { background: $accent 25%; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("up", "move(-1)", show=False),
        Binding("down", "move(1)", show=False),
        Binding("pageup", "page(-1)", show=False),
        Binding("pagedown", "page(1)", show=False),
        Binding("home", "jump(0)", show=False),
        Binding("end", "jump(-1)", show=False),
        Binding("enter", "select", show=False),
        Binding("left", "scroll_left", show=False),
        Binding("right", "scroll_right", show=False),
    ]

    class RowSelected(Message):
        def __init__(self, table: KeyedTable, key: str) -> None:
            super().__init__()
            self.table = table
            self.key = key

    class HeaderSelected(Message):
        def __init__(self, table: KeyedTable, column: str) -> None:
            super().__init__()
            self.table = table
            self.column = column

    def __init__(self, columns: Sequence[Column], **kwargs: str) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.spec = tuple(columns)
        self.sort_key: str | None = None
        self.reverse = False
        self.cursor = 0
        self._rows = NO_ROWS
        self._index: dict[str, int] = {}  # key -> row index in `_rows`
        self._order: list[str] = []
        self._built: dict[str, tuple[int, tuple[Cell, ...], Strip]] = {}  # key -> gen, cells
        self._gen = 0  # bumped by each `show`: a row built before must be built again
        self._painted: dict[int, Painted] = {}  # line -> what it shows
        self._first = self.spec[0].width + GAP if self.spec else 0
        self._width = sum(c.width + GAP for c in self.spec)
        self._base = self._cursor_style = self._header_style = Style()
        self._view: tuple[int, Offset] | None = None  # width and scroll, while painting

    # data in

    @property
    def row_count(self) -> int:
        return len(self._order)

    def cursor_key(self) -> str | None:
        return self._order[self.cursor] if 0 <= self.cursor < len(self._order) else None

    def get_row_index(self, key: str) -> int:
        return self._order.index(key)

    def get_cell(self, key: str, column: str) -> Cell:
        return self._cells(key)[[c.key for c in self.spec].index(column)]

    def show(self, rows: Rows | Sequence[Row]) -> None:
        """New rows: keep the cursor on its row; repaint only the lines in view that changed."""
        current = self.cursor_key()
        self._rows = rows if isinstance(rows, Rows) else Rows.of(rows)
        self._index = {key: i for i, key in enumerate(self._rows.keys)}
        self._order = list(self._rows.keys)
        self._gen += 1
        self._resort(current, repaint=False, natural=True)
        self._repaint_changed()

    def set_sort(self, key: str | None, reverse: bool) -> None:
        current = self.cursor_key()
        self.sort_key, self.reverse = key, reverse
        self._resort(current)

    def _resort(self, cursor: str | None, repaint: bool = True, natural: bool = False) -> None:
        """Sort `_order` on the sort column, stably; `natural`: `_order` is the rows' own
        order, so their values are sorted by row index (a column read in one go)."""
        keys = [c.key for c in self.spec]
        if self.sort_key in keys and natural:
            values = [sort_key(v) for v in self._rows.column(keys.index(self.sort_key))]
            rows = sorted(range(len(values)), key=values.__getitem__, reverse=self.reverse)
            self._order = [self._rows.keys[i] for i in rows]
        elif self.sort_key in keys:
            c, value, index = keys.index(self.sort_key), self._rows.sort, self._index
            self._order.sort(key=lambda k: sort_key(value(index[k], c)), reverse=self.reverse)
        if cursor in self._index:
            self.cursor = self._order.index(cursor)
        self.cursor = max(0, min(self.cursor, len(self._order) - 1))
        self.virtual_size = Size(self._width, len(self._order) + 1)
        if repaint:
            self.refresh()

    def _cells(self, key: str) -> tuple[Cell, ...]:
        return self._rows.cells(self._index[key])

    def _line(self, y: int, top: int) -> Painted:
        """What line `y` shows now (scrolled to row `top`): its row's key, that row's strip,
        whether the cursor's."""
        index = top + y - 1
        if y == 0 or index >= len(self._order):
            return None, None, False
        key = self._order[index]
        return key, self._row(key), index == self.cursor

    def _repaint_changed(self) -> None:
        """Build the rows in view; repaint the lines that differ from what was painted."""
        top, height = self.scroll_offset.y, self.size.height
        width = max(self.virtual_size.width, self.size.width)
        painted, line = self._painted.get, self._line
        changed = [y for y in range(1, height) if not _same(painted(y), line(y, top))]
        if changed:  # one refresh for them all: each call is a whole round of bookkeeping
            self.refresh(*(Region(0, y, width, 1) for y in changed))
        keep = set(self._order[max(0, top - MARGIN) : top + height + MARGIN])
        self._built = {k: v for k, v in self._built.items() if k in keep}

    # rendering: styles are looked up once per paint, not once per line

    def render_lines(self, crop: Region) -> list[Strip]:
        self._base = self.rich_style
        self._cursor_style = self.get_component_rich_style("keyed-table--cursor")
        self._header_style = self.get_component_rich_style("keyed-table--header")
        self._view = (self.size.width, self.scroll_offset)  # for each line of this paint
        try:
            return super().render_lines(crop)
        finally:
            self._view = None

    def _header(self) -> Strip:
        style = self._header_style
        segs = []
        for c in self.spec:
            arrow = ("▼" if self.reverse else "▲") if c.key == self.sort_key else ""
            segs.append(Segment(_fit(c.label + arrow, c.width, False) + " " * GAP, style))
        return Strip(segs)

    def _row(self, key: str) -> Strip:
        """The row's strip: built once per `show`, and only rebuilt if its cells changed."""
        built = self._built.get(key)
        if built is not None and built[0] == self._gen:
            return built[2]
        cells = self._cells(key)
        strip = built[2] if built is not None and built[1] == cells else self._strip(cells)
        self._built[key] = (self._gen, cells, strip)
        return strip

    def _strip(self, cells: tuple[Cell, ...]) -> Strip:
        """One row as few segments as its styles allow: unstyled cells and the gaps between
        them are one run of text (every later step, Textual's included, is per segment)."""
        segs: list[Segment] = []
        run: list[str] = []
        spec = ""
        gap = " " * GAP
        for col, cell in zip(self.spec, cells, strict=False):
            if cell.style != spec:
                if run:
                    segs.append(Segment("".join(run), _style(spec) if spec else None))
                run, spec = [], cell.style
            run.append(_fit(cell.text, col.width, cell.right))
            if spec:  # the gap is unstyled
                segs.append(Segment("".join(run), _style(spec)))
                run, spec = [], ""
            run.append(gap)
        if run:
            segs.append(Segment("".join(run), _style(spec) if spec else None))
        return Strip(segs, self._width)

    def render_line(self, y: int) -> Strip:
        width, (scroll_x, scroll_y) = self._view or (self.size.width, self.scroll_offset)
        self._painted[y] = self._line(y, scroll_y)
        if y == 0:
            strip = self._header()
            first = self._first
            view = Strip.join(
                [strip.crop(0, first), strip.crop(first + scroll_x, scroll_x + width)]
            )
            return view.apply_style(self._base).extend_cell_length(width, self._base)
        index = scroll_y + y - 1
        if index >= len(self._order):
            return Strip.blank(width, self._base)
        cursor = self._cursor_style if index == self.cursor else None
        strip = self._row(self._order[index])
        return view_line(strip, self._first, scroll_x, width, self._base, cursor)

    # moving and selecting

    def move_to(self, index: int) -> None:
        if not self._order:
            return
        self.cursor = max(0, min(index, len(self._order) - 1))
        rows = max(1, self.size.height - 1)
        top = self.scroll_offset.y
        if self.cursor < top:
            self.scroll_to(y=self.cursor, animate=False)
        elif self.cursor >= top + rows:
            self.scroll_to(y=self.cursor - rows + 1, animate=False)
        self.refresh()

    def action_move(self, step: int) -> None:
        self.move_to(self.cursor + step)

    def action_page(self, step: int) -> None:
        self.move_to(self.cursor + step * max(1, self.size.height - 2))

    def action_jump(self, where: int) -> None:
        self.move_to(0 if where == 0 else len(self._order) - 1)

    def action_select(self) -> None:
        key = self.cursor_key()
        if key is not None:
            self.post_message(self.RowSelected(self, key))

    def on_click(self, event: events.Click) -> None:
        if event.y == 0:
            x = event.x if event.x < self._first else event.x + self.scroll_offset.x
            edge = 0
            for c in self.spec:
                edge += c.width + GAP
                if x < edge:
                    self.post_message(self.HeaderSelected(self, c.key))
                    return
            return
        index = self.scroll_offset.y + event.y - 1
        if index < len(self._order):
            was = self.cursor
            self.move_to(index)
            if was == index or event.chain > 1:
                self.action_select()
