"""A table line in view, made in one pass: the same segments as Textual's Strip operations.

`view_line(strip, ...)` equals
`Strip.join([s.crop(0, first), s.crop(first + x, x + width)]).apply_style(base)
.extend_cell_length(width, base)` with `s = strip.apply_style(cursor)` (or `strip` with no
cursor), segment for segment, without the four Strips in between: a table repaints twenty-odd
of these lines per refresh.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from rich.cells import cell_len
from rich.segment import Segment
from rich.style import Style
from textual.strip import Strip


def cut(segments: Sequence[Segment], length: int, start: int, end: int) -> Iterator[Segment]:
    """The segments of cells [start, end) of a line of `length` cells, as `Strip.crop` cuts
    them (a segment split at each edge)."""
    start, end = max(0, start), min(length, end)
    if start == 0 and end == length:
        yield from segments
        return
    if end <= start or start >= length:
        return
    pos, i, n = 0, 0, len(segments)
    segment: Segment | None = None
    while i < n:
        segment, i = segments[i], i + 1
        end_pos = pos + cell_len(segment.text)
        if end_pos > start:
            segment = segment.split_cells(start - pos)[1]
            break
        pos = end_pos
    pos = start
    while segment is not None:
        end_pos = pos + cell_len(segment.text)
        if end_pos >= end:
            yield segment if end >= length else segment.split_cells(end - pos)[0]
            if end >= length:
                yield from segments[i:]
            return
        yield segment
        pos = end_pos
        segment, i = (segments[i], i + 1) if i < n else (None, i)


def view_line(
    strip: Strip, first: int, x: int, width: int, base: Style, cursor: Style | None
) -> Strip:
    """The line on screen: the first `first` cells fixed, the rest scrolled by `x`, cut to
    `width`, the cursor's style under the row's and the table's base under both."""
    segments, length = list(strip), strip.cell_length
    pieces: list[Segment] = []
    total = 0
    for start, end in ((0, first), (first + x, x + width)):
        piece = list(cut(segments, length, start, end))
        if any(t for t, _, _ in piece):  # Strip.join drops a piece with no characters
            pieces += piece
            total += _span(length, start, end)  # the length Strip.crop gives it
    if cursor:
        pieces = [Segment(t, None if c else cursor + s, c) for t, s, c in pieces]
    if base:
        pieces = [Segment(t, None if c else base + s, c) for t, s, c in pieces]
    if total < width:
        pieces.append(Segment(" " * (width - total), base))
        total = width
    return Strip(pieces, total)


def _span(length: int, start: int, end: int) -> int:
    return max(0, min(length, end) - max(0, start))
