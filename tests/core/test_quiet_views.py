"""A slot that did not change between polls keeps its worker view (core/derive.py): the
same object, with the same numbers as one built afresh. Any change to the worker's stats or
to its process, or a request in service, builds it again."""

from __future__ import annotations

import dataclasses
from typing import Any

from tests.support.instances import document, poll_of, worker
from uwsgitune.core.derive import Tracker
from uwsgitune.core.frame import FIELD_NAMES, Frame, with_fields
from uwsgitune.core.samples import HostSample, Poll, ProcSample

PIDS = (201, 202)


def _host(cpu: dict[int, float]) -> HostSample:
    procs = tuple(ProcSample(pid, cpu.get(pid, 1.0), 30_000_000, runq_seconds=0.5) for pid in PIDS)
    return HostSample(
        cpu_count=2,
        effective_cpus=2.0,
        cpu_busy_seconds=10.0,
        cpu_total_seconds=100.0,
        mem_total=8 << 30,
        mem_available=4 << 30,
        procs=procs,
    )


def _poll(
    t: float, requests: int = 5, cpu: float = 1.0, core: dict[str, Any] | None = None
) -> Poll:
    """Two workers: the first served `requests` and used `cpu` seconds; the second, idle, or
    in the request `core` describes."""
    second = worker(2, PIDS[1], requests=7, running_time=7000)
    if core is not None:
        second |= {"status": "busy", "cores": [core]}
    workers = [worker(1, PIDS[0], requests=requests, running_time=requests * 1000), second]
    return poll_of(document(100, workers), t, host=_host({PIDS[0]: cpu}))


def _frames(polls: list[Poll]) -> tuple[list[Frame], list[Frame]]:
    """The frames of one tracker over `polls`, and each poll's frame built afresh (a new
    tracker that saw only the poll before it)."""
    kept, out, fresh = Tracker("s"), [], []
    for i, poll in enumerate(polls):
        out.append(kept.update(poll))
        again = Tracker("s")
        if i:
            again.update(polls[i - 1])
        fresh.append(again.update(poll))
    return out, fresh


def test_an_unchanged_slot_keeps_its_view_and_its_numbers() -> None:
    polls = [_poll(t) for t in (1.0, 2.0, 3.0, 4.0)]
    frames, fresh = _frames(polls)
    assert frames == fresh
    assert frames[3].workers[0] is frames[2].workers[0]  # unchanged since poll 2
    assert frames[3].workers[0].cpu_pct == 0.0 and frames[3].workers[0].rps == 0.0


def test_a_process_that_used_cpu_gets_a_new_view() -> None:
    """An idle worker's stats stay the same while its process wakes for connections others
    take (the thundering herd): its CPU changed, and so does its view."""
    polls = [_poll(1.0), _poll(2.0), _poll(3.0), _poll(4.0, cpu=1.25)]
    frames, fresh = _frames(polls)
    assert frames == fresh
    assert frames[3].workers[0].cpu_pct == 25.0
    assert frames[3].workers[1] is frames[2].workers[1]  # the other slot did not change


def test_a_worker_that_served_gets_a_new_view() -> None:
    polls = [_poll(1.0), _poll(2.0), _poll(3.0), _poll(4.0, requests=6)]
    frames, fresh = _frames(polls)
    assert frames == fresh
    assert frames[3].workers[0].rps == 1.0 and frames[3].workers[0].mean_rt_ms == 1.0


def test_a_request_in_service_ages_in_a_view_built_each_poll() -> None:
    """A request stuck in service leaves every counter as it was: its age still grows."""
    core = {
        "id": 0,
        "requests": 0,
        "in_request": 1,
        "vars": ["PATH_INFO=/slow"],
        "req_info": {"request_start": 1_800_000_000.0},
    }
    frames, fresh = _frames([_poll(t, core=core) for t in (1.0, 2.0, 3.0, 4.0)])
    assert frames == fresh
    assert [f.workers[1].request_age for f in frames] == [1.0, 2.0, 3.0, 4.0]
    assert frames[3].workers[0] is frames[2].workers[0]


def test_with_fields_is_dataclasses_replace() -> None:
    """The tracker's one copy of a frame a poll (`with_fields`) is `dataclasses.replace`."""
    frames, _ = _frames([_poll(1.0), _poll(2.0, requests=9)])
    for frame in frames:
        for i, name in enumerate(FIELD_NAMES):
            changes = {name: f"value {i}", FIELD_NAMES[-1 - i]: i}
            assert with_fields(frame, changes) == dataclasses.replace(frame, **changes)
        assert with_fields(frame, {}) == frame and type(with_fields(frame, {})) is Frame
