"""Log-bucketed latency histograms: percentiles within 0.5% of the exact ones, in bounded memory.

A latency is a whole number of microseconds (uWSGI logs `%(micros)`). It is counted in the
bucket `ceil(log(v) / log(GAMMA))`: bucket `i` holds the values in `(GAMMA**(i-1), GAMMA**i]`,
so every bucket is the same *relative* width, whatever the magnitude (the HDR / DDSketch
idea). A bucket is answered by the value `2 * GAMMA**i / (GAMMA + 1)`, which is within
`ALPHA` of every value the bucket can hold. Zero has a bucket of its own (`ZERO`), answered
by 0.

**The guarantee.** A percentile is the nearest-rank percentile (`rank`): the value at rank
`ceil(q * n)` of the sorted samples. The histogram finds the bucket that holds the sample at
that rank and answers with the bucket's value, so the answer is within `ALPHA` (0.5%) of the
exact percentile of the same samples, for any spread, ties, one sample or a range of twelve
decades (tests/core/test_loghist.py checks it with hypothesis against a sorted list). The
issue asks for 2% end to end; the rest of the budget is left to the integrator. An answer
above the exact maximum (kept beside the counts) is cut to it, and p100 is that maximum.

**The cost.** One `log` per sample; memory is one dict entry per bucket in use: a spread
from 1 µs to 1000 s uses at most `log(1e9) / log(GAMMA)` ≈ 2100 buckets, a real one a few
hundred. A histogram is a plain `dict[int, int]` (index -> count) so that recording is one
dict update; the functions here read and merge such dicts.

**Loops in C.** Recording and reading run on the request log's hot path (10k lines/s;
bench/results/latency_overhead.md), so the functions here do their per-bucket and per-value
work through C-level builtins (`map`, `dict.update` over `zip`, `itertools.accumulate`,
`bisect`, `Counter`) rather than Python loops: `buckets` maps many values at once with the
very expression of `bucket` (so both agree to the bit); `merge`, `at_ranks` and
`cumulative` give the same answers as the obvious loops, at a fraction of their cost.

**Prometheus.** `PROM_BOUNDS` are the exported `le` bounds in seconds, log-spaced from 1 ms
to 30 s (the R10 preferred numbers: ten per decade, a ratio of about 1.26, so that
`histogram_quantile`'s linear interpolation inside a bucket stays within a few percent on a
smooth spread); `QUEUE_BOUNDS`, the queue wait's, the same from 10 µs (a kept-alive
request's wait is well under 1 ms). `cumulative` derives the cumulative `le` counts from a
fine histogram: a fine bucket is counted under the first bound at or above its answer, so a
sample within `ALPHA` of a bound may be counted one bound higher; nothing else is lost.
"""

from __future__ import annotations

import collections
import math
from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterable, Iterator, Mapping, MutableMapping, Sequence
from itertools import accumulate, compress, repeat
from operator import add, itemgetter, mul, not_, sub

ALPHA = 0.005  # the relative error of an answer
GAMMA = (1 + ALPHA) / (1 - ALPHA)  # the ratio of a bucket's upper bound to its lower
_INV_LOG_GAMMA = 1.0 / math.log(GAMMA)
ZERO = -(2**31)  # the bucket of the value 0 (below every other bucket)

Hist = dict[int, int]

# A dict's reading in C (core/_fastlog.c), where built: `at_ranks` and `cumulative` answer
# the same (tests/core/test_loghist.py compares them with the Python code).
_keys_at_ranks: Callable[[Hist, list[int]], list[int]] | None
_cum_counts: Callable[[Hist, tuple[int, ...]], list[int]] | None
try:
    from uwsgitune.core._fastlog import cum_counts as _cum_counts
    from uwsgitune.core._fastlog import keys_at_ranks as _keys_at_ranks
except ImportError:
    _keys_at_ranks = _cum_counts = None


class FrozenHist:
    """A histogram no longer written to, in 8 bytes a bucket (two arrays) where a dict takes
    about 100: what a closed second of the latency windows keeps."""

    __slots__ = ("counts", "keys")

    def __init__(self, hist: Mapping[int, int]) -> None:
        self.keys = array("i", hist.keys())
        self.counts = array("I", hist.values())

    def items(self) -> Iterator[tuple[int, int]]:
        return zip(self.keys, self.counts, strict=True)

    def values(self) -> Iterable[int]:
        return self.counts

    def __len__(self) -> int:
        return len(self.keys)


# What the functions below read: a live dict or a frozen histogram.
Counts = Mapping[int, int] | FrozenHist

_R10 = (1.0, 1.25, 1.6, 2.0, 2.5, 3.15, 4.0, 5.0, 6.3, 8.0)
# 1 ms ... 25 s in R10 steps, then 30 s: the `le` bounds of the exported histograms, seconds.
PROM_BOUNDS: tuple[float, ...] = (
    *(round(m * 10.0**e, 6) for e in range(-3, 1) for m in _R10),
    *(10.0, 12.5, 16.0, 20.0, 25.0, 30.0),
)
# The queue wait's bounds: the same from 10 µs. A request on a kept-alive connection waits
# ~0.1 ms from the proxy's write to the worker's read; under 1 ms alone, Prometheus could
# only interpolate inside [0, 1 ms] (p50 read 0.54-0.61 ms for 0.07-0.10). Sub-millisecond
# waits need a stamp finer than nginx's `${msec}` (1 ms): µs stamps, or a Lua/HAProxy one.
QUEUE_BOUNDS: tuple[float, ...] = (
    *(round(m * 10.0**e, 8) for e in (-5, -4) for m in _R10),
    *PROM_BOUNDS,
)


def bucket(value: int) -> int:
    """The index of the bucket that counts `value` (µs, >= 0)."""
    return math.ceil(math.log(value) * _INV_LOG_GAMMA) if value > 0 else ZERO


def answer(index: int) -> float:
    """The value a bucket answers with: within ALPHA of everything it holds."""
    return 0.0 if index == ZERO else 2.0 * GAMMA**index / (GAMMA + 1.0)


def rank(q: float, n: int) -> int:
    """The nearest rank of quantile `q` (0 < q <= 1) among `n` samples, from 1 to n."""
    return max(1, min(n, math.ceil(q * n - 1e-9)))


def record(hist: Hist, value: int) -> None:
    index = bucket(value)
    hist[index] = hist.get(index, 0) + 1


def buckets(values: Sequence[int]) -> list[int]:
    """`bucket(v)` for each value (µs, >= 0), in order: the same expression, in C loops."""
    if not values or min(values) <= 0:
        return [bucket(v) for v in values]
    return list(map(math.ceil, map(mul, map(math.log, values), repeat(_INV_LOG_GAMMA))))


def count(hist: Hist, indexes: Iterable[int]) -> None:
    """Count each bucket index of `indexes` once into `hist` (C's loop: the helper
    `Counter.update` itself runs, without building a Counter)."""
    _count_elements(hist, indexes)


def _count_in_python(mapping: Hist, elements: Iterable[int]) -> None:
    for element in elements:
        mapping[element] = mapping.get(element, 0) + 1


# `collections._count_elements`: the C loop behind `Counter.update` (CPython since 3.2),
# counting into any dict; the same loop in Python where it is missing.
_count_elements: Callable[[Hist, Iterable[int]], None] = getattr(
    collections, "_count_elements", _count_in_python
)


def merge(into: MutableMapping[int, int], other: Counts) -> None:
    """Add `other`'s counts into `into` (one `dict.update` over C iterators)."""
    if isinstance(other, FrozenHist):
        keys: Iterable[int] = other.keys
        counts: Iterable[int] = other.counts
    else:
        keys, counts = other.keys(), other.values()
    if not into:
        into.update(zip(keys, counts, strict=True))
        return
    into.update(zip(keys, map(add, map(into.get, keys, repeat(0)), counts), strict=True))


def unmerge(into: Hist, other: Counts) -> None:
    """Take `other`'s counts out of `into` (which holds them), deleting buckets left at 0."""
    if isinstance(other, FrozenHist):
        keys: Iterable[int] = other.keys
        counts: Iterable[int] = other.counts
    else:
        keys, counts = other.keys(), other.values()
    into.update(zip(keys, map(sub, map(into.__getitem__, keys), counts), strict=True))
    for index in list(compress(keys, map(not_, map(into.__getitem__, keys)))):
        del into[index]


def merged(hists: Iterable[Counts]) -> Hist:
    out: Hist = {}
    for hist in hists:
        merge(out, hist)
    return out


def quantiles(hist: Counts, qs: Sequence[float], top: float | None = None) -> list[float]:
    """The nearest-rank quantiles `qs` (ascending, in (0, 1]) of the counted samples.

    `top`, the exact maximum when known, caps every answer and is the answer at the last
    rank. An empty histogram answers NaN.
    """
    n = sum(hist.values())
    if n == 0:
        return [math.nan for _ in qs]
    ranks = [rank(q, n) for q in qs]
    values = at_ranks(hist, ranks)
    if top is None:
        return values
    return [top if r == n else min(v, top) for r, v in zip(ranks, values, strict=True)]


def at_ranks(hist: Counts, ranks: Sequence[int]) -> list[float]:
    """The values at `ranks` (ascending, 1 <= rank <= the count) of the counted samples
    (a dict's buckets found in C where core/_fastlog.c is built: `_keys_at_ranks`)."""
    if _keys_at_ranks is not None and type(hist) is dict:
        return list(map(answer, _keys_at_ranks(hist, list(ranks))))
    keys, running = _running(hist)
    return [answer(keys[bisect_left(running, want)]) for want in ranks]


def _running(hist: Counts) -> tuple[Sequence[int], list[int]]:
    """The bucket indexes in order, and the running count up to each (a bucket counted 0
    is never the first to reach a rank: `bisect_left` skips it)."""
    if isinstance(hist, dict):
        keys: Sequence[int] = sorted(hist)
        return keys, list(accumulate(map(hist.__getitem__, keys)))
    items = sorted(hist.items())
    return list(map(itemgetter(0), items)), list(accumulate(map(itemgetter(1), items)))


def cumulative(hist: Counts, bounds: Sequence[float] = PROM_BOUNDS) -> list[int]:
    """Prometheus's cumulative bucket counts for `bounds` (seconds), then +Inf: len + 1.

    A fine bucket counts under the first bound at or above its answer, so the count at a
    bound is that of every fine bucket up to the last whose answer is within it (`_last`).
    """
    if not len(hist):
        return [0] * (len(bounds) + 1)
    if _cum_counts is not None and type(hist) is dict:
        return _cum_counts(hist, _last_under(tuple(bounds)))
    keys, running = _running(hist)
    ends = map(bisect_right, repeat(keys), _last_under(tuple(bounds)))
    return [running[e - 1] if e else 0 for e in ends] + [running[-1]]


_lasts: dict[tuple[float, ...], tuple[int, ...]] = {}


def _last_under(bounds: tuple[float, ...]) -> tuple[int, ...]:
    """For each bound, the highest bucket index whose answer (in s) is within it."""
    got = _lasts.get(bounds)
    if got is None:

        def within(index: int, bound: float) -> bool:
            return answer(index) / 1e6 <= bound

        lasts = []
        for bound in bounds:
            if not within(0, bound):  # below every bucket but the zero one (value 0)
                lasts.append(ZERO if bound >= 0 else ZERO - 1)
                continue
            i = max(0, math.floor(math.log(bound * 1e6) * _INV_LOG_GAMMA))
            while within(i + 1, bound):
                i += 1
            while not within(i, bound):
                i -= 1
            lasts.append(i)
        got = _lasts[bounds] = tuple(lasts)
    return got
