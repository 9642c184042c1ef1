"""The latency target as a constraint on the tuner (tuner/targeting.py), through `decide`:
synthetic frames from the real Tracker, latency views from a real recorder."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.frames import series, tcp
from tests.support.latency import lognormal_view
from tests.tuner.plant import Plant
from uwsgitune.core.frame import Frame
from uwsgitune.core.latencyreport import LatencyView
from uwsgitune.tuner import Decision, TunerSettings, TunerState, decide

TARGET = TunerSettings(max_workers=16, latency_target="p99=250ms")
PLAIN = TunerSettings(max_workers=16)
FAST = {"median_us": 20_000, "sigma": 0.3}  # service p99 ~40 ms
SLOW = {"median_us": 300_000, "sigma": 0.3}  # service p99 ~600 ms
# 8 workers, 1 request in service: the throughput tuner shrinks (littles-law-down)
IDLE: dict[str, Any] = {"live": 8, "workers_max": 16, "littles_l": 1.0, "rps": 100}
# 4 workers, 2.5 requests in service: the throughput tuner holds (`steady`)
STEADY: dict[str, Any] = {"live": 4, "workers_max": 16, "littles_l": 2.5, "rps": 100}
# 4 workers, all busy, a queue: requests wait for a worker
BUSY: dict[str, Any] = {
    "live": 4,
    "workers_max": 16,
    "busy_ratio": 1.0,
    "rps": 100,
    "sockets": (tcp(queue=2),),
}


def step(frames: list[Frame], view: LatencyView | None, s: TunerSettings = TARGET) -> Decision:
    return decide(frames, TunerState(), s, latency=view)


def test_without_a_target_the_view_changes_nothing() -> None:
    frames = series(40, **IDLE)
    for view in (None, lognormal_view(**SLOW), lognormal_view(**FAST, coverage=0.1)):
        assert step(frames, view, PLAIN) == step(frames, None, PLAIN)


def test_room_under_the_target_steps_down_towards_the_fewest_workers() -> None:
    d = step(series(40, **STEADY), lognormal_view(**FAST))
    assert step(series(40, **STEADY), None, PLAIN).code == "steady"
    assert (d.action, d.code, d.desired) == ("down", "latency-room", 3)
    assert "under 80% of it" in d.reason
    ev = d.evidence
    assert ev["latency_target_ms"] == 250.0 and ev["latency_basis"] == "service"
    assert ev["p99_ms"] == ev["service_p99_ms"] and 30 < ev["p99_ms"] < 60  # type: ignore[operator]
    assert ev["latency_requests"] == 1000 and ev["latency_coverage"] == 1.0
    assert "p99_ms 4" in d.line() or "p99_ms 3" in d.line() or "p99_ms 5" in d.line()


def test_a_met_target_needs_no_spare_workers_from_littles_law() -> None:
    frames = series(40, live=2, workers_max=16, littles_l=3.0, rps=100)
    assert step(frames, None, PLAIN).code == "littles-law-up"
    d = step(frames, lognormal_view(**FAST))
    assert (d.action, d.code, d.desired) == ("hold", "latency-met", 2)
    assert "p99 " in d.reason and "not needed" in d.reason
    # an urgent move (here the ceiling) is never held by the target, near it or not
    near = lognormal_view(median_us=110_000, sigma=0.3)
    lower = TunerSettings(max_workers=6, latency_target="p99=250ms")
    d = step(series(40, **IDLE), near, lower)
    assert (d.action, d.code, d.desired) == ("down", "ceiling", 6)


def test_never_below_the_requests_in_service() -> None:
    # 3.8 in service on 4 workers: 4 hold them, so no room to step down, whatever p99 says
    d = step(series(40, live=4, workers_max=16, littles_l=3.8, rps=100), lognormal_view(**FAST))
    assert d.action == "hold"


def test_within_20_percent_of_the_target_nothing_shrinks() -> None:
    frames = series(40, **IDLE)
    assert step(frames, None, PLAIN).action == "down"
    near = lognormal_view(median_us=110_000, sigma=0.3)  # p99 ~220 ms: under, within 20%
    d = step(frames, near)
    assert (d.action, d.code) == ("hold", "latency-near")
    assert "within 20% of it" in d.reason and "littles-law-down wanted" in d.reason
    assert 200 <= d.evidence["p99_ms"] <= 250  # type: ignore[operator]


def test_a_queue_wait_miss_grows_the_pool() -> None:
    view = lognormal_view(**FAST, wait_median_us=150_000)
    d = step(series(40, **BUSY), view)
    assert (d.action, d.code, d.desired) == ("up", "latency-queue", 5)
    assert d.evidence["latency_basis"] == "stamped"
    assert d.evidence["queue_p99_ms"] > d.evidence["service_p99_ms"]  # type: ignore[operator]
    assert "the wait for a worker" in d.reason


def test_without_the_stamp_the_target_is_service_time_plus_littles_mean_wait() -> None:
    view = lognormal_view(**FAST, little_wait_ms=300.0)
    d = step(series(40, **BUSY), view)
    assert (d.action, d.code) == ("up", "latency-queue")
    assert d.evidence["latency_basis"] == "little" and d.evidence["little_wait_ms"] == 300.0
    assert "mean queue wait (Little's law; no usable stamp)" in d.reason
    p99, service = d.evidence["p99_ms"], d.evidence["service_p99_ms"]
    assert p99 == pytest.approx(service + 300.0, abs=0.02)  # type: ignore[operator]


def test_a_service_time_miss_never_grows_nor_shrinks() -> None:
    for frames in (series(40, **BUSY), series(40, **IDLE), series(40, **STEADY)):
        d = step(frames, lognormal_view(**SLOW, wait_median_us=50_000))
        assert (d.action, d.code) == ("hold", "latency-service"), d.line()
        assert "more workers cannot fix" in d.reason
        assert d.evidence["service_p99_ms"] > 250  # type: ignore[operator]


def test_a_wait_with_idle_workers_and_no_listen_queue_is_not_for_a_worker() -> None:
    d = step(series(40, **IDLE), lognormal_view(**FAST, wait_median_us=150_000))
    assert (d.action, d.code) == ("hold", "latency-wait-elsewhere")
    assert "is not for a worker" in d.reason
    assert d.state.latency_floor is None  # the count was not too few


@pytest.mark.parametrize(
    ("why", "view", "words"),
    [
        ("untrusted", {"trusted": False}, "not proved"),
        ("low coverage", {"coverage": 0.4}, "coverage 40% < 70%"),
        ("few requests", {"rps": 5}, "(< 200 to judge)"),
        ("no request log", None, "no request log (--latency)"),
    ],
)
def test_data_that_cannot_be_judged_never_drives_a_shrink(
    why: str, view: dict[str, Any] | None, words: str
) -> None:
    v = None if view is None else lognormal_view(**FAST, **view)
    d = step(series(40, **IDLE), v)
    assert (d.action, d.code) == ("wait", "latency-unknown"), why
    assert words in d.reason and "wants 1 (littles-law-down)" in d.reason
    assert d.evidence["latency_unjudged"] is not None


def test_a_stale_request_log_waits() -> None:
    from dataclasses import replace

    v = replace(lognormal_view(**FAST), silent_for=30.0)
    d = step(series(40, **IDLE), v)
    assert d.code == "latency-unknown" and "none for 30s (stale)" in d.reason


def test_untrusted_data_never_grows_either() -> None:
    v = lognormal_view(**FAST, wait_median_us=150_000, trusted=False)
    d = step(series(40, **BUSY), v)
    assert d.code != "latency-queue" and d.desired <= 4


def test_a_count_just_changed_is_measured_before_it_is_judged() -> None:
    frames = series(6, **STEADY)  # 6 s at this count: not yet the 10 s window
    d = step(frames, lognormal_view(**FAST))
    assert d.action != "down" and "measuring latency at this count" in str(
        d.evidence["latency_unjudged"]
    )


def test_a_queue_miss_sets_a_floor_the_room_rule_never_goes_under() -> None:
    d = step(series(40, **BUSY), lognormal_view(**FAST, wait_median_us=150_000))
    assert d.state.latency_floor == 5
    # later, at 5 workers with 3.5 in service and room: 4 would hold them, but 4 missed
    frames = series(40, live=5, workers_max=16, littles_l=3.5, rps=100)
    room = lognormal_view(**FAST)
    assert step(frames, room).desired == 4  # no floor: down to the requests in service
    kept = TunerState(latency_floor=5, latency_floor_at=d.state.latency_floor_at)
    later = decide(frames, kept, TARGET, latency=room)
    assert (later.action, later.desired) == ("hold", 5)
    # the floor is forgotten after `reprobe_after`
    old = TunerState(latency_floor=5, latency_floor_at=frames[-1].mono - 2 * TARGET.reprobe_after)
    assert decide(frames, old, TARGET, latency=room).desired == 4


# -- properties over many views --------------------------------------------------------------

views = st.fixed_dictionaries(
    {
        "median_us": st.sampled_from([5_000, 20_000, 60_000, 110_000, 300_000]),
        "wait_median_us": st.sampled_from([None, 1_000, 50_000, 200_000]),
        "little_wait_ms": st.sampled_from([None, 5.0, 150.0]),
        "coverage": st.sampled_from([None, 0.3, 0.9, 1.0]),
        "trusted": st.booleans(),
        "rps": st.sampled_from([3, 20, 100]),
    }
)
pools = st.sampled_from([IDLE, STEADY, BUSY])


@settings(max_examples=60, deadline=None)
@given(views, pools)
def test_the_target_rules_hold_for_any_view(view: dict[str, Any], pool: dict[str, Any]) -> None:
    v = lognormal_view(seconds=20, **view)
    frames = series(40, **pool)
    d, plain = step(frames, v), step(frames, None, PLAIN)
    live = pool["live"]
    ev = d.evidence
    if "latency_unjudged" in ev:  # nothing judged: the throughput decision, but a shrink waits
        if plain.action == "down":
            assert (d.action, d.code, d.desired) == ("wait", "latency-unknown", live)
        else:
            assert (d.action, d.code, d.desired) == (plain.action, plain.code, plain.desired)
        return
    p99, target = ev["p99_ms"], ev["latency_target_ms"]
    assert isinstance(p99, float) and isinstance(target, float)
    if p99 >= 0.8 * target:  # within 20% of the target, or over it: never shrink
        assert d.desired >= live, d.line()
    if ev["service_p99_ms"] >= target:  # type: ignore[operator]
        assert d.desired <= live or d.code not in ("latency-queue",), d.line()
    if d.code == "latency-queue":
        assert p99 > target and ev["service_p99_ms"] < target  # type: ignore[operator]


def test_the_floor_goes_when_the_load_it_was_learned_at_falls_by_half() -> None:
    kept = TunerState(latency_floor=9, latency_floor_at=1030.0, latency_floor_load=8.0)
    frames = series(40, **IDLE)  # 1 request in service, none queued: far under 8
    d = decide(frames, kept, TARGET, latency=lognormal_view(**FAST))
    assert d.state.latency_floor is None and (d.action, d.code) == ("down", "littles-law-down")
    heavy = TunerState(latency_floor=9, latency_floor_at=1030.0, latency_floor_load=1.5)
    d = decide(frames, heavy, TARGET, latency=lognormal_view(**FAST))
    assert d.state.latency_floor == 9 and (d.action, d.code) == ("hold", "latency-floor")
    assert "8 workers were too few for this load" in d.reason


def test_a_service_time_miss_on_oversubscribed_cpus_lets_the_pool_shrink() -> None:
    # 16 workers on 2 CPUs, CPU-bound: each request's service time includes its wait for a
    # CPU, so the move down to the model's count is what brings it under the target
    from tests.tuner.plant import Plant

    plant = Plant(live=16, workers_max=16, cpu_ms=10, clients=16)
    frames = [plant.frame(float(t)) for t in range(14)]
    slow = lognormal_view(**SLOW)
    waits = [decide(frames[: t + 1], TunerState(), TARGET, float(t), slow) for t in range(6, 9)]
    assert all(d.code == "latency-unknown" and "measuring" in d.reason for d in waits)
    d = decide(frames, TunerState(), TARGET, 13.0, slow)
    assert (d.action, d.code) == ("down", "cpu-oversubscribed") and d.desired < 16
    assert d.evidence["service_p99_ms"] > 250  # type: ignore[operator]


def _plant_frames(clients: int) -> list[Frame]:
    plant = Plant(live=4, workers_max=16, cpu_ms=1, io_ms=30, clients=clients, noise=0.0)
    return [plant.frame(float(t)) for t in range(30)]


def test_a_short_queue_that_costs_the_target_nothing_grows_nothing() -> None:
    """The throughput tuner steps up on a short queue (`saturated`); with the target met, the
    target decides: hold, with room and within 20% of it alike (the bench's pool went 5 → 7
    at p99 75% of its target, and 5 → 6 at 80%). A queue past twice the workers at every
    poll still grows, and so does a miss from queue wait."""
    frames = _plant_frames(6)  # 4 workers, all busy, 2 queued
    plain = decide(frames, TunerState(), PLAIN, now=29.0)
    assert (plain.action, plain.code) == ("up", "saturated")
    met = decide(frames, TunerState(), TARGET, now=29.0, latency=lognormal_view(**FAST))
    assert (met.action, met.code, met.desired) == ("hold", "latency-met", 4)
    assert "met" in met.reason and "saturated" in met.reason
    queued = decide(
        _plant_frames(14), TunerState(), TARGET, now=29.0, latency=lognormal_view(**FAST)
    )
    assert (queued.action, queued.code) == ("hold", "latency-met")  # 10 waiting, but met
    full = _plant_frames(14)
    full[-1] = replace(full[-1], sockets=(tcp(queue=10, backlog=10),))
    backlog = decide(full, TunerState(), TARGET, now=29.0, latency=lognormal_view(**FAST))
    assert backlog.action == "up", backlog.line()  # refused connections: in no window
    near = lognormal_view(median_us=110_000, sigma=0.3)  # p99 ~220 ms: within 20% of 250
    held = decide(frames, TunerState(), TARGET, now=29.0, latency=near)
    assert (held.action, held.code) == ("hold", "latency-met")
    missed = lognormal_view(**FAST, wait_median_us=150_000)  # the wait for a worker past it
    assert decide(frames, TunerState(), TARGET, now=29.0, latency=missed).action == "up"


def test_a_count_just_probed_down_is_judged_by_its_own_window() -> None:
    """The bench's pool was probed 5 → 4, and 8 s later, before the 10 s window at 4 was
    whole, the throughput tuner's `saturated` took it to 6 (then 5 → 7): with a target,
    growth waits for the count's own window unless a backlog grows."""
    plant = Plant(live=5, workers_max=16, cpu_ms=1, io_ms=30, clients=6, noise=0.0)
    frames = [plant.frame(float(t)) for t in range(25)]
    plant.live = 4  # probed down 5 s ago
    frames += [plant.frame(float(t)) for t in range(25, 30)]
    assert decide(frames, TunerState(), PLAIN, now=29.0).code == "saturated"
    d = decide(frames, TunerState(), TARGET, now=29.0, latency=lognormal_view(**FAST))
    assert (d.action, d.code, d.desired) == ("wait", "latency-unknown", 4)
    assert "the latency target decides at this count" in d.reason
    plant.clients = 14  # 10 waiting on 4 workers: a backlog grows at once
    frames[-1] = plant.frame(29.0)
    frames[-2] = plant.frame(28.0)
    d = decide(frames, TunerState(), TARGET, now=29.0, latency=lognormal_view(**FAST))
    assert d.action == "up"


def test_one_polls_queue_past_the_workers_is_no_backlog() -> None:
    """Near the fewest workers a queue of a few comes and goes: the bench's pool at 4 (its
    p99 under 80% of the target) was sent to 10 and 13 workers on one poll's queue of 5."""
    plant = Plant(live=4, workers_max=16, cpu_ms=1, io_ms=30, clients=6, noise=0.0)
    frames = [plant.frame(float(t)) for t in range(29)]
    plant.clients = 9  # 5 waiting on 4 workers, at the latest poll only
    frames.append(plant.frame(29.0))
    assert decide(frames, TunerState(), PLAIN, now=29.0).action == "up"
    d = decide(frames, TunerState(), TARGET, now=29.0, latency=lognormal_view(**FAST))
    assert (d.action, d.code) == ("hold", "latency-met")


def test_with_the_target_judged_a_queue_grows_nothing_but_a_full_backlog() -> None:
    """Run 5 of the target bench (quiet machine): at 4 workers and rho 0.9 the queue read 4-6
    at every poll, the target met, and the throughput tuner's `saturated` took the pool to 11
    and 15 workers, then back: a cycle of 150 s. With a window at this count to read, the target
    decides: a queue, however long, grows nothing while it is met; a full backlog does
    (refused connections are in no window). Before the count has a window, a queue past
    twice the workers at every poll still grows (`_backlog`)."""
    for clients in (9, 12, 13, 20):  # 5, 8, 9, 16 waiting on 4
        frames = _plant_frames(clients)
        assert decide(frames, TunerState(), PLAIN, now=29.0).code == "saturated"
        d = decide(frames, TunerState(), TARGET, now=29.0, latency=lognormal_view(**FAST))
        assert (d.action, d.code) == ("hold", "latency-met"), (clients, d.line())


def test_the_queue_a_reload_leaves_is_the_reloads_not_the_counts() -> None:
    """Run 6 of the target bench: reloaded 5 -> 4 at rho 0.9, the pool read 13 waiting at the
    polls after the reload (requests held through it, served late); its first 10 s window
    at 4 counted them, read a miss by queue wait, and kept 5 workers for the rest of the
    run. The count is timed from the first poll its queue is under the workers (at most
    DRAIN_MAX after the change), and DRAIN_TAIL after that poll, not from its interval's
    start: run 14 (reloaded 6 -> 5) read p99 192 ms in the 10 s window that held the second
    after the drained poll and 129 ms one second later, and the minute that held that second
    read 192 too: a miss by queue wait, 5 -> 7, and a latency floor at 6 for the rest of the
    run."""
    from uwsgitune.tuner.targeting import DRAIN_MAX, DRAIN_TAIL, count_age

    plant = Plant(live=5, workers_max=16, cpu_ms=1, io_ms=30, clients=6, noise=0.0)
    frames = [plant.frame(float(t)) for t in range(20)]
    plant.live, plant.clients = 4, 17  # 13 waiting after the reload
    frames += [plant.frame(float(t)) for t in range(20, 23)]
    plant.clients = 6  # drained: 2 waiting on 4
    frames += [plant.frame(float(t)) for t in range(23, 40)]
    # at 4 since the poll at 20 (its interval from 19); drained at the poll at 23, whose
    # waiting requests are logged in the second after it
    assert count_age(frames[:23], 4, 22.0, 60.0) == 0.0  # still draining: not timed yet
    assert count_age(frames[:24], 4, 23.5, 60.0) == 0.0  # drained, its tail not yet logged
    assert count_age(frames[:30], 4, 29.0, 60.0) == pytest.approx(29.0 - 23.0 - DRAIN_TAIL)
    assert count_age(frames, 4, 39.0, 10.0) == pytest.approx(10.0)  # whole: read back to 10
    # never drained: timed from DRAIN_MAX after the change, so a count always gets judged
    again = Plant(live=5, workers_max=16, cpu_ms=1, io_ms=30, clients=6, noise=0.0)
    stuck = [again.frame(float(t)) for t in range(20)]
    again.live, again.clients = 4, 17
    stuck += [again.frame(float(t)) for t in range(20, 40)]
    assert count_age(stuck, 4, 39.0, 60.0) == pytest.approx(39.0 - 19.0 - DRAIN_MAX)
    # a change with no queue (the FIFO's): timed from its first poll's tail, the requests in
    # service at the change logged by then
    fifo = Plant(live=5, workers_max=16, cpu_ms=1, io_ms=30, clients=4, noise=0.0)
    quiet = [fifo.frame(float(t)) for t in range(20)]
    fifo.live = 4
    quiet += [fifo.frame(float(t)) for t in range(20, 40)]
    assert count_age(quiet, 4, 39.0, 60.0) == pytest.approx(39.0 - 20.0 - DRAIN_TAIL)


def _minute(wait_ms: int, slow_in_last_10s: int = 20, slow_before: int = 0) -> LatencyView:
    """A minute at 100 requests/s, 20 ms of service each; `slow_in_last_10s` of the last
    10 s's 1,000 requests (and `slow_before` of the 50 s before) waited `wait_ms` for a
    worker: the 10 s window's p99 is their 20 + wait_ms, the minute's only when they are
    more than 1% of its 6,000."""
    from tests.support.latency import log_line, recorder_with, view_of

    batches = []
    for k in range(60):
        slow = slow_in_last_10s // 10 if k >= 50 else slow_before // 50
        lines = [log_line(20_000, wait_us=1_000) for _ in range(100 - slow)]
        lines += [log_line(20_000, wait_us=wait_ms * 1000) for _ in range(slow)]
        batches.append((941.0 + k, lines))
    return view_of(recorder_with(batches), 1000.0)


def test_a_miss_at_the_edge_in_10_s_alone_is_judged_over_the_minute() -> None:
    """Run 8 of the target bench: 4 workers met the target over a minute (the load
    generator's p99 2% under it), one 10 s window read p99 at the target from queue wait,
    the pool grew and its latency floor kept 5 for the rest of the run. A miss within
    `EDGE` of the target in the 10 s window alone grows nothing, sets no floor and shrinks
    nothing until the minute at this count misses too; a clear miss grows at once."""
    edge, clear = _minute(wait_ms=280), _minute(wait_ms=400)  # p99 ~300 and ~420 of 250
    young, old = series(40, **BUSY), series(70, **BUSY)  # the minute not yet / at the count
    for frames in (young, old):
        d = step(frames, edge)
        assert d.evidence["latency_window_s"] == 10 and 280 < d.evidence["p99_ms"] <= 312  # type: ignore[operator]
        assert (d.action, d.code, d.desired) == ("hold", "latency-edge", 4), d.line()
        assert d.state.latency_floor is None and "within 25% of it" in d.reason
        grown = step(frames, clear)
        assert (grown.action, grown.code, grown.desired) == ("up", "latency-queue", 5)
        assert grown.state.latency_floor == 5
    # 40 polls at the count: timed from its first poll's tail (DRAIN_TAIL), 38 s
    assert "judged over 60s at this count (38s of 60s)" in step(young, edge).reason
    assert "met over the last 60s" in step(old, edge).reason
    # the minute misses too (1.2% of its requests waited): a verdict, it grows
    both = _minute(wait_ms=280, slow_in_last_10s=20, slow_before=60)
    d = step(old, both)
    assert (d.action, d.code, d.desired) == ("up", "latency-queue", 5), d.line()
    # a full backlog is judged at once: refused connections are in no window
    refused = series(70, **{**BUSY, "sockets": (tcp(queue=64, backlog=64),)})
    d = step(refused, edge)
    assert d.action == "up" and d.code != "latency-edge", d.line()
    # no shrink at the edge either: the throughput tuner's move down waits
    idle = step(series(70, **IDLE), edge)
    assert step(series(70, **IDLE), None, PLAIN).action == "down"
    assert (idle.action, idle.code) == ("hold", "latency-edge")


def test_a_clear_miss_from_queue_wait_grows_by_a_stride_unless_a_backlog_grows() -> None:
    """Run 12 of the target bench: at 4 workers one 10 s window read p99 29% over the target
    (past the edge: judged at once) and the throughput tuner's `saturated`, sized on a queue
    of 8, took the pool 4 -> 12; `load-fell` took it to 6 22 s later, and the steady count
    missed 1.2 x the fewest. A miss from queue wait grows by one stride; the throughput
    tuner's whole step goes only when a backlog grows (a queue past twice the workers at
    every recent poll, or a socket's backlog full)."""
    clear = _minute(wait_ms=400)  # the 10 s window's p99 ~420 of 250: a clear miss
    plant = Plant(live=4, workers_max=16, cpu_ms=1, io_ms=30, clients=6, noise=0.0)
    frames = [plant.frame(float(t)) for t in range(69)]
    plant.clients = 12  # 8 waiting on 4, at the latest poll only
    frames.append(plant.frame(69.0))
    plain = decide(frames, TunerState(), PLAIN, now=69.0)
    assert plain.action == "up" and plain.desired > 5, plain.line()
    d = decide(frames, TunerState(), TARGET, now=69.0, latency=clear)
    assert (d.action, d.code, d.desired) == ("up", "latency-queue", 5), d.line()
    assert f"{plain.code} wanted {plain.desired}: no backlog growing" in d.reason
    assert d.state.latency_floor == 5
    # a queue past twice the workers at every recent poll: the backlog grows, the step goes
    plant.clients = 30
    grown = frames + [plant.frame(float(t)) for t in range(70, 75)]
    wide = decide(grown, TunerState(), PLAIN, now=74.0)
    assert wide.action == "up" and wide.desired > 5, wide.line()
    d = decide(grown, TunerState(), TARGET, now=74.0, latency=clear)
    assert (d.action, d.desired) == ("up", wide.desired), d.line()


def _open_loop(tail: list[int]) -> list[Frame]:
    """4 workers all busy under random arrivals: a queue that comes and goes (0-7) for a
    minute, then `tail`, one queue a poll."""
    queues = [0, 2, 0, 5, 1, 0, 3, 7, 2, 0, 1, 4, 0, 2, 6, 3, 0, 1, 0, 2] * 3 + tail
    plant = Plant(live=4, workers_max=16, cpu_ms=1, io_ms=30, clients=4, noise=0.0)
    frames = []
    for t, q in enumerate(queues):
        plant.clients = 4 + q
        frames.append(plant.frame(float(t)))
    return frames


def test_a_queue_of_random_arrivals_past_the_workers_grows_by_a_stride() -> None:
    """Run 15 of the target bench: 4 workers 93% busy at 100 requests/s met the target over
    the minute; random arrivals queued 12.7 over three polls, one 10 s window read p99 257
    ms of 180, and the throughput tuner's whole step went through (`_backlog`: a queue past
    twice the workers at every recent poll), 4 -> 16, then two minutes back down to 5. Under
    random arrivals such a queue is the next stride's to drain: the whole step needs the
    queue to grow faster than the stride's workers serve (here 20 in 4 s against their 32
    requests/s), or to stand still (a closed loop's clients: the run-12 test's 30 on 4)."""
    clear = _minute(wait_ms=400)
    excursion = _open_loop([0, 4, 9, 14, 20])
    plain = decide(excursion, TunerState(), PLAIN, now=64.0)
    assert plain.action == "up" and plain.desired > 5, plain.line()
    d = decide(excursion, TunerState(), TARGET, now=64.0, latency=clear)
    assert (d.action, d.code, d.desired) == ("up", "latency-queue", 5), d.line()
    assert f"{plain.code} wanted {plain.desired}: no backlog growing" in d.reason
    # the load itself grew: 40 more waiting each second, past the stride's 32 req/s
    surge = _open_loop([0, 40, 80, 120])
    for i in (-3, -2, -1):  # a backlog with room for them (the plant's holds 100)
        surge[i] = replace(surge[i], sockets=(tcp(queue=40 * (4 + i), backlog=1024),))
    plain = decide(surge, TunerState(), PLAIN, now=63.0)
    d = decide(surge, TunerState(), TARGET, now=63.0, latency=clear)
    assert plain.desired > 5 and (d.action, d.desired) == ("up", plain.desired), d.line()
    # a full backlog: the whole step, however the queue came
    full = _open_loop([0, 4, 9, 14, 20])
    full[-1] = replace(full[-1], sockets=(tcp(queue=64, backlog=64),))
    d = decide(full, TunerState(), TARGET, now=64.0, latency=clear)
    assert d.action == "up" and d.desired > 5, d.line()


def test_a_queue_miss_cut_to_a_stride_keeps_the_steps_flags() -> None:
    """The stride keeps what the throughput tuner's step carried: a GIL-bound step's leave
    to pass hot CPUs (`past_hot_cpu`), a probe's judging; a fresh proposal had dropped them,
    and the CPU bound then held a GIL-bound pool (found in review)."""
    from uwsgitune.tuner.decision import Proposal
    from uwsgitune.tuner.measures import gather
    from uwsgitune.tuner.targeting import _queue_miss, reading_at_count

    frames = series(70, **BUSY)
    f = gather(frames, TARGET, frames[-1].mono, float("-inf"))
    assert TARGET.latency_target is not None
    r, problem, _ = reading_at_count(_minute(wait_ms=400), TARGET.latency_target, 70.0, TARGET)
    assert r is not None and problem is None and r.cause == "queue"
    gil = Proposal(8, "gil-bound", "threads wait for the GIL", probe=True, past_hot_cpu=True)
    out = _queue_miss(gil, f, TunerState(), TARGET, r)
    assert out is not None and (out.desired, out.code) == (5, "latency-queue")
    assert out.past_hot_cpu and out.probe and "gil-bound wanted 8" in out.reason


def test_the_queue_a_reload_held_drains_before_the_count_is_judged() -> None:
    """Run 17 of the target bench: reloaded 5 -> 4 at 93% busy under random arrivals, the
    requests held through the reload read 33, 28 and 26 waiting as they drained (a queue
    past twice the workers at every poll, `_backlog`), and the throughput tuner's whole step
    went through before the count had a window: 4 -> 16, two minutes back down to 5, and
    every bound of the run missed. A queue that drains is the change's, not the count's:
    the count's own window decides. One that outgrows a stride still takes the whole step."""
    queues = [0, 2, 0, 5, 1, 0, 3, 7, 2, 0, 1, 4, 0, 2, 6, 3, 0, 1, 0, 2] * 3
    plant = Plant(live=5, workers_max=16, cpu_ms=1, io_ms=30, clients=5, noise=0.0)
    frames = []
    for t, q in enumerate(queues):
        plant.clients = 5 + q
        frames.append(plant.frame(float(t)))
    plant.live = 4  # reloaded
    for t, q in zip(range(60, 63), (33, 28, 26), strict=True):
        plant.clients = 4 + q
        frames.append(plant.frame(float(t)))
    view = _minute(wait_ms=400)
    plain = decide(frames, TunerState(), PLAIN, now=62.0)
    assert plain.action == "up" and plain.desired > 5, plain.line()
    d = decide(frames, TunerState(), TARGET, now=62.0, latency=view)
    assert (d.action, d.code, d.desired) == ("wait", "latency-unknown", 4), d.line()
    assert f"({plain.code}) but the latency target decides at this count" in d.reason
    assert "not growing faster than 5 workers would serve it" in d.reason
    # the same count with a queue that grows by 40 a second: the whole step
    for t, q in zip(range(60, 63), (33, 73, 113), strict=True):
        frames[t] = replace(frames[t], sockets=(tcp(queue=q, backlog=1024),))
    d = decide(frames, TunerState(), TARGET, now=62.0, latency=view)
    assert d.action == "up" and d.desired > 5, d.line()


def test_a_floor_learned_on_a_queue_outlasts_the_queue() -> None:
    """Run 18 of the target bench: at 4 workers a 10 s window missed by queue wait (3.8 in
    service, 6.3 queued), 4 -> 5 and a latency floor at 5 learned on 10.1 requests; at 5 the
    queue drained (3.7 in service, none queued), the floor's load read as fallen by more than
    half, the floor went, and 5 -> 4 again: the run's last two minutes at 4 read p99 210 ms
    of 170. The floor's load is the requests in service, which the pool's growth does not
    drain; a count too new to read them keeps the floor. (Here 3 queued on 4.)"""
    plant = Plant(live=4, workers_max=16, cpu_ms=1, io_ms=30, clients=7, noise=0.0)
    frames = [plant.frame(float(t)) for t in range(40)]
    miss = decide(frames, TunerState(), TARGET, now=39.0, latency=_minute(wait_ms=400))
    assert (miss.action, miss.code, miss.desired) == ("up", "latency-queue", 5), miss.line()
    learned = miss.state.latency_floor_load
    assert miss.state.latency_floor == 5 and learned is not None and 3.5 < learned < 4.5
    floor = TunerState(
        latency_floor=5, latency_floor_at=miss.state.latency_floor_at, latency_floor_load=learned
    )
    at_five = series(40, live=5, workers_max=16, littles_l=3.6, rps=100)
    room = lognormal_view(**FAST)
    assert step(at_five, room).desired == 4  # without the floor: 4 hold 3.6 in service
    d = decide(at_five, floor, TARGET, latency=room)
    assert (d.action, d.desired) == ("hold", 5) and d.state.latency_floor == 5, d.line()
    # a lighter load (under half the requests in service) forgets it
    light = series(40, live=5, workers_max=16, littles_l=1.5, rps=40)
    d = decide(light, floor, TARGET, latency=room)
    assert d.state.latency_floor is None and d.desired < 5, d.line()
    from uwsgitune.tuner.measures import gather
    from uwsgitune.tuner.targeting import _floor_kept

    f = gather(light, TARGET, light[-1].mono, float("-inf"))
    assert _floor_kept(floor, f, TARGET).latency_floor is None
    assert _floor_kept(floor, replace(f, l_recent=None), TARGET) == floor  # unknown: kept
