"""The latency of real traffic as a person reads it in the TUI (`watch --latency`). Pure.

Every function here reads one `LatencyView` (pipeline/latencystage.py builds one per poll
into `InstanceState.latency`) and returns lines; nothing reads the clock, and nothing is
shown without `--latency`: the header of a watch without it is the one it always was.

- **The header** (`header_lines`): p50, p95, p99 and max of service time over the last 10 s
  and 60 s, one row each under one row of column names, so that the rows fit the summary's
  width at 80 columns. Queue wait follows: measured (two more rows) when the proxy stamps
  requests, else the mean Little's law gives from the listen queue (Lq / λ), said to be an
  estimate. Then what the numbers are worth: the share of the requests the stats counted
  that arrived as lines ("logged 98%"), the lines not recorded, the stamp's format and the
  proxy's clock skew.
- **Marks**, one line each and only when they hold: the format mismatch (the parser's one
  line naming the ini line to fix), untrusted data (the sender not proved to be the master:
  shown, never acted on), and a silent log while the stats count requests (`SILENT_SECONDS`).
- **A worker's percentiles** (`worker_lines`) for the detail screen, by its uWSGI worker id.
- **The slowest routes** (`route_lines`) for the routes screen: count, p50, p99 and share of
  the window's service time, in the recorder's order (by share), "other" last. The recorder
  already normalised the paths into routes and capped their number.

Times read through core/units.py (`ms`), shares through `percent`.
"""

from __future__ import annotations

from rich.text import Text

from uwsgitune.core.frame import Frame
from uwsgitune.core.latencyreport import (
    OTHER,
    OTHER_WORKER,
    LatencyView,
    LatencyWindow,
    Percentiles,
)
from uwsgitune.core.units import duration, ms, percent, reading
from uwsgitune.tui.sparklines import Series

SILENT_SECONDS = 10.0  # a log silent this long while the stats count requests is a mark
LOW_COVERAGE = 0.9  # below this share of the requests logged, the coverage reads yellow
POOR_COVERAGE = 0.5  # below this, red
LABEL = 11  # "service 10s"
CELL = 8  # " 12.1 ms", " 1.23 min" is cut to 8
NAMES = ("p50", "p95", "p99", "max")


def cells(p: Percentiles | None) -> str:
    """p50, p95, p99 and max in columns under `NAMES`."""
    if p is None:
        return ""
    return "".join(f"{ms(v):>{CELL}}" for v in (p.p50_ms, p.p95_ms, p.p99_ms, p.max_ms))


def spread_row(label: str, window: LatencyWindow, p: Percentiles | None) -> Text:
    out = Text(f"{label:<{LABEL}}", style="bold" if label.strip() else "")
    if p is None:
        out.append(f"  no request in {window.seconds}s", style="dim")
        return out
    out.append(cells(p))
    return out


def _coverage(view: LatencyView) -> Text:
    if view.coverage is None:
        return Text("logged ?", style="dim")
    style = (
        "bold red"
        if view.coverage < POOR_COVERAGE
        else ("yellow" if view.coverage < LOW_COVERAGE else "")
    )
    sampled = f"1 in {view.sample_every} sampled, " if view.sample_every > 1 else ""
    return Text(f"logged {sampled}{percent(view.coverage)}", style=style)


def _queue_estimate(view: LatencyView) -> Text:
    if view.little_wait_ms is None:
        return Text("queue unknown (no proxy stamp)", style="dim")
    return Text.assemble(
        ("queue ", "bold"),
        f"≈ {ms(view.little_wait_ms)} mean",
        (" (estimate)", "dim"),
    )


def _status(view: LatencyView) -> Text:
    out = Text()
    out.append_text(_coverage(view))  # first: the figure that says what the others are worth
    if not view.stamped:
        out.append("  ")
        out.append_text(_queue_estimate(view))
    # uWSGI's own forced lines, expected in a sampled log (in a plain one: a client's text)
    outside = view.faults.get("unsampled", 0) if view.sample_every > 1 else 0
    dropped = sum(view.faults.values()) - outside
    if dropped:
        out.append(f"  {dropped} not recorded", style="yellow")
    if outside:
        out.append(f"  {outside} outside the sample", style="dim")
    stamps = view.long.stamps
    if view.stamped and stamps.format is not None:
        out.append(f"  stamp {stamps.format}", style="dim")
    if stamps.skew_ms is not None and stamps.note is not None:
        out.append(f"  {stamps.note}", style="yellow")
    return out


def silence(view: LatencyView, frame: Frame | None) -> str | None:
    """The mark for a request log that says nothing while the stats count requests."""
    rps = frame.rps if frame is not None and frame.ok else None
    if rps is None or rps <= 0:
        return None
    counted = f"while the stats count {reading(rps, 'req/s')}"
    fix = f"check req-logger (uwsgitune doctor --latency {view.address})"
    if view.silent_for is None:
        if view.coverage == 0:
            return f"no request log line on {view.address} yet {counted}: {fix}"
        return None
    # a sampled log's lines come K times as far apart: silence is judged on that pace too
    if view.silent_for >= max(SILENT_SECONDS, 10 * view.sample_every / rps):
        return f"request log silent for {duration(view.silent_for)} {counted}: {fix}"
    return None


def marks(view: LatencyView, frame: Frame | None) -> list[Text]:
    out = []
    if view.mismatch is not None:
        out.append(Text(f"FORMAT MISMATCH: {view.mismatch}", style="bold red"))
    if not view.trusted:
        note = view.trust_note or "the request log's sender is not proved"
        out.append(Text(f"UNTRUSTED: {note}", style="bold yellow"))
    quiet = silence(view, frame)
    if quiet is not None:
        out.append(Text(f"SILENT: {quiet}", style="bold red"))
    return out


def header_lines(view: LatencyView, frame: Frame | None = None) -> list[Text]:
    """The summary's latency lines: service (and queue) percentiles, coverage, marks."""
    head = Text.assemble(
        (f"{'latency':<{LABEL}}", "bold"), ("".join(f"{n:>{CELL}}" for n in NAMES), "dim")
    )
    lines = [
        head,
        spread_row("service 10s", view.short, view.short.service),
        spread_row("        60s", view.long, view.long.service),
    ]
    if view.stamped:
        lines.append(spread_row("queue   10s", view.short, view.short.queue))
        lines.append(spread_row("        60s", view.long, view.long.queue))
        if view.short.total is not None:  # each request's wait + service
            lines.append(spread_row("total   10s", view.short, view.short.total))
    lines.append(_status(view))
    return lines + marks(view, frame)


def p99_series(view: LatencyView) -> Series:
    """The p99 sparkline: one p99 of service time per second of the last 60 (a second with
    no line reads 0, so that the time axis holds), its latest known value and maximum."""
    known = [v for v in view.p99_series if v is not None]
    return Series(
        key="p99",
        label="p99 60s",
        values=tuple(0.0 if v is None else v for v in view.p99_series),
        latest=ms(known[-1]) if known else "-",
        peak=ms(max(known)) if known else "-",
    )


def _worker_row(label: str, p: Percentiles | None, seconds: int) -> Text:
    if p is None:
        return Text(f"  {label}  no request logged in {seconds}s", style="dim")
    return Text(
        f"  {label}  p50 {ms(p.p50_ms)}  p95 {ms(p.p95_ms)}  p99 {ms(p.p99_ms)}  "
        f"max {ms(p.max_ms)}  n {p.count}"
    )


def worker_lines(view: LatencyView | None, wid: int) -> list[Text]:
    """One worker's service time over 10 s and 60 s (uWSGI's worker id), for the detail."""
    if view is None:
        return []
    out = [Text("latency of this worker (request log, service time):", style="bold")]
    if wid not in view.long.workers and OTHER_WORKER in view.long.workers:
        out.append(Text("  beyond the recorder's cap of workers: counted with the others", "dim"))
        return out
    for window in (view.short, view.long):
        out.append(_worker_row(f"{window.seconds}s", window.workers.get(wid), window.seconds))
    if not view.trusted:
        out.append(Text("  UNTRUSTED: shown, never acted on", style="yellow"))
    return out


ROUTE_WIDTH = 28  # the table fits the dialog at 80 columns


def route_lines(view: LatencyView | None, long: bool = True) -> list[Text]:
    """The slowest routes of a window, by share of its service time, "other" last."""
    if view is None:
        return [Text("no request log: start watch with --latency ADDR", style="dim")]
    window = view.long if long else view.short
    lines = [
        Text(
            f"slowest routes, last {window.seconds}s (by share of service time; "
            f"{window.requests} requests)",
            style="bold",
        ),
        Text(
            f"{'route':<{ROUTE_WIDTH}} {'count':>7} {'p50':>{CELL}} {'p99':>{CELL}} {'share':>6}",
            style="dim",
        ),
    ]
    if not window.routes:
        lines.append(Text(f"no request logged in the last {window.seconds}s", style="dim"))
    ordered = sorted(window.routes, key=lambda r: r.route == OTHER)  # stable: other last
    for r in ordered:
        name = reading(r.route)
        if len(name) > ROUTE_WIDTH:
            name = name[: ROUTE_WIDTH - 1] + "…"
        lines.append(
            Text.assemble(
                (f"{name:<{ROUTE_WIDTH}}", "dim" if r.route == OTHER else "bold"),
                f" {r.count:>7} {ms(r.p50_ms):>{CELL}} {ms(r.p99_ms):>{CELL}}"
                f" {percent(r.share):>6}",
            )
        )
    if not view.trusted:
        lines.append(Text("UNTRUSTED: shown, never acted on", style="yellow"))
    return lines
