"""The log-bucketed histogram against the exact percentiles of a sorted list, and the
Prometheus buckets derived from it against `histogram_quantile`."""

from __future__ import annotations

import bisect
import itertools
import math
import random
from fractions import Fraction

from hypothesis import given, settings
from hypothesis import strategies as st

from uwsgitune.core import loghist

QS = (0.01, 0.25, 0.5, 0.9, 0.95, 0.99, 0.999, 1.0)
# The guarantee, with room for float rounding at a bucket's edge only.
TOLERANCE = loghist.ALPHA * (1 + 1e-9) + 1e-12


def exact(values: list[int], q: float) -> int:
    """The nearest-rank percentile, computed in exact arithmetic from the sorted values."""
    ordered = sorted(values)
    rank = math.ceil(Fraction(str(q)) * len(ordered))
    return ordered[max(rank, 1) - 1]


def estimated(values: list[int], qs: tuple[float, ...] = QS) -> list[float]:
    hist: loghist.Hist = {}
    for v in values:
        loghist.record(hist, v)
    return loghist.quantiles(hist, qs, top=max(values))


def assert_close(values: list[int]) -> None:
    for q, got in zip(QS, estimated(values), strict=True):
        want = exact(values, q)
        assert abs(got - want) <= TOLERANCE * want, (q, got, want)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=10**12), min_size=1, max_size=400))
def test_every_percentile_is_within_half_a_percent_of_the_sorted_list(values: list[int]) -> None:
    assert_close(values)


@settings(max_examples=100, deadline=None)
@given(
    mu=st.floats(min_value=2.0, max_value=14.0),
    sigma=st.floats(min_value=0.05, max_value=3.0),
    n=st.integers(min_value=1, max_value=3000),
    seed=st.integers(min_value=0, max_value=2**32 - 1),
)
def test_lognormal_spreads_are_within_half_a_percent(
    mu: float, sigma: float, n: int, seed: int
) -> None:
    rng = random.Random(seed)
    assert_close([int(rng.lognormvariate(mu, sigma)) for _ in range(n)])


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.integers(min_value=0, max_value=10**9), min_size=1, max_size=5),
    st.integers(min_value=1, max_value=200),
)
def test_ties_are_exactly_placed(distinct: list[int], repeat: int) -> None:
    assert_close(distinct * repeat)


@given(st.integers(min_value=0, max_value=10**15))
def test_one_sample_is_within_half_a_percent_everywhere_and_exact_at_the_top(value: int) -> None:
    assert_close([value])
    assert estimated([value], (1.0,)) == [float(value)]


def test_a_range_of_twelve_decades_and_zero() -> None:
    values = [0, 0, 1, 2, 3, 10**3, 10**6, 10**9, 10**12, 7, 99_999]
    assert_close(values)


def test_an_empty_histogram_answers_nan() -> None:
    assert all(math.isnan(v) for v in loghist.quantiles({}, (0.5, 0.99)))


def test_merging_two_histograms_is_recording_both() -> None:
    a: loghist.Hist = {}
    b: loghist.Hist = {}
    both: loghist.Hist = {}
    for i, v in enumerate(range(1, 5000, 7)):
        loghist.record(a if i % 2 else b, v)
        loghist.record(both, v)
    assert loghist.merged([a, b]) == both


# --- Prometheus ------------------------------------------------------------------------


def histogram_quantile(q: float, bounds: tuple[float, ...], cumulative: list[int]) -> float:
    """Prometheus's histogram_quantile (promql/quantile.go bucketQuantile), for one series."""
    total = cumulative[-1]
    rank = q * total
    b = next(i for i, c in enumerate(cumulative) if c >= rank)
    if b == len(bounds):  # the +Inf bucket: the highest finite bound
        return bounds[-1]
    start = 0.0 if b == 0 else bounds[b - 1]
    below = 0 if b == 0 else cumulative[b - 1]
    count = cumulative[b] - below
    return start + (bounds[b] - start) * (rank - below) / count


def issue_spread(n: int, seed: int = 38) -> list[int]:
    """Service times of a mixed app (µs): lognormal CPU work (median 8 ms) and IO work
    (median 60 ms), as in the issue's accuracy benchmark."""
    rng = random.Random(seed)
    return [
        int(rng.lognormvariate(math.log(60_000), 0.8))
        if rng.random() < 0.4
        else int(rng.lognormvariate(math.log(8_000), 0.6))
        for _ in range(n)
    ]


def test_prometheus_bounds_are_log_spaced_from_1_ms_to_30_s() -> None:
    bounds = loghist.PROM_BOUNDS
    assert bounds[0] == 0.001 and bounds[-1] == 30.0
    ratios = [b / a for a, b in itertools.pairwise(bounds)]
    assert all(1.19 <= r <= 1.3 for r in ratios), ratios


def test_histogram_quantile_over_the_buckets_is_within_10_percent_on_the_issue_spread() -> None:
    values = issue_spread(100_000)
    hist: loghist.Hist = {}
    for v in values:
        loghist.record(hist, v)
    cumulative = loghist.cumulative(hist)
    assert cumulative[-1] == len(values)
    for q in (0.5, 0.9, 0.95, 0.99, 0.999):
        got = histogram_quantile(q, loghist.PROM_BOUNDS, cumulative)
        want = exact(values, q) / 1e6
        assert abs(got - want) <= 0.10 * want, (q, got, want)


def test_cumulative_counts_are_the_samples_at_or_below_each_bound() -> None:
    values = [*issue_spread(20000, seed=7), 0, 10**9]
    hist: loghist.Hist = {}
    for v in values:
        loghist.record(hist, v)
    cumulative = loghist.cumulative(hist)
    assert cumulative == sorted(cumulative)
    for bound, count in zip(loghist.PROM_BOUNDS, cumulative, strict=False):
        # a sample within ALPHA of the bound may sit one bucket over; nothing else moves
        low = sum(v <= bound * 1e6 * (1 - loghist.ALPHA) for v in values)
        high = sum(v <= bound * 1e6 * (1 + loghist.ALPHA) for v in values)
        assert low <= count <= high, (bound, low, count, high)
    assert cumulative[-1] == len(values)  # +Inf holds the 1000 s one too


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=10**12), min_size=1, max_size=300))
def test_a_frozen_histogram_answers_as_the_live_one(values: list[int]) -> None:
    hist: loghist.Hist = {}
    for v in values:
        loghist.record(hist, v)
    frozen = loghist.FrozenHist(hist)
    assert len(frozen) == len(hist)
    assert loghist.quantiles(frozen, QS) == loghist.quantiles(hist, QS)
    assert loghist.cumulative(frozen) == loghist.cumulative(hist)
    assert loghist.merged([frozen, hist]) == loghist.merged([hist, hist])


# -- the C-loop helpers answer as the obvious loops ----------------------------------------


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 10**12), max_size=50))
def test_buckets_are_each_value_s_bucket(values: list[int]) -> None:
    assert loghist.buckets(values) == [loghist.bucket(v) for v in values]


@settings(max_examples=200, deadline=None)
@given(
    st.dictionaries(st.integers(-5, 60), st.integers(1, 9), max_size=30),
    st.dictionaries(st.integers(-5, 60), st.integers(1, 9), max_size=30),
    st.booleans(),
)
def test_merge_adds_the_counts_and_unmerge_takes_them_out(
    a: dict[int, int], b: dict[int, int], frozen: bool
) -> None:
    other: loghist.Counts = loghist.FrozenHist(b) if frozen else b
    got = dict(a)
    loghist.merge(got, other)
    assert got == {k: a.get(k, 0) + b.get(k, 0) for k in a.keys() | b.keys()}
    loghist.unmerge(got, other)
    assert got == a  # a bucket left at 0 is gone


@settings(max_examples=200, deadline=None)
@given(
    st.dictionaries(
        st.one_of(st.just(loghist.ZERO), st.integers(0, 2300)), st.integers(0, 50), max_size=40
    ),
    st.lists(st.floats(0.0, 200.0), max_size=8).map(sorted),
)
def test_ranks_and_cumulative_counts_are_those_of_the_sorted_buckets(
    hist: dict[int, int], bounds: list[float]
) -> None:
    # buckets counted 0 (a running sum's) never answer a rank
    n = sum(hist.values())
    ordered = [i for i, c in sorted(hist.items()) for _ in range(c)]
    ranks = sorted({1, n, (n + 1) // 2}) if n else []
    assert loghist.at_ranks(hist, ranks) == [loghist.answer(ordered[r - 1]) for r in ranks]
    for bs in (loghist.PROM_BOUNDS, tuple(bounds)):
        per = [0] * (len(bs) + 1)
        for index, count in hist.items():
            per[bisect.bisect_left(bs, loghist.answer(index) / 1e6)] += count
        assert loghist.cumulative(hist, bs) == list(itertools.accumulate(per))
        assert loghist.cumulative(loghist.FrozenHist(hist), bs) == list(itertools.accumulate(per))
