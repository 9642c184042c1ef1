"""`staffing.fed_count`: the fewest always-fed workers that keep the CPUs busy through their
IO, by the finite-source model (each wants a CPU `cpu_share` of its time, independently),
checked against the binomial sum in exact fractions."""

from __future__ import annotations

import math
from fractions import Fraction

from hypothesis import given
from hypothesis import strategies as st

from uwsgitune.core.staffing import CPU_KEPT, fed_count


def _kept(n: int, p: Fraction, cpus: Fraction) -> Fraction:
    """The mean CPUs busy: E[min(X, cpus)], X binomial(n, p), exactly."""
    return sum(
        (math.comb(n, k) * p**k * (1 - p) ** (n - k) * min(k, cpus) for k in range(n + 1)),
        Fraction(0),
    )


def test_known_counts() -> None:
    assert fed_count(2, 1.0, 64) == 2  # all CPU: the CPUs' count
    assert fed_count(1.8, 0.92, 64) == 3  # 2 keep 93% of 1.8 CPUs busy
    assert fed_count(16, 0.9, 64) == 18
    assert fed_count(16, 0.9, 17) == 17  # at most `top`


@given(
    cpus=st.integers(4, 64).map(lambda q: Fraction(q, 4)),
    share=st.integers(80, 100).map(lambda q: Fraction(q, 100)),
)
def test_the_fewest_that_keep_the_share_of_the_cpus_busy(cpus: Fraction, share: Fraction) -> None:
    n = fed_count(float(cpus), float(share), 1000)
    floor = math.ceil(cpus)
    assert n >= floor
    target = Fraction(CPU_KEPT) * cpus
    assert _kept(n, share, cpus) >= target * Fraction(999_999, 1_000_000)  # float rounding
    if n > floor:
        assert _kept(n - 1, share, cpus) < target * Fraction(1_000_001, 1_000_000)
