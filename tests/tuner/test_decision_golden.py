"""Every decision the tuner makes on recorded and simulated polls is pinned.

A restructuring of the code around `decide` (issue 37) must not change one decision. Each
recording in tests/data/recordings is replayed through the real tracker and window, and a
set of plant-simulator runs (tests/tuner/plant.py) drives `decide` in closed loop; a digest
of every `Decision` (action, code, counts, route, reason, evidence and the next state) is
compared with tests/data/decision-digests.json. A change that means to alter decisions
regenerates it on purpose, and says so in its commit:

    .venv/bin/python -m tests.tuner.test_decision_golden --update
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.tuner.plant import Plant, run
from uwsgitune.core.derive import Tracker
from uwsgitune.core.frame import Frame
from uwsgitune.sources.recording import read_recording
from uwsgitune.tuner import Decision, TunerSettings, TunerState, decide

DATA = Path(__file__).resolve().parents[1] / "data"
RECORDINGS = sorted((DATA / "recordings").glob("*.jsonl"))
DIGESTS = DATA / "decision-digests.json"
SECONDS = 240


def _replayed(recording: Path) -> Iterator[Decision]:
    """`decide` at each poll of each instance in the recording; a change is taken as made
    (its next state adopted), as in apply mode: the recording does not answer it."""
    trackers: dict[str, Tracker] = {}
    windows: dict[str, list[Frame]] = {}
    states: dict[str, TunerState] = {}
    for poll in read_recording(recording):
        frame = trackers.setdefault(poll.source, Tracker(poll.source)).update(poll)
        frames = windows.setdefault(poll.source, [])
        frames.append(frame)
        del frames[:-300]
        top = max(frame.workers_max or 0, 2)
        settings = TunerSettings(min_workers=1, max_workers=top)
        d = decide(frames, states.get(poll.source, TunerState()), settings, now=frame.mono)
        states[poll.source] = d.state
        yield d


def _step_load(at: int, clients: int) -> Callable[[Plant, int], None]:
    def shape(plant: Plant, t: int) -> None:
        if t == at:
            plant.clients = clients

    return shape


# name: (plant, ceiling, load shape); each like a scenario of bench/tuner_bench.py
PLANTS: dict[str, Callable[[], tuple[Plant, int, Callable[[Plant, int], None] | None]]] = {
    "cpu-from-64": lambda: (Plant(live=64, workers_max=64, cpu_ms=3, clients=64), 64, None),
    "cpu-from-2": lambda: (Plant(live=2, workers_max=64, cpu_ms=3, clients=64), 64, None),
    "io-from-2": lambda: (Plant(live=2, workers_max=64, cpu_ms=1, io_ms=30, clients=48), 64, None),
    "mixed": lambda: (Plant(live=8, workers_max=64, cpu_ms=2, io_ms=12, clients=64), 64, None),
    "threads-cpu": lambda: (
        Plant(live=16, workers_max=64, cpu_ms=5, clients=32, threads=4),
        64,
        None,
    ),
    "threads-io": lambda: (
        Plant(live=8, workers_max=64, cpu_ms=1, io_ms=40, clients=64, threads=4, thread_slots=True),
        64,
        None,
    ),
    "step": lambda: (
        Plant(live=4, workers_max=64, cpu_ms=1, io_ms=30, clients=8),
        64,
        _step_load(80, 40),
    ),
    "drop": lambda: (
        Plant(live=24, workers_max=64, cpu_ms=1, io_ms=30, clients=24),
        64,
        _step_load(60, 1),
    ),
    "memory": lambda: (
        Plant(live=2, workers_max=16, cpu_ms=1, io_ms=50, clients=16, mem_available=600 * 2**20),
        16,
        None,
    ),
    "open-loop": lambda: (
        Plant(live=4, workers_max=32, cpu_ms=2, io_ms=20, clients=None, rate=300.0),
        32,
        None,
    ),
    "busy-host": lambda: (
        Plant(live=8, workers_max=32, cpu_ms=4, clients=32, others=1.0),
        32,
        None,
    ),
}


def _simulated(name: str) -> Iterator[Decision]:
    plant, top, shape = PLANTS[name]()
    settings = TunerSettings(min_workers=2, max_workers=top)
    for _t, _frame, d in run(plant, settings, SECONDS, shape):
        yield d


def digest(decisions: Iterator[Decision]) -> str:
    h = hashlib.sha256()
    for d in decisions:
        h.update(repr(d).encode() + b"\n")
    return h.hexdigest()


def _all() -> dict[str, str]:
    out = {f"recording:{p.name}": digest(_replayed(p)) for p in RECORDINGS}
    out.update({f"plant:{name}": digest(_simulated(name)) for name in PLANTS})
    return out


@pytest.mark.parametrize("recording", RECORDINGS, ids=lambda p: p.stem)
def test_a_recording_gives_the_same_decisions(recording: Path) -> None:
    want = json.loads(DIGESTS.read_text())
    assert digest(_replayed(recording)) == want[f"recording:{recording.name}"], (
        "the tuner's decisions on this recording changed; if that is meant, run: "
        "python -m tests.tuner.test_decision_golden --update"
    )


@pytest.mark.parametrize("name", sorted(PLANTS))
def test_a_simulated_run_gives_the_same_decisions(name: str) -> None:
    want = json.loads(DIGESTS.read_text())
    assert digest(_simulated(name)) == want[f"plant:{name}"], (
        "the tuner's decisions on this simulated run changed; if that is meant, run: "
        "python -m tests.tuner.test_decision_golden --update"
    )


def test_every_case_has_a_digest_and_the_runs_decide_something() -> None:
    assert sorted(json.loads(DIGESTS.read_text())) == sorted(_all())
    changes = sum(d.is_change for name in PLANTS for d in _simulated(name))
    assert changes >= len(PLANTS) // 2  # the runs exercise moves, not only holds


if __name__ == "__main__" and sys.argv[1:] == ["--update"]:
    DIGESTS.write_text(json.dumps(_all(), indent=1, sort_keys=True) + "\n")
    print(f"wrote {DIGESTS}")
