"""Threaded pools are sized no larger than the requests seen at once (`level.at_once`): the
requests the workers' cores hold plus the queue, over a process's threads. Pure, against
the simulated plant, whose stats show each core's `in_request`.

Measured in the benchmark's `threads-io` (64 clients waiting 50 ms, 4 threads a process):
square-root staffing of L = 61 asked for 20 processes (80 threads for 64 clients), and
uWSGI's backlog algorithm served as much with 15-16."""

from __future__ import annotations

import json

from tests.conftest import stats_fixture
from tests.tuner.plant import Plant, run
from uwsgitune.core.derive import Tracker
from uwsgitune.core.frame import Frame
from uwsgitune.core.model import parse_stats
from uwsgitune.core.samples import Poll
from uwsgitune.tuner import TunerSettings
from uwsgitune.tuner.level import at_once

S = TunerSettings(min_workers=2, max_workers=64)
BUSY = stats_fixture("64-workers-2-threads-busy.json")


def _io(live: int, clients: int = 64) -> Plant:
    return Plant(
        live=live,
        workers_max=64,
        cpu_ms=0.25,
        io_ms=50,
        clients=clients,
        threads=4,
        thread_slots=True,
        overlap=0.5,  # a mean queue of 0-1 at 16 processes (the benchmark read 0.0-0.7)
    )


def _shape(before: int, until: int, then: int):  # type: ignore[no-untyped-def]
    def shape(plant: Plant, t: int) -> None:
        plant.clients = before if t < until else then

    return shape


def test_a_threaded_pool_from_two_stops_at_the_requests_seen_at_once() -> None:
    plant = _io(2)
    seen = [(t, d) for t, _, d in run(plant, S, 120) if d.is_change]
    lines = [f"{t}: {d.line()}" for t, d in seen]
    assert plant.live == 16, lines
    assert max(d.desired for _, d in seen) == 16, lines
    assert len(seen) == 1, lines  # 2 -> 16 in one move, and held


def test_a_threaded_pool_from_sixty_four_comes_down_to_them() -> None:
    plant = _io(64)
    seen = [(t, d) for t, _, d in run(plant, S, 120) if d.is_change]
    assert plant.live == 16, [f"{t}: {d.line()}" for t, d in seen]


def test_a_threaded_load_that_grows_is_still_met() -> None:
    # 64 clients, then 128: the queue shows the shortage, and the pool goes to 32.
    plant = _io(2)
    seen = [(t, d) for t, _, d in run(plant, S, 150, _shape(64, 60, 128)) if d.is_change]
    lines = [f"{t}: {d.line()}" for t, d in seen]
    assert plant.live == 32, lines
    assert next(t for t, _ in seen if t >= 60) <= 66, lines


def _frame(raw: bytes) -> Frame:
    return Tracker("fixture").update(Poll("fixture", 1.0, 1.0, doc=parse_stats(raw)))


def test_at_once_counts_the_cores_in_a_request_in_processes_worth() -> None:
    # A real document: 64 workers of 2 threads, every core in a request.
    doc = json.loads(BUSY)
    f = _frame(BUSY)
    assert f.threads == 2 and f.live == 64
    assert sum(len(w.requests_in_flight) for w in f.workers) == 128
    assert at_once(f) == 64
    # Three connections queued: two processes' worth more, rounded up.
    doc["sockets"][0]["queue"] = 3
    assert at_once(_frame(json.dumps(doc).encode())) == 66
    # Half the cores idle: the processes' worth of what they hold.
    for w in doc["workers"]:
        w["cores"][1]["in_request"] = 0
    assert at_once(_frame(json.dumps(doc).encode())) == 34


def test_at_once_is_unknown_when_a_threaded_worker_has_no_cores_in_the_stats() -> None:
    doc = json.loads(BUSY)
    doc["workers"][5]["cores"] = []
    assert at_once(_frame(json.dumps(doc).encode())) is None
