"""The tuner's decision as a person reads it: what happens, then the evidence in human units.

`Decision.line()` is what `tune` prints and the TUI shows; the decision itself (its fields,
its raw evidence, what the audit log keeps) is pinned by test_decision_golden and does not
change with the wording.
"""

from __future__ import annotations

from itertools import chain

from tests.tuner.test_decision_golden import PLANTS, RECORDINGS, _replayed, _simulated
from uwsgitune.tuner.decision import EVIDENCE_UNITS, Decision

EVIDENCE = {"live": 4, "rps": 39.94, "busy_ratio": 0.97, "mean_rt_ms": 850.0, "queue": 16.0}


def test_a_change_says_how_many_live_workers_and_its_route() -> None:
    d = Decision("up", "saturated", 8, 4, "all busy with a queue", "fifo", EVIDENCE)
    assert d.line() == (
        "up 4 → 8 live workers (FIFO) [saturated] all busy with a queue | live 4 workers, "
        "rps 39.9 req/s, busy_ratio 97%, mean_rt_ms 850 ms, queue 16 connections"
    )
    down = Decision("down", "idle", 1, 16, "idle", "reload", {"live": 16, "cpu_sat": 0.0017})
    assert down.line() == (
        "down 16 → 1 live worker (reload) [idle] idle | live 16 workers, cpu_sat 0.2%"
    )


def test_no_change_says_where_it_stays() -> None:
    d = Decision("hold", "steady", 1, 1, "steady", evidence={"live": 1, "mem_cap": None})
    assert d.line() == "hold at 1 live worker [steady] steady | live 1 worker"
    assert Decision("wait", "no-stats", 0, 0, "no stats yet").line() == (
        "wait at 0 live workers [no-stats] no stats yet"
    )


def test_every_evidence_key_the_tuner_gives_has_a_unit() -> None:
    """Over the recordings and the plant runs of the decision golden test: a new key must be
    given its unit in `EVIDENCE_UNITS`, or it would read as a bare number."""
    runs = chain(
        *(_replayed(p) for p in RECORDINGS), *(_simulated(name) for name in sorted(PLANTS))
    )
    seen = {k for d in runs for k in d.evidence}
    assert seen - set(EVIDENCE_UNITS) == set()
    assert {"gil_busy", "cpu_ms", "mem_cap", "estimate"} <= seen  # the runs reach the model
