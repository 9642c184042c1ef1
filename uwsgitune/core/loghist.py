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

**Prometheus.** `PROM_BOUNDS` are the exported `le` bounds in seconds, log-spaced from 1 ms
to 30 s (the R10 preferred numbers: ten per decade, a ratio of about 1.26, so that
`histogram_quantile`'s linear interpolation inside a bucket stays within a few percent on a
smooth spread). `cumulative` derives the cumulative `le` counts from a fine histogram: a
fine bucket is counted under the first bound at or above its answer, so a sample within
`ALPHA` of a bound may be counted one bound higher; nothing else is lost.
"""

from __future__ import annotations

import math
from array import array
from bisect import bisect_left
from collections.abc import Iterable, Iterator, Mapping, MutableMapping, Sequence

ALPHA = 0.005  # the relative error of an answer
GAMMA = (1 + ALPHA) / (1 - ALPHA)  # the ratio of a bucket's upper bound to its lower
_INV_LOG_GAMMA = 1.0 / math.log(GAMMA)
ZERO = -(2**31)  # the bucket of the value 0 (below every other bucket)

Hist = dict[int, int]


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


def merge(into: MutableMapping[int, int], other: Counts) -> None:
    for index, count in other.items():
        into[index] = into.get(index, 0) + count


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
    """The values at `ranks` (ascending, 1 <= rank <= the count) of the counted samples."""
    out: list[float] = []
    seen = 0
    buckets = iter(sorted(hist.items()))
    index = ZERO
    for want in ranks:
        while seen < want:
            index, count = next(buckets)
            seen += count
        out.append(answer(index))
    return out


def cumulative(hist: Counts, bounds: Sequence[float] = PROM_BOUNDS) -> list[int]:
    """Prometheus's cumulative bucket counts for `bounds` (seconds), then +Inf: len + 1."""
    per = [0] * (len(bounds) + 1)
    for index, count in hist.items():
        per[bisect_left(bounds, answer(index) / 1e6)] += count
    total = 0
    out = []
    for count in per:
        total += count
        out.append(total)
    return out
