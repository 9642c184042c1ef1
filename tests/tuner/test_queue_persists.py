"""A step up on a queue needs the queue to persist, pure (`sizing._brief`,
`Measures.queue_persists`): at a steady load near the workers' count (100 req/s of 37 ms on
4 workers, rho 0.9) a queue of a few comes and goes between two polls, and stepping up on
one poll's sent the latency bench's pool 4 -> 13, undone 10 s later. A load past the pool
queues at every poll (stepped on at the second), and a backlog that fills or a queue past
twice the workers is acted on at once. Also: a load that fell keeps one spare past the
requests in service (`demand.load_fell`), not only past the few polls' count at once."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

from tests.support.instances import Instance, Load
from tests.tuner.test_return_step import _back
from uwsgitune.core.frame import SocketView
from uwsgitune.tuner import Decision, TunerSettings, TunerState, decide
from uwsgitune.tuner.demand import load_fell
from uwsgitune.tuner.level import Level

S = TunerSettings(min_workers=2, max_workers=16)
BACKLOG = 100


def _decisions(queues: dict[int, int], seconds: int = 20) -> Iterator[tuple[int, Decision]]:
    """4 workers at 100 req/s of 37 ms (L = 3.7, busy 92%), the CPUs idle, the listen queue
    `queues[t]` at poll t (else empty), one poll a second: each poll's decision, adopted as
    in apply mode. Every worker busy at a poll with a queue."""
    inst = Instance("pool", 1_700_000_000.0, 0.0)
    frames = []
    st = TunerState()
    for t in range(seconds + 1):
        q = queues.get(t, 0)
        load = Load(
            live=4,
            cheap=12,
            busy=4 if q else 3 + t % 2,
            rps=100.0,
            in_service=3.7,
            worker_cpu=0.025,
            runq=0.0,
            host_busy=None,
            cpus=2,
            effective_cpus=2.0,
            somaxconn=None,
            sockets=(SocketView("127.0.0.1:9000", "http", False, q, BACKLOG, "stats"),),
            spawned=1_700_000_000.0 - 1000.0,
        )
        frames.append(inst.frame(float(t), load))
        d = decide(frames, st, S, now=float(t))
        st = d.state
        yield t, d


def _first_change(queues: dict[int, int]) -> tuple[int, Decision] | None:
    """The first change the tuner makes, and when; None if it makes none."""
    return next(((t, d) for t, d in _decisions(queues) if d.is_change), None)


def test_one_polls_queue_at_a_steady_load_does_not_step_up() -> None:
    seen = dict(_decisions({10: 5}))
    assert not [d.line() for d in seen.values() if d.is_change]
    # the poll of the queue says why it holds
    assert (seen[10].action, seen[10].code) == ("hold", "queue-brief"), seen[10].line()
    assert "a queue at 1 of the last 3 polls" in seen[10].reason


def test_a_queue_that_persists_steps_up_at_its_second_poll() -> None:
    got = _first_change({t: 5 for t in range(10, 21)})
    assert got is not None
    t, d = got
    assert (t, d.action, d.code) == (11, "up", "saturated"), d.line()
    # two polls of it, not necessarily in a row
    got = _first_change({10: 5, 12: 5})
    assert got is not None and got[0] == 12 and got[1].code == "saturated"


def test_a_full_backlog_or_a_queue_past_twice_the_workers_steps_up_at_once() -> None:
    for queue in (BACKLOG, 9):  # full; more than 2 x 4 workers waiting
        got = _first_change({t: queue for t in range(10, 21)})
        assert got is not None
        t, d = got
        assert (t, d.action, d.code) == (10, "up", "saturated"), (queue, d.line())


def test_a_load_that_fell_keeps_a_spare_past_what_its_requests_need() -> None:
    # 8 workers; the load fell from 6.7 requests to 3.06 in service; the level's four polls
    # read at most 2 at once. 3 workers would hold its mean with none to spare (the fleet
    # simulation's pods then queued and stepped up again).
    base = replace(
        _back(0.0, 0.0, None),
        live=8,
        queue=0.0,
        queue_now=0.0,
        l_recent=3.06,
        concurrency_peak=6,
        level=Level(demand=3.06, in_service=3.06, peak=2, fell_from=6.7),
    )
    # a closed loop's spread over the window: one past the 4 its requests need
    p = load_fell(replace(base, dispersion=0.0), S)
    assert p is not None and p.code == "load-fell" and p.desired == 5, p
    # random arrivals: L + 2√L = 7, a move not worth a change from 8
    assert load_fell(replace(base, dispersion=1.0), S) is None
    # the spread not read yet: no lower than L + 2√L either (a step up stops at the most
    # seen at once until then; a way down that did too went below it: a turn)
    assert load_fell(base, S) is None
    p = load_fell(replace(base, live=12, concurrency_peak=12), S)
    assert p is not None and p.desired == 7, p
