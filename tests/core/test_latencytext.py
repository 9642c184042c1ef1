"""`watch --once` and `--plain` with the request log: its block and its fields, added to what
the frame gives; without it, the text is the frame's alone."""

from __future__ import annotations

from dataclasses import replace

from tests.support.latencymix import traffic_view
from tests.tui.frames import history
from uwsgitune.core.units import ms
from uwsgitune.render.text import latency_lines, plain_line, summary


def test_the_once_summary_adds_the_percentiles_and_the_estimate() -> None:
    f = history(3)[-1]
    view = traffic_view(coverage=0.98, little_wait_ms=3.2)
    text = "\n".join(summary(f, view))
    p = view.short.service
    assert p is not None
    assert f"10s: p50 {ms(p.p50_ms)}  p95 {ms(p.p95_ms)}  p99 {ms(p.p99_ms)}" in text
    assert "(700 requests)" in text and "60s: p50" in text
    assert "≈ 3.2 ms mean, an estimate (Little's law" in text
    assert "logged    98% of the requests counted" in text
    stamped = "\n".join(summary(f, traffic_view(stamped=True, trusted=False)))
    assert "queue     10s: p50" in stamped and "estimate" not in stamped
    assert "UNTRUSTED: request log sender not proved" in stamped
    assert [line for line in summary(f, view) if line not in latency_lines(view)] == summary(f)


def test_the_plain_line_ends_in_the_request_logs_fields() -> None:
    f = history(3)[-1]
    view = traffic_view(coverage=0.98, little_wait_ms=3.2)
    line = plain_line(f, view)
    assert line.startswith(plain_line(f) + " ")
    p = view.short.service
    assert p is not None
    assert f"p99_ms={p.p99_ms:.2f}" in line and f"max_ms={p.max_ms:.2f}" in line
    assert line.endswith("queue_est_ms=3.20 logged=0.980")
    stamped = plain_line(f, traffic_view(stamped=True, trusted=False))
    assert "queue_p99_ms=" in stamped and stamped.endswith("trusted=no")


def test_a_sampled_log_is_said_in_both() -> None:
    f = history(3)[-1]
    view = replace(traffic_view(coverage=0.98, little_wait_ms=3.2), sample_every=20)
    assert "logged    1 in 20 sampled; 98% of the requests counted" in "\n".join(summary(f, view))
    assert plain_line(f, view).endswith("logged=0.980 sampled=1/20")
