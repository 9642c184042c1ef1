"""The per-frame signals, defined once (core/signals.py), and everyone reading them."""

from __future__ import annotations

import pytest

from tests.support.frames import frame, series, tcp
from uwsgitune.core import signals
from uwsgitune.core.frame import SocketView
from uwsgitune.core.settings import SharedSettings
from uwsgitune.exporter.metrics import FRAME_GAUGES
from uwsgitune.rules.context import Context
from uwsgitune.rules.facts import NO_FACTS
from uwsgitune.rules.rulesettings import RuleSettings
from uwsgitune.tuner.measures import gather
from uwsgitune.tuner.tunersettings import TunerSettings


def unix(queue: int | None, backlog: int | None = 100, path: str = "/run/app.sock") -> SocketView:
    return SocketView(path, "uwsgi", True, queue, backlog, "kernel")


def test_cpu_saturation_is_against_the_cpu_the_instance_can_get() -> None:
    # 2 of 4 effective CPUs, the host otherwise idle: half
    assert signals.cpu_saturation(frame(0, instance_cpu_cores=2.0, host_cpu_pct=50.0)) == 0.5
    # neighbours hold 1.5 of the 2 idle CPUs: 2 / (2 + 0.5)
    busy = frame(0, instance_cpu_cores=2.0, host_cpu_pct=87.5)
    assert signals.cpu_saturation(busy) == pytest.approx(0.8)
    # niced batch work gives way to the workers: it does not count as taken
    niced = frame(0, instance_cpu_cores=2.0, host_cpu_pct=87.5, host_nice_pct=37.5)
    assert signals.cpu_saturation(niced) == 0.5
    # never above 1; unknown without the instance's CPU or a real quota
    assert signals.cpu_saturation(frame(0, instance_cpu_cores=5.0, host_cpu_pct=100.0)) == 1.0
    assert signals.cpu_saturation(frame(0, instance_cpu_cores=None)) is None
    assert signals.cpu_saturation(frame(0, effective_cpus=0.005)) is None
    # the instance's own share stays its own CPU / effective CPUs
    assert signals.own_cpu_share(busy) == 0.5


def test_cpu_saturated_at_the_one_threshold() -> None:
    assert SharedSettings().cpu_saturated == RuleSettings().cpu_saturated
    assert RuleSettings().cpu_saturated == TunerSettings().cpu_saturated
    at = frame(0, instance_cpu_cores=0.85 * 4, host_cpu_pct=85.0)
    assert signals.cpu_saturated(at) and not signals.cpu_saturated(at, 0.9)


def test_requests_waiting_is_the_sum_and_the_fill_the_fullest_socket() -> None:
    f = frame(0, sockets=(tcp(queue=6, backlog=8), unix(10), unix(None, path="/run/b.sock")))
    assert signals.requests_waiting(f) == 16
    assert signals.fullest_fill(f) == 0.75
    assert signals.listen_backlog(f) == 8
    none = frame(0, sockets=(unix(None, None),))
    assert signals.requests_waiting(none) is None and signals.fullest_fill(none) is None
    assert signals.listen_backlog(none) is None


def test_all_busy_by_busy_time_or_by_status() -> None:
    assert signals.all_busy(frame(0, busy_ratio=0.95))
    assert signals.all_busy(frame(0, busy=4, idle=0))
    assert not signals.all_busy(frame(0, busy_ratio=0.5))
    assert signals.all_busy(frame(0, busy_ratio=0.5), busy_full=0.5)


def test_the_rules_the_tuner_and_the_exporter_read_the_same_signals() -> None:
    frames = series(12, instance_cpu_cores=2.0, host_cpu_pct=87.5, sockets=(tcp(3), unix(2)))
    f = frames[-1]
    ctx = Context(tuple(frames), NO_FACTS, RuleSettings())
    assert ctx.cpu(f) == signals.cpu_saturation(f) == pytest.approx(0.8)
    assert ctx.depth(f) == signals.requests_waiting(f) == 5
    assert ctx.fill(f) == signals.fullest_fill(f)
    facts = gather(frames, TunerSettings(max_workers=8), f.mono, 0.0)
    assert facts.cpu_sat == pytest.approx(0.8) and facts.queue_now == 5
    [getter] = [get for name, _, get in FRAME_GAUGES if name == "cpu_saturation_ratio"]
    assert getter(f) == signals.cpu_saturation(f)


def test_waiting_unless_full_is_the_sum_unless_a_socket_is_full() -> None:
    f = frame(0, sockets=(tcp(queue=6, backlog=8), unix(10), unix(None, path="/run/b.sock")))
    assert signals.waiting_unless_full(f) == signals.requests_waiting(f) == 16
    full = frame(0, sockets=(unix(3), tcp(queue=8, backlog=8)))
    assert full.queue_full and signals.waiting_unless_full(full) is None
    assert signals.requests_waiting(full) == 11
    assert signals.waiting_unless_full(frame(0, sockets=(unix(None, None),))) is None


def test_an_instance_run_niced_is_saturated_by_its_own_cpu() -> None:
    """uWSGI under `nice` (or `--prio`): its own CPU is in the host's niced CPU. Counted as
    niced batch work that gives way, it read as free for the instance, which then read half
    saturated on every CPU it could get (the tuner would add workers to a CPU-bound pool)."""
    import dataclasses

    # 4 CPUs, all busy: 2 cores the niced instance's, 2 cores other work at nice 0
    f = frame(0, instance_cpu_cores=2.0, host_cpu_pct=100.0, host_nice_pct=50.0)
    assert signals.cpu_saturation(f) == 0.5  # read as niced batch work: room for 2 more
    niced = dataclasses.replace(f, instance_niced_cores=2.0)
    assert niced.host_contended_pct == 100.0
    assert signals.cpu_saturation(niced) == 1.0
    from uwsgitune.core.staffing import available_cpus

    assert available_cpus(niced) == 2.0 and available_cpus(f) == 4.0
    # another niced job beside it still gives way
    both = dataclasses.replace(niced, host_nice_pct=75.0)
    assert signals.cpu_saturation(both) == pytest.approx(2.0 / 3.0)
