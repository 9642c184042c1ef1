"""A sampled request log (uwsgitune/uwsgi_sample.py): its lines carry their K before the
marker, uWSGI's own forced lines are left out of the sample, and every consumer reads K."""

from __future__ import annotations

import pytest

from tests.core.test_logline_batch import FAST, PREFIX, fast_scan, tail
from uwsgitune.core.latency import LatencyRecorder
from uwsgitune.core.latencyform import latency_summary, view_from_summary
from uwsgitune.core.logline import (
    SAMPLED_TAIL_FORMAT,
    TAIL_FORMAT,
    LineFault,
    LineTally,
    log_format,
    parse_batch,
    parse_raw,
    sample_every,
)


def sampled(k: bytes = b"20", **fields: bytes) -> bytes:
    return PREFIX + b" uwk" + k + b" " + tail(**fields)


def outside(**fields: bytes) -> bytes:
    """A line uWSGI logged on its own (log-5xx ...): the hook set no variable."""
    return PREFIX + b" uwk- " + tail(**fields).replace(b"uwt1 ", b"uwt- ", 1)


def test_the_sampled_format_is_the_plain_one_with_the_two_variables_before_it() -> None:
    assert "uwk%(uwk) uwt%(uwt) " + TAIL_FORMAT.removeprefix("uwt1 ") == SAMPLED_TAIL_FORMAT
    assert log_format("%(status)", sampled=True) == f"%(status) {SAMPLED_TAIL_FORMAT}"
    assert log_format("%(status)") == f"%(status) {TAIL_FORMAT}"


def test_a_sampled_line_parses_as_a_plain_one_and_says_its_k() -> None:
    line = sampled()
    assert parse_raw(line) == parse_raw(PREFIX + b" " + tail())
    assert sample_every(line) == 20
    assert sample_every(PREFIX + b" " + tail()) == 1  # the plain tail
    assert sample_every(tail()) == 1  # the tail opens the line
    assert sample_every(sampled(b"1")) == 1
    assert sample_every(b"garbage") is None


@pytest.mark.parametrize("k", [b"0", b"-", b"x", b"12345678", b"", b"2000000"])
def test_a_k_that_is_no_count_reads_as_every_request(k: bytes) -> None:
    assert type(parse_raw(sampled(k))) is tuple
    assert sample_every(sampled(k)) == 1


def test_a_client_cannot_choose_the_k() -> None:
    """The token read is the one before the marker parse_raw took; a client's text lies in
    the user's part (before it) or in the tail's uri (after it: two tails, AMBIGUOUS)."""
    crafted_user = b'1.2.3.4 "GET /a uwk1 b" 200 uwk20 ' + tail()
    assert sample_every(crafted_user) == 20
    crafted_tail = sampled(uri=b"/x uwk1 " + tail())
    assert parse_raw(crafted_tail) is LineFault.AMBIGUOUS
    assert sample_every(crafted_tail) is None


@pytest.mark.parametrize("fast", FAST)
def test_a_minority_of_crafted_lines_cannot_set_the_k(fast: bool) -> None:
    """With the plain tail and a user format that ends in a field the client sends (its user
    agent), a client's line reads `uwk1000000` before the marker: one line in a drain, or a
    few over time, leave K at the instance's."""
    rec = LatencyRecorder(fast=fast)
    plain = PREFIX + b" " + tail()
    forged = b'1.2.3.4 "GET /x" uwk1000000 ' + tail()
    assert sample_every(forged) == 1_000_000  # the line alone says what the client wrote
    rec.ingest([plain] * 40 + [forged], now=1.0)  # the forged line last
    assert rec.sample_every == 1
    for i in range(10):  # small drains, one forged line in three
        rec.ingest([forged] if i % 3 == 0 else [plain], now=2.0 + i)
    assert rec.sample_every == 1
    for i in range(3):  # the instance samples now: three drains (24 readings) outvote 9
        rec.ingest([sampled()] * 200, now=20.0 + i)
    assert rec.sample_every == 20


def test_a_line_outside_the_sample_is_left_out_and_is_not_a_format_fault() -> None:
    line = outside(status=b"500")
    assert parse_raw(line) is LineFault.UNSAMPLED
    assert parse_raw(b"uwk- uwt- 1 2 3") is LineFault.UNSAMPLED
    assert parse_raw(b"uwt- 1795732664212899 5 500 1 2 GET [-] /x") is LineFault.UNSAMPLED
    assert sample_every(line) is None
    tally = LineTally()
    for _ in range(10):
        tally.count(parse_raw(line))
    assert tally.faults[LineFault.UNSAMPLED] == 10 and tally.mismatch() is None


def test_a_client_cannot_pass_a_line_outside_the_sample_for_a_sampled_one() -> None:
    """A forced line whose uri holds a whole sampled tail: the `uwt- ` of the real tail
    leaves the line out, wherever the crafted marker lies."""
    in_user_part = b'1.2.3.4 "GET /a uwk3 ' + tail() + b'" 500 uwk- ' + tail()[:0]
    in_user_part += tail().replace(b"uwt1 ", b"uwt- ", 1)
    after = outside(uri=b"/x uwk3 " + tail())
    for line in (in_user_part, after):
        assert parse_raw(line) is LineFault.UNSAMPLED, line
        assert parse_batch([sampled(), line]) is None
        assert fast_scan([sampled(), line]) is None


def test_the_batch_paths_take_sampled_lines_and_refuse_a_batch_with_one_outside() -> None:
    lines = [sampled(), sampled(b"20", uri=b"/y"), sampled(b"20", status=b"404")]
    rows = parse_batch(lines)
    assert rows is not None and len(rows) == 3
    assert fast_scan(lines) == rows
    assert parse_batch([*lines, outside()]) is None
    assert fast_scan([*lines, outside()]) is None


@pytest.mark.parametrize("fast", FAST)
def test_the_recorder_keeps_the_sample_and_its_k(fast: bool) -> None:
    rec = LatencyRecorder(fast=fast)
    assert rec.sample_every == 1
    lines = [sampled(service=str(1000 * (i + 1)).encode()) for i in range(50)]
    forced = [outside(status=b"500", service=b"99000000") for _ in range(7)]
    assert rec.ingest(lines + forced, now=1.0) == 50  # the last line is outside: K stays known
    assert rec.sample_every == 20
    assert rec.tally.faults[LineFault.UNSAMPLED] == 7 and rec.tally.mismatch() is None
    w = rec.window(1.5, 10)
    assert w.requests == 50 and w.service is not None
    assert w.service.max_ms == pytest.approx(50.0, rel=0.01)  # the forced 99 s line left out
    for i in range(3):  # the instance logs every request again: a few drains say so
        assert rec.ingest([PREFIX + b" " + tail()] * 20, now=2.0 + i) == 20
    assert rec.sample_every == 1


def test_the_k_survives_a_recording_and_a_damaged_one_is_refused() -> None:
    rec = LatencyRecorder()
    rec.ingest([sampled()], now=1.0)
    from uwsgitune.core.latencyreport import LatencyView

    view = LatencyView(
        address="127.0.0.1:9118",
        short=rec.window(1.5, 10),
        long=rec.window(1.5, 60),
        p99_series=rec.p99_series(1.5),
        export=rec.export(),
        lines=rec.recorded,
        sample_every=rec.sample_every,
    )
    data = latency_summary(view)
    assert data["sample_every"] == 20
    assert view_from_summary(data).sample_every == 20
    del data["sample_every"]
    assert view_from_summary(data).sample_every == 1  # a recording made before it
    with pytest.raises(ValueError, match="sample_every 0"):
        view_from_summary({**latency_summary(view), "sample_every": 0})
