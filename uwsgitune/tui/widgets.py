"""Widgets of an instance pane. Each one is given data (attributes down) and renders it.

A widget given what it already shows does not repaint: at a 1 s refresh most of the screen
is the same from one poll to the next, and a repaint is most of a refresh's CPU.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from rich.color import Color
from rich.console import Console, ConsoleOptions, Group
from rich.console import RenderResult as RichResult
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.app import ComposeResult, RenderResult
from textual.containers import Grid
from textual.renderables.sparkline import Sparkline as SparklineRenderable
from textual.widgets import Label, Sparkline, Static

from uwsgitune.core.units import duration
from uwsgitune.tui.sparklines import CHARTS, Series
from uwsgitune.tui.warnings import Annotation

SEVERITY_STYLE = {
    "critical": "bold white on red",
    "warning": "bold black on yellow",
    "info": "bold white on blue",
}


def looks(text: Text) -> tuple[object, ...]:
    """All that decides how a Text is drawn (Text's own == ignores its base style)."""
    return (
        text.plain,
        tuple(text.spans),
        text.style,
        text.justify,
        text.overflow,
        text.no_wrap,
        text.end,
        text.tab_size,
    )


Memo = dict[tuple[object, ...], list[Segment]]


class Lines(Group):
    """A Group of Texts that replays a Text's segments from its last paint when it looks the
    same and is given the same room: a poll changes a few lines of a panel, not all. The
    segments are Rich's own (`Console.render` of the Text, with the options it would get)."""

    def __init__(self, texts: Sequence[Text], memo: Memo) -> None:
        super().__init__(*texts)
        self.memo = memo  # the widget's: the segments of the Texts it painted lately

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RichResult:
        options = options.reset_height()  # what Console.render gives each renderable
        room = (
            id(console),
            console.tab_size,
            options.max_width,
            options.justify,
            options.overflow,
            options.no_wrap,
        )
        painted: Memo = {}
        for text in self.renderables:
            assert isinstance(text, Text)
            key = (looks(text), room)
            segments = painted.get(key) or self.memo.get(key)
            if segments is None:
                segments = list(console.render(text, options))
            painted[key] = segments
            yield from segments
        if len(self.memo) > 256:  # Texts not painted for a while: dropped
            self.memo.clear()
        self.memo.update(painted)


class SummaryPanel(Static):
    plain = ""  # the text shown, for tests and screen readers

    _looks: tuple[tuple[object, ...], ...] | None = None

    _memo: Memo | None = None

    def show(self, lines: Sequence[Text]) -> None:
        for line in lines:
            line.no_wrap, line.overflow = True, "ellipsis"
        drawn = tuple(looks(line) for line in lines)
        if drawn == self._looks:  # the same text in the same styles: nothing to repaint
            return
        self.plain = "\n".join(line.plain for line in lines)
        if self._memo is None:
            self._memo = {}
        self.update(
            Lines(lines, self._memo), layout=self._looks is None or len(drawn) != len(self._looks)
        )
        self._looks = drawn


class QuietLabel(Label):
    """A Label repainted only when its text or styles change."""

    _looks: tuple[object, ...] | None = None

    def show(self, text: Text) -> None:
        drawn = looks(text)
        if drawn != self._looks:
            self._looks = drawn
            self.update(text, layout=False)


class Bars(SparklineRenderable[float]):
    """Textual's sparkline renderable with its buckets cut in integers: the same buckets
    (int(Fraction(n, w) * i) == n * i // w), without Fraction arithmetic per bar; and
    each bar's style made once per colour (`bar_style`), not once per bar per paint."""

    @classmethod
    def _buckets(cls, data: list[float], num_buckets: int) -> Iterator[Sequence[float]]:
        n = len(data)
        for i in range(num_buckets):
            part = data[n * i // num_buckets : n * (i + 1) // num_buckets]
            if part:
                yield part

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RichResult:
        """Textual's `Sparkline.__rich_console__`, segment for segment."""
        width, height, data = self.width or options.max_width, self.height or 1, self.data
        if len(data) < 2:
            yield from super().__rich_console__(console, options)
            return
        steps = len(self.BARS)
        low, high = min(data), max(data)
        extent = high - low or 1
        ends = (self.min_color.color, self.max_color.color)
        buckets = tuple(self._buckets(list(data), num_buckets=width))
        step, at, ratios = len(buckets) / width, 0.0, []
        for _ in range(width):  # the bucket of each bar as Textual steps to it (float sums)
            ratios.append((self.summary_function(buckets[int(at)]) - low) / extent)
            at += step
        for row in reversed(range(height)):
            bottom, top = row * steps, (row + 1) * steps
            for ratio in ratios:
                bar = int(ratio * (steps * height - 1))
                if bar < bottom:
                    yield Segment(" ", None)
                else:
                    char = "█" if bar >= top else self.BARS[bar % steps]
                    yield Segment(char, bar_style(*ends, ratio))
            if row > 0:
                yield Segment.line()


def bar_style(low: Color | None, high: Color | None, ratio: float) -> Style:
    """`Style.from_color(blend_colors(low, high, ratio))`, one Style per colour."""
    if low is None or high is None or low.triplet is None or high.triplet is None:
        return Style.from_color(high)
    (r1, g1, b1), (r2, g2, b2) = low.triplet, high.triplet
    rgb = (int(r1 + (r2 - r1) * ratio), int(g1 + (g2 - g1) * ratio), int(b1 + (b2 - b1) * ratio))
    style = _BAR_STYLES.get(rgb)
    if style is None:
        if len(_BAR_STYLES) > 4096:
            _BAR_STYLES.clear()
        style = _BAR_STYLES[rgb] = Style.from_color(Color.from_rgb(*rgb))
    return style


_BAR_STYLES: dict[tuple[int, int, int], Style] = {}


def picture(data: Sequence[float], width: int, height: int) -> tuple[object, ...]:
    """What a Sparkline of `data` draws at `width` x `height`: its bars follow the maximum of
    each bucket, scaled between the minimum and the maximum of the data."""
    if len(data) < 2:
        return width, height, tuple(data)
    peaks = tuple(max(b) for b in Bars._buckets(list(data), max(1, width)))
    return width, height, min(data), max(data), peaks


class QuietSparkline(Sparkline):
    """A Sparkline repainted only when what it draws changes, not on every new datum (a
    window sliding over a steady load draws the same bars)."""

    _picture: tuple[object, ...] | None = None

    def show(self, data: Sequence[float]) -> None:
        drawn = picture(data, self.size.width, self.size.height)
        if drawn != self._picture:
            self._picture = drawn
            self.data = data
        else:  # the newest data, for a repaint on resize; no repaint now
            self.set_reactive(Sparkline.data, data)

    def render(self) -> RenderResult:
        """Sparkline.render, drawn by `Bars`."""
        _, base = self.background_colors
        low = self.get_component_styles("sparkline--min-color").color
        high = self.get_component_styles("sparkline--max-color").color
        low = base + (low if self.min_color is None else self.min_color)
        high = base + (high if self.max_color is None else self.max_color)
        return Bars(
            list(self.data or []),
            width=self.size.width,
            height=self.size.height,
            min_color=low.rich_color,
            max_color=high.rich_color,
            summary_function=self.summary_function,
        )


class HistoryPanel(Grid):
    """One labelled sparkline per metric over the last minutes: a grid of label and
    sparkline (no container per row: each widget on screen costs every repaint)."""

    def compose(self) -> ComposeResult:
        for m in CHARTS:
            yield QuietLabel(m.label, id=f"hl-{m.key}", classes="hlabel")
            yield QuietSparkline([], id=f"hs-{m.key}", classes="hspark")
        # The p99 of the request log (`watch --latency`): not displayed without it.
        yield QuietLabel("p99", id="hl-p99", classes="hlabel latency-only")
        yield QuietSparkline([], id="hs-p99", classes="hspark latency-only")

    _rows: dict[str, tuple[QuietLabel, QuietSparkline]] | None = None

    def show(self, series: Sequence[Series], p99: Series | None = None) -> None:
        """The metrics' sparklines, and the p99 of real traffic's when `p99` is given (the
        row shows from the first one on)."""
        if self._rows is None:  # each metric's widgets, looked up once, not on every poll
            self._rows = {
                key: (
                    self.query_one(f"#hl-{key}", QuietLabel),
                    self.query_one(f"#hs-{key}", QuietSparkline),
                )
                for key in (*(m.key for m in CHARTS), "p99")
            }
        if p99 is not None:
            self.add_class("latency")
            series = (*series, p99)
        for s in series:
            label, spark = self._rows[s.key]
            label.show(
                Text.assemble(
                    (f"{s.label:<8}", "bold"), f"{s.latest:>7}", (f" max {s.peak}", "dim")
                )
            )
            spark.show(list(s.values))


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
    _memo: Memo | None = None

    def show(self, items: Sequence[Annotation], now: float | None) -> None:
        texts = [annotation_text(a, now) for a in items]
        plain = "\n".join(t.plain for t in texts)
        if plain == self.plain and self.plain:
            return
        layout = plain.count("\n") != self.plain.count("\n") or not self.plain
        self.plain = plain
        if self._memo is None:
            self._memo = {}
        # Paragraph by paragraph (Rich wraps each line of a Text apart): the evidence and the
        # recommendation are painted again from the memo while "for 34s" ticks on.
        lines = [p for t in texts for p in t.split("\n", allow_blank=True)]
        content = Lines(lines, self._memo) if texts else Text("no warnings", style="dim green")
        self.update(content, layout=layout)
