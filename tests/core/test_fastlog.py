"""The request log's C paths (core/_fastlog.c, sources/_recvlines.c): built wherever a C
compiler is, and recording exactly what the Python path records, at the caps, across
threads, and when a caller's code fails inside them. (The parser's agreement is in
tests/core/test_logline_batch.py and test_logline_joined.py; the receiver's in
tests/sources/test_reqlog.py; the recorder's batches in test_latency_pending.py.)"""

from __future__ import annotations

import shutil
import sys
import sysconfig
import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.core.test_logline_batch import mixed
from tests.support.latency import python_path
from uwsgitune.core import latency, loghist
from uwsgitune.core.latency import LatencyRecorder

try:
    from uwsgitune.core import _fastlog
except ImportError:
    _fastlog = None  # type: ignore[assignment]

needs_c = pytest.mark.skipif(_fastlog is None, reason="core/_fastlog.c not built")


def test_the_c_paths_are_built_where_a_compiler_is() -> None:
    """The extensions are optional (an install without a compiler still works), so a
    failed build would pass silently: where a compiler is (CI, the README's install), both
    must be there, and the recorder and the receiver must use them."""
    compiler = (sysconfig.get_config_var("CC") or "cc").split()[0]
    if not sys.platform.startswith("linux") or shutil.which(compiler) is None:
        pytest.skip(f"no C compiler ({compiler}) on this {sys.platform} machine")
    from uwsgitune.sources import _recvlines, reqlog

    assert _fastlog is not None
    assert latency.ACCELERATED
    assert hasattr(_recvlines, "recv")
    with reqlog.Receiver("127.0.0.1:0") as rx:
        assert rx.batched and rx._mmsg is None  # the C reader, not ctypes


def record_both(lines: list[bytes], chunk: int = 150) -> tuple[LatencyRecorder, LatencyRecorder]:
    fast, slow = LatencyRecorder(top=5, fast=True), LatencyRecorder(top=5, fast=False)
    now = 100.0
    for k in range(0, len(lines), chunk):
        for rec in (fast, slow):
            rec.ingest(lines[k : k + chunk], now)
        now += 0.37
    return fast, slow


def assert_same(a: LatencyRecorder, b: LatencyRecorder, now: float = 200.0) -> None:
    assert a.recorded == b.recorded
    assert a.tally.as_dict() == b.tally.as_dict()
    for seconds in (10, 60):
        assert a.window(now, seconds) == b.window(now, seconds)
    assert a.p99_series(now) == b.p99_series(now)
    assert a.export() == b.export()


@needs_c
@pytest.mark.parametrize(
    ("cap", "value"), [("MAX_WORKERS", 3), ("MAX_ROUTES", 4), ("MAX_PATHS", 5)]
)
def test_at_the_caps_the_c_path_records_as_the_python_path(
    monkeypatch: pytest.MonkeyPatch, cap: str, value: int
) -> None:
    """Workers and routes beyond their caps fold into "other", paths beyond the remembered
    ones are named again: the C path's per-second caches must not change which part a
    line lands in."""
    monkeypatch.setattr(latency, cap, value)
    fast, slow = record_both(mixed(3000, seed=7))
    assert_same(fast, slow)


@needs_c
def test_recorders_in_threads_record_as_alone() -> None:
    """Each instance's reader thread ingests into its own recorder; the C path's scratch
    is shared, and a resolver runs Python code (where another thread can run): every
    recorder must read as the same lines recorded by the Python path alone."""
    lines = mixed(4000, seed=11)
    alone = LatencyRecorder(top=5, fast=False)
    now = 100.0
    for k in range(0, len(lines), 97):
        alone.ingest(lines[k : k + 97], now + k / 4000)
    recorders = [LatencyRecorder(top=5, fast=True) for _ in range(4)]
    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # threads switch as often as CPython lets them
    try:
        threads = [
            threading.Thread(
                target=lambda r=rec: [
                    r.ingest(lines[k : k + 97], now + k / 4000) for k in range(0, len(lines), 97)
                ]
            )
            for rec in recorders
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
    finally:
        sys.setswitchinterval(switch)
    for rec in recorders:
        assert_same(rec, alone)


@needs_c
def test_a_failing_resolver_raises_and_the_next_batch_records_cleanly(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An exception inside the C path (here a route resolver's) propagates as itself (the
    reader thread reports it and goes on), and leaves no half-cleared scratch behind."""
    lines = mixed(600, seed=3)
    rec = LatencyRecorder(top=5, fast=True)

    def broken(self: object, s: object, path: bytes) -> object:
        raise RuntimeError("resolver failed")

    monkeypatch.setattr(LatencyRecorder, "_route_part", broken)
    with pytest.raises(RuntimeError, match="resolver failed"):
        rec.ingest(lines[:300], 100.0)
    monkeypatch.undo()
    fast, slow = LatencyRecorder(top=5, fast=True), LatencyRecorder(top=5, fast=False)
    for r in (fast, slow):
        r.ingest(lines[300:], 101.0)
    assert_same(fast, slow, 102.0)


@needs_c
def test_what_the_c_path_refuses_goes_to_the_per_line_parser_untouched() -> None:
    """A batch that is not a list of bytes, or holds one line the fast path cannot take,
    is left whole to the Python path: nothing recorded by the C code first."""
    good = mixed(5, seed=1)
    assert _fastlog.scan([good[0], "not bytes"]) is None  # type: ignore[list-item]
    assert _fastlog.scan([good[0], bytearray(good[1])]) is None  # type: ignore[list-item]
    for bad in (b"garbage", b"", good[2] + b"\n"):
        rec = LatencyRecorder(fast=True)
        slow = LatencyRecorder(fast=False)
        batch = [*good[:3], bad, *good[3:]]
        rec.ingest(batch, 100.0)
        slow.ingest(batch, 100.0)
        assert_same(rec, slow, 101.0)


@needs_c
def test_every_status_lands_in_its_class_as_in_the_python_path() -> None:
    """Statuses of three digits outside 100-599 (uWSGI logs what the app returned) are
    "other"; the classes' edges on both sides."""
    statuses = [0, 1, 99, 100, 199, 200, 299, 300, 404, 499, 500, 599, 600, 999]
    lines = [
        x.replace(b" 200 ", b" %03d " % statuses[i % len(statuses)], 1)
        for i, x in enumerate(mixed(700, seed=5))
    ]
    assert any(b" 099 " in x for x in lines) and any(b" 600 " in x for x in lines)
    fast, slow = record_both([x.replace(b" 404 ", b" 999 ") for x in lines])
    assert_same(fast, slow)
    assert fast.export() == slow.export()


@needs_c
def test_the_c_path_s_caches_of_a_second_stay_within_the_cap(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A scan of distinct paths (a client can send any) keeps at most `MAX_PATHS` paths in
    the second's cache, and each line still lands in its route's part."""
    monkeypatch.setattr(latency, "MAX_PATHS", 5)
    base = mixed(300, seed=9)
    lines = [x.rsplit(b" ", 1)[0] + b" /scan/%d" % i for i, x in enumerate(base)]
    fast, slow = record_both(lines, chunk=300)
    assert len(fast._open.rfast) <= 5
    assert_same(fast, slow)


hists = st.dictionaries(
    st.one_of(st.integers(-50, 3000), st.just(loghist.ZERO)),
    st.integers(0, 10**6),
    max_size=300,
)


@needs_c
@settings(max_examples=300, deadline=None)
@given(hists, st.lists(st.floats(0.001, 1.0), min_size=1, max_size=6))
def test_reading_a_histogram_in_c_answers_as_in_python(
    hist: dict[int, int], qs: list[float]
) -> None:
    """`loghist.at_ranks` and `loghist.cumulative` read a dict in C where built: the same
    answers as their Python code (buckets counted 0 included)."""
    n = sum(hist.values())
    for bounds in (loghist.PROM_BOUNDS, loghist.QUEUE_BOUNDS):
        c = loghist.cumulative(hist, bounds)
        with python_path(loghist, "_cum_counts"):
            assert c == loghist.cumulative(hist, bounds)
    if n == 0:
        return
    ranks = sorted(loghist.rank(q, n) for q in qs)
    c_ranks = loghist.at_ranks(hist, ranks)
    with python_path(loghist, "_keys_at_ranks"):
        assert c_ranks == loghist.at_ranks(hist, ranks)
    with pytest.raises(IndexError):
        _fastlog.keys_at_ranks(hist, [n + 1])
