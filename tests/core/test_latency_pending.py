"""The recorder keeps the batches it ingests and records them at once (`_flush`, before any
read and at the second's close): whatever the batches and the reads, every reading answers as
recording each line alone (`_put`) does, and a value's bucket is `loghist.bucket`'s."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.core.test_logline_batch import FAST
from uwsgitune.core import latency, loghist
from uwsgitune.core.latency import LatencyRecorder
from uwsgitune.core.logline import parse_batch, parse_raw

T0 = 1_795_732_664_000_000


def line(
    service: int, stamp: str = "-", wid: int = 1, path: str = "/a", status: int = 200
) -> bytes:
    return (
        f'1.2.3.4 "GET {path}" uwt1 {T0} {service} {status} {wid} 4000 GET [{stamp}] {path}'
    ).encode()


def nginx(wait_us: int) -> str:
    """nginx's t=${msec} for a request that waited `wait_us` (negative: its clock ahead)."""
    ms = (T0 - wait_us) // 1000
    return f"t={ms // 1000}.{ms % 1000:03d}"


# The kinds of line a flush must record as the per-line path does: service times of 0,
# waits of 0, negative and absurd waits, other stamp formats, bad stamps, none.
KINDS = {
    "plain": lambda r: line(int(r.lognormvariate(9, 1.5))),
    "zero service": lambda r: line(0, nginx(r.randint(0, 3000))),
    "nginx": lambda r: line(int(r.lognormvariate(9, 1)), nginx(int(r.lognormvariate(7, 2)))),
    "wait 0": lambda r: line(r.randint(1, 9), nginx(0)),
    "negative": lambda r: line(1000, nginx(-r.randint(1000, 50_000))),
    "absurd": lambda r: line(1000, nginx(400 * 10**6)),
    "µs stamp": lambda r: line(2000, str(T0 - r.randint(-900, 90_000))),
    "bad stamp": lambda r: line(3000, "t=garbage"),
}


@pytest.mark.parametrize("fast", FAST)
@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.lists(st.sampled_from(sorted(KINDS)), min_size=1, max_size=40),
            st.sampled_from([0.0, 0.3, 1.0, 2.5]),  # the clock's step before the batch
            st.sampled_from(["none", "window", "p99_series", "export"]),  # a read after it
            st.integers(1, 12),  # its worker
        ),
        min_size=1,
        max_size=12,
    ),
    st.integers(0, 2**32),
    st.sampled_from([latency.MAX_PENDING, 5]),
)
def test_batches_kept_and_flushed_read_as_each_line_recorded_alone(
    fast: bool, batches: list[tuple[list[str], float, str, int]], seed: int, pending: int
) -> None:
    """The Python path keeps and flushes; the C path records each batch at once."""
    rng = random.Random(seed)
    kept, alone = LatencyRecorder(top=5, fast=fast), LatencyRecorder(top=5, fast=False)
    latency_max_pending = latency.MAX_PENDING
    latency.MAX_PENDING = pending
    try:
        now = 500.0
        for kinds, step, read, wid in batches:
            now += step
            lines = [KINDS[k](rng).replace(b" 1 4000 ", b" %d 4000 " % wid) for k in kinds]
            if parse_batch(lines) is None:
                continue  # (bad stamps of other kinds go line by line anyway)
            assert kept.ingest(lines, now) == len(lines)
            alone._put(map(parse_raw, lines), now)
            if read == "window":
                assert kept.window(now, 10) == alone.window(now, 10)
            elif read == "p99_series":
                assert kept.p99_series(now) == alone.p99_series(now)
            elif read == "export":
                assert kept.export() == alone.export()
        assert kept.recorded == alone.recorded
        for seconds in (10, 60, 7):
            assert kept.window(now, seconds) == alone.window(now, seconds)
        assert kept.p99_series(now) == alone.p99_series(now)
        assert kept.export() == alone.export()
    finally:
        latency.MAX_PENDING = latency_max_pending


def test_the_open_second_s_p99_counts_lines_not_yet_flushed() -> None:
    rec = LatencyRecorder()
    rec.ingest([line(10_000)] * 10, now=200.2)
    rec.ingest([line(20_000)] * 10, now=201.5)  # second 200 closes; 201 is kept for later
    assert rec.p99_series(201.5, seconds=2) == (10.0, 20.0)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.just(0), st.integers(0, 2**40 - 1)), min_size=1, max_size=50))
def test_a_column_s_buckets_are_each_value_s_bucket(values: list[int]) -> None:
    assert latency._buckets(values) == [loghist.bucket(v) for v in values]
