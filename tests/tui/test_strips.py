"""The shortcuts of a refresh draw exactly what the long way draws (issue 15)."""

from __future__ import annotations

import random
from typing import Any

from rich.color import Color
from rich.console import Console, Group
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.renderables.sparkline import Sparkline
from textual.strip import Strip
from textual.widget import _Styled

from tests.tui.frames import disconnected, history
from uwsgitune.tui.sparklines import Memo as SeriesMemo
from uwsgitune.tui.sparklines import series
from uwsgitune.tui.strips import view_line
from uwsgitune.tui.warnings import Annotation, Severity
from uwsgitune.tui.widgets import Bars, Lines, Memo, annotation_text

STYLES = [None, Style.parse("bold"), Style.parse("red"), Style.parse("bold yellow")]
TEXTS = ["", "a", "abc", "  xy ", "界", "é1", "0123456789"]


def long_way(
    strip: Strip, first: int, x: int, width: int, base: Style, cursor: Style | None
) -> Strip:
    if cursor is not None:
        strip = strip.apply_style(cursor)
    view = Strip.join([strip.crop(0, first), strip.crop(first + x, x + width)])
    return view.apply_style(base).extend_cell_length(width, base)


def test_a_table_line_is_the_segments_strip_operations_make() -> None:
    rnd = random.Random(15)
    for _ in range(5000):
        segs = [Segment(rnd.choice(TEXTS), rnd.choice(STYLES)) for _ in range(rnd.randint(0, 8))]
        length = sum(s.cell_length for s in segs)
        strip = Strip(segs, length if rnd.random() < 0.8 else rnd.randint(0, length + 3))
        first, x, width = rnd.randint(0, 12), rnd.randint(0, 10), rnd.randint(1, 30)
        base = rnd.choice([Style(), Style.parse("white on #102030")])
        cursor = rnd.choice([None, Style(), Style.parse("on red")])
        want = long_way(strip, first, x, width, base, cursor)
        got = view_line(strip, first, x, width, base, cursor)
        assert list(got) == list(want) and got.cell_length == want.cell_length


def test_history_memo_gives_the_series_without_it() -> None:
    memo: SeriesMemo = {}
    frames = history(400)
    for n in (10, 11, 200, 400, 400):
        assert series(frames[:n], memo=memo) == series(frames[:n])
        assert len(memo) <= min(n, 301)
    gaps = disconnected(20)
    assert series(gaps, memo=memo) == series(gaps)


def test_bars_draw_the_segments_textual_draws() -> None:
    console = Console(width=200)
    rnd = random.Random(15)
    for _ in range(1000):
        n = rnd.choice([0, 1, 2, 3, rnd.randint(0, 400)])
        data = [float(rnd.randint(0, 20)) for _ in range(n)]
        width, height = rnd.randint(1, 70), rnd.choice([1, 1, 2, 3])
        low = rnd.choice([Color.from_rgb(10, 20, 30), Color.parse("red")])
        high = Color.from_rgb(rnd.randint(0, 255), 100, 200)
        kw: dict[str, Any] = {"width": width, "height": height, "min_color": low, "max_color": high}
        assert list(console.render(Bars(data, **kw))) == list(console.render(Sparkline(data, **kw)))


def _painted(renderable: Any, width: int) -> list[list[Segment]]:
    console = Console(width=300)
    options = console.options.update_width(width)
    segments = console.render(_Styled(renderable, Style.parse("white on #102030"), None), options)
    return list(Segment.split_and_crop_lines(segments, width, include_new_lines=False, pad=False))


def test_lines_paint_what_a_group_paints_and_replay_unchanged_texts() -> None:
    rnd = random.Random(15)
    words = ["the", "queue", "full", "→", "évidence", "界", "busy=0.0085", "100", "1024"]
    memo: Memo = {}
    for i in range(300):
        severity: Severity = rnd.choice(["critical", "warning", "info"])
        reason = " ".join(rnd.choice(words) for _ in range(rnd.randint(1, 30)))
        a = Annotation("k", severity, reason, "evidence: x=1", "listen 100 → 1024", 100.0 - i % 3)
        texts = [annotation_text(a, 160.0), Text(f"up {i % 4}s", "bold", no_wrap=True)]
        width = rnd.randint(10, 150)
        paragraphs = [p for t in texts for p in t.split("\n", allow_blank=True)]
        assert _painted(Lines(paragraphs, memo), width) == _painted(Group(*texts), width)
    assert memo  # what was painted is kept for the next paint
