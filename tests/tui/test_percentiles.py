"""The latency views of the TUI (`watch --latency`), pure: a view from a real recorder in,
lines out."""

from __future__ import annotations

from dataclasses import replace

from tests.support.latency import log_line, recorder_with, view_of
from tests.support.latencymix import ROUTES, traffic_view
from tests.tui.frames import history
from uwsgitune.core.latencyreport import OTHER
from uwsgitune.core.units import ms
from uwsgitune.tui.detail import detail_lines
from uwsgitune.tui.percentiles import (
    SILENT_SECONDS,
    header_lines,
    p99_series,
    route_lines,
    worker_lines,
)


def plain(lines: list) -> str:  # type: ignore[type-arg]
    return "\n".join(t.plain for t in lines)


def test_the_header_shows_p50_p95_p99_and_max_over_10s_and_60s() -> None:
    view = traffic_view(coverage=0.98, little_wait_ms=3.2)
    lines = [t.plain for t in header_lines(view, history(3)[-1])]
    assert lines[0].split() == ["latency", "p50", "p95", "p99", "max"]
    for row, window in ((lines[1], view.short), (lines[2], view.long)):
        p = window.service
        assert p is not None
        cells = [ms(v) for v in (p.p50_ms, p.p95_ms, p.p99_ms, p.max_ms)]
        assert row[11:] == "".join(f"{c:>8}" for c in cells)  # each under its name
    assert lines[1].startswith("service 10s") and lines[2].strip().startswith("60s")
    assert view.long.service is not None and view.short.service is not None
    assert view.long.service.count == 60 * sum(r for _, _, r in ROUTES)
    assert view.short.service.count == 10 * sum(r for _, _, r in ROUTES)


def test_without_a_stamp_the_queue_wait_is_the_estimate_and_says_so() -> None:
    text = plain(header_lines(traffic_view(coverage=0.98, little_wait_ms=3.2)))
    assert "logged 98%" in text
    assert "queue ≈ 3.2 ms mean (estimate)" in text
    assert "queue   10s" not in text
    unknown = plain(header_lines(traffic_view(coverage=None)))
    assert "queue unknown (no proxy stamp)" in unknown and "logged ?" in unknown


def test_with_a_stamp_the_queue_wait_has_its_own_percentiles() -> None:
    view = traffic_view(stamped=True, little_wait_ms=3.2)
    lines = [t.plain for t in header_lines(view)]
    queue = view.short.queue
    assert queue is not None
    assert lines[3].startswith("queue   10s") and ms(queue.p99_ms) in lines[3]
    assert lines[4].strip().startswith("60s")
    total = view.short.total  # each request's wait + service
    assert total is not None
    assert lines[5].startswith("total   10s") and ms(total.p99_ms) in lines[5]
    assert "estimate" not in plain(header_lines(view))
    assert "stamp t=seconds (nginx ${msec})" in lines[6]


def test_marks_untrusted_data_a_format_mismatch_and_a_silent_log() -> None:
    busy = history(3)[-1]  # the stats count requests
    assert busy.rps
    good = traffic_view()
    assert all(not t.plain.isupper() for t in header_lines(good, busy)[5:])
    assert len(header_lines(good, busy)) == 4  # no mark when all is well

    untrusted = plain(header_lines(traffic_view(trusted=False), busy))
    assert "UNTRUSTED: request log sender not proved (a test)" in untrusted

    rec = recorder_with([(1.0, [b"127.0.0.1 GET / 200 in 3 msecs\n"] * 20)])
    mismatch = plain(header_lines(view_of(rec, 1.0), busy))
    assert "FORMAT MISMATCH: 20 of 20 request log lines" in mismatch
    assert "log-format" in mismatch  # names the ini line

    quiet = replace(good, silent_for=SILENT_SECONDS + 35)
    text = plain(header_lines(quiet, busy))
    assert "SILENT: request log silent for 45s while the stats count" in text
    assert "uwsgitune doctor --latency 127.0.0.1:9118" in text
    assert "SILENT" not in plain(header_lines(quiet, replace(busy, rps=0.0)))
    assert "SILENT" not in plain(header_lines(replace(good, silent_for=2.0), busy))
    never = replace(good, silent_for=None, coverage=0.0)
    assert "no request log line on 127.0.0.1:9118 yet" in plain(header_lines(never, busy))


def test_low_coverage_reads_in_colour() -> None:
    def style(coverage: float) -> str:
        status = header_lines(traffic_view(coverage=coverage))[3]
        assert status.plain.startswith("logged") and not status.style  # the line's own: none
        return " ".join(str(s.style) for s in status.spans if s.start == 0)

    assert style(0.98) == "" and style(0.7) == "yellow" and style(0.3) == "bold red"


def test_a_sampled_log_says_so_and_its_forced_lines_are_not_drops() -> None:
    view = replace(traffic_view(coverage=0.97), sample_every=20, faults={"unsampled": 4})
    status = header_lines(view)[3].plain
    assert status.startswith("logged 1 in 20 sampled, 97%")
    assert "4 outside the sample" in status and "not recorded" not in status
    dropped = replace(view, faults={"unsampled": 4, "no_marker": 2})
    assert "2 not recorded" in header_lines(dropped)[3].plain
    plain = replace(view, sample_every=1)  # no sample: a ` uwt- ` is a client's, a drop
    assert "4 not recorded" in header_lines(plain)[3].plain


def test_the_p99_sparkline_follows_the_series() -> None:
    view = traffic_view()
    s = p99_series(view)
    assert len(s.values) == 60 and s.values == tuple(v or 0.0 for v in view.p99_series)
    known = [v for v in view.p99_series if v is not None]
    assert s.latest == ms(known[-1]) and s.peak == ms(max(known))
    gap = replace(view, p99_series=(None, 5.0, None))
    assert p99_series(gap).values == (0.0, 5.0, 0.0) and p99_series(gap).latest == "5 ms"


def test_the_worker_detail_shows_that_workers_percentiles() -> None:
    view = traffic_view(slow_worker=3)
    slow, fast = view.long.workers[3], view.long.workers[1]
    assert slow.p50_ms > 1.5 * fast.p50_ms
    text = plain(worker_lines(view, 3))
    assert f"p50 {ms(slow.p50_ms)}" in text and f"p99 {ms(slow.p99_ms)}" in text
    assert f"n {slow.count}" in text and "10s" in text and "60s" in text
    assert "no request logged in 10s" in plain(worker_lines(view, 7))
    frames = history(3)
    detail = plain(detail_lines(frames, 2, view))  # slot 2 is worker id 3
    assert f"p99 {ms(slow.p99_ms)}" in detail
    assert "latency" not in plain(detail_lines(frames, 2))  # without --latency: as before


def test_routes_by_share_with_other_last() -> None:
    view = traffic_view()
    lines = [t.plain for t in route_lines(view)]
    assert "last 60s" in lines[0]
    assert lines[1].split() == ["route", "count", "p50", "p99", "share"]
    rows = lines[2:]
    assert len(rows) == 11 and rows[-1].startswith(OTHER)  # the top 10, then other
    names = [r.split()[0] for r in rows]
    assert names[:2] == ["/api/orders", "/report/monthly"]
    shares = [r.share for r in view.long.routes if r.route != OTHER]
    assert shares == sorted(shares, reverse=True)
    orders = next(r for r in view.long.routes if r.route == "/api/orders")
    assert rows[0].split()[1:] == [
        str(orders.count),
        *ms(orders.p50_ms).split(),
        *ms(orders.p99_ms).split(),
        "27%",
    ]
    assert "last 10s" in route_lines(view, long=False)[0].plain
    assert "--latency" in route_lines(None)[0].plain


def test_a_window_without_requests_says_so() -> None:
    rec = recorder_with([(1.0, [log_line(5000)])])
    view = view_of(rec, 100.0)  # the line is long out of both windows
    text = plain(header_lines(view))
    assert "service 10s  no request in 10s" in text and "no request in 60s" in text
    assert "no request logged in the last 60s" in plain(route_lines(view))
