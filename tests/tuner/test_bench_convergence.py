"""The tuner benchmark's verdicts (bench/tuner_report.py): when tuner-64 counts as converged,
and so where its steady state starts. Synthetic runs; the report itself is pure."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

REPORT = Path(__file__).resolve().parents[2] / "bench" / "tuner_report.py"


@pytest.fixture(scope="module")
def report() -> ModuleType:
    spec = importlib.util.spec_from_file_location("tuner_report", REPORT)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _phase(clients: int | None, seconds: int) -> dict[str, Any]:
    rate = None if clients else 2.0
    return {"path": "/mixed/2/12", "clients": clients, "rate": rate, "seconds": seconds}


def _run(setup: str, counts: list[int], rps: float = 500.0, p99: float = 50.0) -> dict[str, Any]:
    """One poll a second at the given live counts."""
    return {
        "setup": setup,
        "live": [[t + 0.1, n] for t, n in enumerate(counts)],
        "steady_rps": rps,
        "rps": rps,
        "steady_p99_ms": p99,
        "failed": 0,
        "p99_ms": p99,
        "warmup_s": 15.0,
        "phase_rps": [rps],
        "per_second": [rps] * len(counts),
    }


def _scenario(phases: list[dict[str, Any]], grid: dict[int, float]) -> dict[str, Any]:
    runs = {f"static-{n}": _run(f"static-{n}", [n] * 75, rps) for n, rps in grid.items()}
    return {"phases": phases, "threads": 1, "runs": runs}


# a grid whose fewest at 95% of the best is 24: live limit 36
DROP_GRID = {8: 280.0, 16: 392.0, 24: 435.0, 32: 417.0, 64: 417.0}


def test_a_phased_run_converges_when_it_first_holds_a_count_the_load_allows(
    report: ModuleType,
) -> None:
    """drop: 64 -> 28 at 5 s, 2 in the quiet spell, 25 on the return. It converged at 5 s,
    not when the last phase's count came (53 s), and its steady state is every row's."""
    sc = _scenario([_phase(48, 25), _phase(None, 25), _phase(48, 25)], DROP_GRID)
    assert report.live_limit(sc) == 36
    r = _run("tuner-64", [64] * 5 + [28] * 26 + [2] * 22 + [25] * 22)
    assert report.converged(r, sc) == pytest.approx(5.1)
    assert report.steady_from(r, sc) == 15.0
    assert report.settled(r) == pytest.approx(53.1)  # the table's: when the final count came


def test_holding_64_through_a_phase_that_needs_fewer_is_not_converged(
    report: ModuleType,
) -> None:
    """step: 64 held through the first phase (over the limit), 32 from the doubling, 17 after
    the halving: converged at 32 s, and the steady state is counted from there."""
    sc = _scenario([_phase(16, 25), _phase(32, 25), _phase(16, 25)], DROP_GRID)
    r = _run("tuner-64", [64] * 32 + [32] * 24 + [17] * 19)
    assert report.converged(r, sc) == pytest.approx(32.1)
    assert report.steady_from(r, sc) == pytest.approx(32.1)


def test_a_count_that_leaves_the_limit_before_its_load_changes_did_not_converge_there(
    report: ModuleType,
) -> None:
    """Within the limit for a moment, then back over it in the same phase: converged only
    once it holds; never, if it never holds (and the steady state then starts at 60 s)."""
    sc = _scenario([_phase(64, 75)], DROP_GRID)
    dip = _run("tuner-64", [64] * 5 + [30] * 3 + [48] * 10 + [30] * 57)
    assert report.converged(dip, sc) == pytest.approx(18.1)
    never = _run("tuner-64", [64] * 5 + [30] * 3 + [48] * 67)
    assert report.converged(never, sc) is None
    assert report.steady_from(never, sc) == 60.0


def test_worker_seconds_are_compared_where_throughput_is_equal_in_the_same_window(
    report: ModuleType,
) -> None:
    """An algorithm is held to the tuner's worker-seconds only where it served the tuner's
    throughput (97%) in the tuner's own steady window, not over a wider one."""
    sc = _scenario([_phase(64, 75)], DROP_GRID)
    tuner = _run("tuner-64", [64] * 5 + [20] * 70)
    lean = _run("busyness", [12] * 75)  # fewer workers, but 10% less throughput from 15 s
    lean["per_second"] = [560.0] * 15 + [450.0] * 60
    sc["runs"].update({"tuner-64": tuner, "busyness": lean})
    starts = [report.steady_from(tuner, sc)]
    assert report._fewer(tuner, sc, starts)[1]  # busyness served less: not a peer
    lean["per_second"] = [560.0] * 15 + [495.0] * 60  # 99% of the tuner's: a peer
    label, ok = report._fewer(tuner, sc, starts)
    assert not ok and "the 1 of 1 algos" in label


def test_an_algorithm_that_saved_workers_by_queueing_is_compared_on_p99(
    report: ModuleType,
) -> None:
    """threads-io: `backlog` served the tuner's throughput on fewer workers, with a p99 past
    the bound the tuner is held to (1.2x the grid-best's). It is no peer for the target,
    and is one for the extra check at any p99, which the report still prints."""
    sc = _scenario([_phase(64, 75)], {16: 500.0, 24: 500.0})  # grid best: static-16, 50 ms
    tuner = _run("tuner-2", [16] * 75)
    queued = _run("backlog", [15] * 75, p99=65.0)  # 1.3x
    sc["runs"].update({"tuner-2": tuner, "backlog": queued})
    starts = [report.steady_from(tuner, sc)]
    label, ok = report._fewer(tuner, sc, starts)
    assert ok and "the 0 of 1 algos" in label
    loose = dict(report.extras(tuner, sc))
    strict = next(n for n in loose if n.startswith("fewer worker-s"))
    assert not loose[strict] and "backlog 15.00 live, p99 1.30x, against 16.00" in strict
    queued["steady_p99_ms"] = 58.0  # 1.16x: within the bound, so a peer the tuner misses
    label, ok = report._fewer(tuner, sc, starts)
    assert not ok and "the 1 of 1 algos" in label
    assert "missed" in report._cell({"runs": {"tuner-2": tuner}, **sc}, "tuner-2")


def test_rounds_cut_short_are_called_out(report: ModuleType) -> None:
    """A sitting interrupted between rounds leaves a setup with fewer: the report says so."""
    one = {"steady_rps": 500.0, "worker_seconds": 1500.0}
    sc = {"repeats": {"static-24": [one, one], "busyness": [one, one], "tuner-2": [one]}}
    text = "\n".join(report._repeats(sc))
    assert "**Unbalanced rounds:** fewer than 2 for tuner-2." in text
    sc["repeats"]["tuner-2"].append(one)
    assert "Unbalanced" not in "\n".join(report._repeats(sc))
