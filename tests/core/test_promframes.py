"""Frames rebuilt from Prometheus series (core/promframes.py): exact rates between steps,
gaps and resets never rated across, unknowns kept unknown, and each answer series matched
to its instance."""

from __future__ import annotations

import math
from collections.abc import Sequence

import pytest

from uwsgitune.core.promframes import (
    InstanceSeries,
    SeriesSet,
    instance_labels,
    is_unknown,
    make_frame,
    needs_worker_series,
    rebuild,
    unknown_rules,
)

NAN = math.nan
STEP = 60.0
EXPORTER = {"job": "uwsgi", "instance": "10.0.0.1:9117"}
DAEMON = {"job": "tuned", "instance": "10.0.0.2:9117", "stats_uri": "unix:///run/s.sock"}


def _points(values: Sequence[float], start: float = 0.0) -> list[tuple[float, float]]:
    return [(start + i * STEP, v) for i, v in enumerate(values) if not math.isnan(v)]


def instance(
    n: int = 6,
    labels: dict[str, str] | None = None,
    *,
    requests: Sequence[float] | None = None,
    running: Sequence[float] | None = None,
    up: Sequence[float] | None = None,
    extra: dict[str, Sequence[float]] | None = None,
) -> InstanceSeries:
    """Four workers serving 600 requests a step (10/s), each request 0.2 s: L = 2."""
    labels = labels or EXPORTER
    key = instance_labels(labels, False)
    grid = SeriesSet(0.0, STEP, n, [key])
    given: dict[str, Sequence[float]] = {
        "up": up or [1.0] * n,
        "requests": requests or [600.0 * i for i in range(n)],
        "running": running or [120.0 * i for i in range(n)],
        "slots": [4.0] * n,
        "cheap": [0.0] * n,
        "busy": [2.0] * n,
        "threads": [1.0] * n,
        **(extra or {}),
    }
    for name, values in given.items():
        grid.add(name, labels, _points(values))
    return grid.instances[key]


def test_rates_are_the_exact_growth_between_two_steps() -> None:
    built = rebuild(instance())
    first, *rated = built.frames
    assert first.kind == "first" and first.rps is None
    assert len(rated) == 5 and all(f.kind == "ok" for f in rated)
    f = rated[-1]
    assert f.dt == STEP
    assert f.rps == pytest.approx(10.0)
    assert f.littles_l == pytest.approx(2.0)  # 120 s of service per 60 s
    assert f.mean_rt_ms == pytest.approx(200.0)
    assert f.busy_ratio == pytest.approx(0.5)  # L 2 over 4 live x 1 thread
    assert (f.live, f.workers_max, f.threads) == (4, 4, 1)


def test_a_counter_that_drops_is_a_reload_and_is_never_rated_across() -> None:
    requests = [0.0, 600.0, 1200.0, 50.0, 650.0, 1250.0]
    running = [0.0, 120.0, 240.0, 10.0, 130.0, 250.0]
    built = rebuild(instance(requests=requests, running=running))
    kinds = [f.kind for f in built.frames]
    assert kinds == ["first", "ok", "ok", "reload", "ok", "ok"]
    assert built.resets == 1
    reload = built.frames[3]
    assert reload.rps is None and reload.littles_l is None
    assert all(f.rps == pytest.approx(10.0) for f in built.frames if f.kind == "ok")


def test_the_daemons_reload_counter_marks_a_reload_too() -> None:
    reloads = [0.0, 0.0, 0.0, 1.0, 1.0, 1.0]
    built = rebuild(instance(labels=DAEMON, extra={"reloads": reloads}))
    assert [f.kind for f in built.frames][3] == "reload"


def test_a_gap_is_no_frame_and_the_next_step_rates_over_the_whole_gap() -> None:
    up = [1.0, 1.0, NAN, NAN, 1.0, 1.0]
    built = rebuild(instance(up=up))
    assert built.missing == 2
    assert [f.t for f in built.frames] == [0.0, 60.0, 240.0, 300.0]
    after = built.frames[2]
    assert after.kind == "ok" and after.dt == 3 * STEP
    assert after.rps == pytest.approx(10.0)  # 1,800 requests over 180 s


def test_uwsgi_up_zero_is_an_error_frame_without_rates() -> None:
    built = rebuild(instance(up=[1.0, 1.0, 0.0, 1.0, 1.0, 1.0]))
    down = built.frames[2]
    assert down.kind == "error" and down.rps is None and down.error == "uwsgi_up 0"


def _socket(inst: InstanceSeries, name: str, signal: str, values: Sequence[float]) -> None:
    grid = inst.grid(signal, (name, "uwsgi"))
    for i, v in enumerate(values):
        grid[i] = v


def test_uwsgi_exporters_zero_queue_of_a_unix_socket_is_unknown() -> None:
    inst = instance()
    _socket(inst, "/run/app.sock", "queue", [0.0] * 6)
    _socket(inst, "/run/app.sock", "max_queue", [100.0] * 6)
    _socket(inst, "127.0.0.1:3031", "queue", [7.0] * 6)
    _socket(inst, "127.0.0.1:3031", "max_queue", [100.0] * 6)
    f = rebuild(inst).frames[-1]
    by_name = {s.name: s for s in f.sockets}
    unix, tcp = by_name["/run/app.sock"], by_name["127.0.0.1:3031"]
    assert unix.queue is None and unix.source == "none"
    assert (tcp.queue, tcp.backlog, tcp.source) == (7, 100, "stats")


def test_the_daemons_kernel_queue_is_read_for_a_unix_socket() -> None:
    inst = instance(labels=DAEMON)
    _socket(inst, "/run/app.sock", "queue", [0.0] * 6)
    _socket(inst, "/run/app.sock", "k_queue", [30.0] * 6)
    _socket(inst, "/run/app.sock", "k_backlog", [128.0] * 6)
    (sock,) = rebuild(inst).frames[-1].sockets
    assert (sock.queue, sock.backlog, sock.source) == (30, 128, "kernel")


def test_cpu_rules_are_unknown_without_the_daemons_series() -> None:
    plain = instance()
    unknown = unknown_rules(plain, rebuild(plain).frames)
    assert (
        "oversubscribed_cpu" in unknown
        and "uwsgitune_instance_cpu_cores" in unknown["oversubscribed_cpu"]
    )
    assert is_unknown("listen_queue.capacity_short", unknown)  # no socket's queue known
    assert not is_unknown("idle_overprovisioned", unknown)
    tuned = instance(labels=DAEMON, extra={"cpu_cores": [0.5] * 6, "effective_cpus": [2.0] * 6})
    assert tuned.daemon
    unknown = unknown_rules(tuned, rebuild(tuned).frames)
    assert "oversubscribed_cpu" not in unknown
    assert "config.no_memory_report" in unknown  # the daemon's RSS may come from /proc


def test_memory_is_unknown_not_zero_when_no_worker_reports_rss() -> None:
    f = rebuild(instance(extra={"rss": [0.0] * 6, "rss_workers": [0.0] * 6})).frames[-1]
    assert f.mem_total_rss is None and f.mem_per_worker is None and not f.memory_report
    f = rebuild(instance(extra={"rss": [4e8] * 6, "rss_workers": [4.0] * 6})).frames[-1]
    assert f.mem_per_worker == 100_000_000 and f.memory_report


def test_an_exporter_series_with_stats_uri_joins_its_instance_and_strangers_are_left_out() -> None:
    key = instance_labels(EXPORTER, False)
    grid = SeriesSet(0.0, STEP, 3, [key])
    worker_sum = {**EXPORTER, "stats_uri": "unix:///run/s.sock"}  # uwsgi_exporter's labels
    assert grid.add("requests", worker_sum, _points([0.0, 1.0, 2.0])) == 3
    stranger = {**EXPORTER, "instance": "elsewhere:9117"}
    assert grid.add("requests", stranger, _points([5.0, 6.0, 7.0])) == 0
    assert list(grid.instances) == [key]
    assert list(grid.instances[key].values["requests"]) == [0.0, 1.0, 2.0]


def test_the_tuners_last_wish_is_kept() -> None:
    built = rebuild(instance(labels=DAEMON, extra={"tuner": [4.0, 4.0, 6.0, NAN, NAN, NAN]}))
    assert built.tuner_desired == 6


def _daemon_sums(n: int) -> dict[str, Sequence[float]]:
    """The daemon's per-instance sums (`uwsgitune_worker_sum_*`), other figures than the
    workers' so that which one a frame read shows."""
    return {
        "requests_sum": [300.0 * i for i in range(n)],
        "running_sum": [120.0 * i for i in range(n)],
        "slots_sum": [8.0] * n,
        "busy_sum": [6.0] * n,
        "cheap_sum": [2.0] * n,
        "threads_sum": [2.0] * n,
    }


def _daemon_only(n: int, extra: dict[str, Sequence[float]]) -> InstanceSeries:
    key = instance_labels(DAEMON, False)
    grid = SeriesSet(0.0, STEP, n, [key])
    for name, values in {"up": [1.0] * n, **extra}.items():
        grid.add(name, DAEMON, _points(values))
    return grid.instances[key]


def test_the_daemons_per_instance_sums_stand_for_the_workers_series() -> None:
    n = 6
    inst = _daemon_only(n, _daemon_sums(n))
    assert not needs_worker_series(inst)  # nothing per worker to ask
    f = rebuild(inst).frames[-1]
    assert (f.workers_max, f.live, f.busy, f.threads) == (8, 6, 6, 2)
    assert f.rps == pytest.approx(5.0) and f.mean_rt_ms == pytest.approx(400.0)


def test_a_step_without_the_daemons_sums_reads_the_workers_sum() -> None:
    n = 6
    sums = {k: [*v[:3], NAN, NAN, NAN] for k, v in _daemon_sums(n).items()}
    inst = instance(n, DAEMON, requests=[300.0 * i for i in range(n)], extra=sums)
    assert needs_worker_series(inst)  # three steps up without the sums
    frames = rebuild(inst).frames
    assert len(frames) == n and [f.workers_max for f in frames] == [8, 8, 8, 4, 4, 4]
    assert all(f.kind in ("first", "ok") for f in frames)  # no reset between the two
    assert needs_worker_series(_daemon_only(n, {}))  # up, no sums: uwsgi_exporter's
    down = SeriesSet(0.0, STEP, n, [instance_labels(DAEMON, False)])
    down.add("up", DAEMON, _points([0.0] * n))  # uWSGI down: no worker series to ask for
    assert not needs_worker_series(next(iter(down.instances.values())))


def test_the_cpu_waits_and_niced_cpu_are_read_and_unknown_without_their_series() -> None:
    n = 4
    extra = {"runq_cores": [0.5] * n, "host_nice": [0.25] * n, "gil_busy": [0.4] * n}
    f = rebuild(instance(n, DAEMON, extra=extra)).frames[-1]
    assert (f.runq_cores, f.host_nice_pct, f.gil_busy) == (0.5, 25.0, 0.4)
    bare = rebuild(instance(n, DAEMON)).frames[-1]
    assert (bare.runq_cores, bare.host_nice_pct, bare.gil_busy) == (None, None, None)


def test_the_fast_frame_maker_makes_the_frame_the_dataclass_makes() -> None:
    """Real frames (the Tracker's, through the dataclass's `__init__`) rebuilt from their
    fields, every field set; and one from the required fields alone, the rest defaults."""
    from dataclasses import fields

    from tests.support.frames import failed, series
    from uwsgitune.core.frame import FIELD_NAMES, field_values

    for real in [*series(3, host_cpu_pct=40.0, threads=2), failed(3)]:
        given = dict(zip(FIELD_NAMES, field_values(real), strict=True))
        made = make_frame(**given)
        assert type(made) is type(real) and made == real
        assert all(getattr(made, f.name) == given[f.name] for f in fields(real))
    bare = make_frame(source="a", t=1.0, mono=1.0, kind="first")
    defaults = {
        f.name: f.default for f in fields(bare) if f.name not in ("source", "t", "mono", "kind")
    }
    assert all(getattr(bare, k) == v for k, v in defaults.items())
