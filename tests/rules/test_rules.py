"""Each rule on synthetic frames: it fires on its case, with the right recommendation."""

from __future__ import annotations

import json

from tests.support.frames import MIB, T0, frame, series, stuck, varying
from uwsgitune.rules import ConfigFacts, Facts, Finding, evaluate, finding_to_dict
from uwsgitune.rules.build import model_estimate
from uwsgitune.rules.rulesettings import RuleSettings


def ids(findings: tuple[Finding, ...]) -> set[str]:
    return {f.id for f in findings}


def one(findings: tuple[Finding, ...], fid: str) -> Finding:
    (match,) = [f for f in findings if f.id == fid]
    return match


def test_healthy_raises_nothing() -> None:
    findings, _ = evaluate(series(40))
    assert findings == ()


def test_too_few_polls_say_nothing() -> None:
    frames = series(3, sockets=(), busy_ratio=1.0, eps=30.0)
    assert evaluate(frames)[0] == ()


FULL = dict(busy_ratio=1.0, busy=4, idle=0, littles_l=4.0)


def test_listen_capacity_short_adds_workers() -> None:
    from tests.support.frames import tcp

    findings, _ = evaluate(series(30, sockets=(tcp(1000, 1024),), **FULL))
    f = one(findings, "listen_queue.capacity_short")
    assert f.severity == "critical"
    rec = f.recommendation
    assert rec is not None and rec.setting == "processes" and rec.direction == "raise"
    assert isinstance(rec.value, int) and rec.value > 4
    assert "underprovisioned_io" not in ids(findings)  # said once, by the more specific rule


def test_listen_capacity_short_is_bounded_by_memory() -> None:
    from tests.support.frames import tcp

    frames = series(30, sockets=(tcp(1000, 1024),), mem_available=100 * MIB, **FULL)
    rec = one(evaluate(frames)[0], "listen_queue.capacity_short").recommendation
    assert rec is not None and rec.value == 5  # 4 live + 80 MiB / 50 MiB, at least one more


def test_listen_cpu_saturated_does_not_add_workers() -> None:
    from tests.support.frames import tcp

    frames = series(
        30, sockets=(tcp(1024, 1024),), instance_cpu_cores=3.9, host_cpu_pct=99.0, **FULL
    )
    f = one(evaluate(frames)[0], "listen_queue.cpu_saturated")
    assert f.recommendation is not None and f.recommendation.apply == "outside"
    assert f.recommendation.setting == "outside:cpu"


def _burst(i: int) -> dict[str, object]:
    from tests.support.frames import tcp

    if i % 10 < 3:
        return dict(sockets=(tcp(1024, 1024),), busy_ratio=1.0, listen_overflows_delta=50)
    return dict(sockets=(tcp(0, 1024),), busy_ratio=0.1)


def test_listen_bursts_raise_listen_up_to_somaxconn() -> None:
    f = one(evaluate(varying(30, _burst))[0], "listen_queue.bursts")
    rec = f.recommendation
    assert rec is not None and rec.setting == "listen" and rec.direction == "raise"
    assert rec.apply == "restart" and isinstance(rec.value, int) and 1024 < rec.value <= 4096


def test_listen_bursts_raise_somaxconn_first() -> None:
    frames = [frame(i, **{**_burst(i), "somaxconn": 1024}) for i in range(30)]
    rec = one(evaluate(frames)[0], "listen_queue.bursts").recommendation
    assert rec is not None and rec.setting == "net.core.somaxconn" and rec.apply == "sysctl"
    assert dict(rec.together)["listen"] == rec.value


def test_listen_quiet_when_queue_unknown() -> None:
    from uwsgitune.core.frame import SocketView

    unix = SocketView("/run/app.sock", "uwsgi", True, None, None, "none")
    assert evaluate(series(30, sockets=(unix,), **FULL))[0] == ()


def test_listen_cause_unclear_without_cpu() -> None:
    from tests.support.frames import tcp

    frames = series(
        30, sockets=(tcp(1024, 1024),), instance_cpu_cores=None, host_cpu_pct=None, **FULL
    )
    f = one(evaluate(frames)[0], "listen_queue.saturated")
    assert f.recommendation is None


def test_oversubscribed_cpu_lowers_workers() -> None:
    kw = dict(
        live=32,
        busy=32,
        idle=0,
        effective_cpus=2.0,
        cpu_count=2,
        instance_cpu_cores=2.0,
        host_cpu_pct=100.0,
        rps=100.0,
        mean_rt_ms=320.0,
        littles_l=32.0,
        busy_ratio=1.0,
    )
    f = one(evaluate(series(30, **kw))[0], "oversubscribed_cpu")
    rec = f.recommendation
    assert rec is not None and rec.direction == "lower" and rec.value == 3 and rec.apply == "reload"
    assert f.value("stretch") == 16.0


def test_underprovisioned_io_sizes_by_littles_law() -> None:
    from tests.support.frames import tcp

    frames = series(30, sockets=(tcp(6, 1024),), **FULL)
    f = one(evaluate(frames)[0], "underprovisioned_io")
    rec = f.recommendation
    # 4 in service + 6 waiting = 10: 10 + 2√10 = 17 by square-root staffing, bounded by what
    # the CPUs and the IO share need (the tuner's own model, so the two agree) and by one
    # step (x4, as the tuner's).
    model = model_estimate(frames[-10:], RuleSettings())
    assert model is not None and model.workers is not None and model.workers >= 17
    assert rec is not None and rec.direction == "raise" and rec.value == 16
    assert f.value("bounded_by") == "step"


def test_idle_overprovisioning_says_memory_freed() -> None:
    frames = series(70, live=16, busy_ratio=0.05, littles_l=0.8)
    f = one(evaluate(frames)[0], "idle_overprovisioned")
    rec = f.recommendation
    assert rec is not None and rec.direction == "lower" and rec.value == 3
    assert f.value("memory_freed") == 13 * 50 * MIB


def test_idle_in_cheaper_mode_goes_through_fifo() -> None:
    frames = series(70, live=16, workers_max=32, cheap=16, busy_ratio=0.05, littles_l=0.8)
    rec = one(evaluate(frames)[0], "idle_overprovisioned").recommendation
    assert rec is not None and rec.setting == "cheaper" and rec.apply == "fifo"


def test_memory_pressure_is_critical() -> None:
    frames = series(
        30, mem_total_rss=4096 * MIB, mem_per_worker=1024 * MIB, mem_available=200 * MIB
    )
    f = one(evaluate(frames)[0], "memory.pressure")
    assert f.severity == "critical" and f.recommendation is not None
    assert f.recommendation.direction == "lower"


def test_memory_full_scale() -> None:
    kw = dict(
        workers_max=32,
        cheap=28,
        mem_per_worker=500 * MIB,
        mem_total_rss=2000 * MIB,
        mem_available=2048 * MIB,
    )
    f = one(evaluate(series(30, **kw))[0], "memory.full_scale")
    assert f.recommendation is not None and f.recommendation.value == 6


def test_rss_growth_recommends_reload_on_rss() -> None:
    frames = varying(60, lambda i: dict(mem_per_worker=(50 + i) * MIB))
    f = one(evaluate(frames)[0], "memory.rss_growth")
    rec = f.recommendation
    assert rec is not None and rec.setting == "reload-on-rss" and rec.value == 164


def test_flat_rss_is_not_a_leak() -> None:
    frames = varying(60, lambda i: dict(mem_per_worker=(50 + i % 3) * MIB))
    assert "memory.rss_growth" not in ids(evaluate(frames)[0])


def test_threads_under_the_gil() -> None:
    frames = series(30, live=2, threads=4, worker=dict(cpu_pct=98.0, busy_pct=100.0))
    f = one(evaluate(frames)[0], "threads_gil")
    rec = f.recommendation
    assert rec is not None and rec.setting == "threads" and rec.value == 1
    assert dict(rec.together)["processes"] == 6  # 3.7 CPUs x 1.5, at most 2 x 4 threads


def test_threads_quiet_when_cpu_is_saturated() -> None:
    frames = series(
        30,
        live=2,
        threads=4,
        instance_cpu_cores=3.9,
        host_cpu_pct=99.0,
        worker=dict(cpu_pct=98.0, busy_pct=100.0),
    )
    assert "threads_gil" not in ids(evaluate(frames)[0])


def test_exceptions_harakiri_respawns() -> None:
    frames = varying(
        30, lambda i: dict(eps=10.0, harakiri_delta=1 if i % 5 == 0 else 0, respawns_delta=1)
    )
    found = evaluate(frames)[0]
    assert one(found, "health.exceptions").severity == "warning"
    assert one(found, "health.harakiri").severity == "critical"  # 6 kills in the window
    assert one(found, "health.respawn_storm").value("respawns") == 30


def test_stuck_request() -> None:
    frames = [*series(29), frame(29, worker=stuck(45.0, "GET", "/report"))]
    f = one(evaluate(frames)[0], "health.stuck_requests")
    assert f.value("path") == "GET /report" and f.recommendation is not None


def test_signal_queue_growing() -> None:
    frames = varying(30, lambda i: dict(signal_queue=2 * i))
    assert one(evaluate(frames)[0], "health.signal_queue").value("signal_queue") == 58


def test_config_hazards() -> None:
    from tests.support.frames import tcp

    frames = series(
        30, sockets=(tcp(0, 100),), busy_ratio=0.6, memory_report=False, mem_source="psutil"
    )
    facts = Facts(ConfigFacts(cheaper=2, cheaper_algo="spare"), stats_kind="http")
    found = ids(evaluate(frames, facts)[0])
    expected = {
        "config.default_listen",
        "config.no_memory_report",
        "config.cheaper_algo",
        "config.stats_http",
    }
    assert expected <= found


def test_config_facts_unknown_stay_quiet() -> None:
    frames = series(30)
    assert evaluate(frames, Facts())[0] == ()


def test_listen_near_somaxconn() -> None:
    from tests.support.frames import tcp

    f = one(evaluate(series(30, sockets=(tcp(0, 4000),)))[0], "config.listen_near_somaxconn")
    assert f.recommendation is not None and f.recommendation.value == 8192


def test_no_cheaper_where_load_swings() -> None:
    frames = varying(70, lambda i: dict(busy_ratio=0.95 if i % 20 < 8 else 0.05))
    found = evaluate(frames, Facts(ConfigFacts(cheaper=0)))[0]
    rec = one(found, "config.no_cheaper").recommendation
    assert (
        rec is not None and rec.setting == "cheaper" and ("cheaper-algo", "manual") in rec.together
    )
    assert "config.no_cheaper" not in ids(evaluate(frames)[0])  # unknown config: quiet


def test_static_files() -> None:
    f = one(evaluate(series(30, static_share=0.6))[0], "static_files")
    assert f.recommendation is not None and f.recommendation.setting == "offload-threads"
    facts = Facts(ConfigFacts(offload_threads=2))
    rec = one(evaluate(series(30, static_share=0.6), facts)[0], "static_files").recommendation
    assert rec is not None and rec.setting == "outside:nginx"


def test_finding_json_is_stable() -> None:
    frames = series(30, static_share=0.6)
    d = finding_to_dict(one(evaluate(frames)[0], "static_files"))
    assert list(d) == [
        "id",
        "rule",
        "severity",
        "reason",
        "evidence",
        "window",
        "recommendation",
        "since",
        "clearing",
    ]
    assert d["window"]["frames"] == 30 and d["window"]["start"] == T0 - 1
    assert d["recommendation"]["apply"] == "reload"
    json.dumps(d)


def test_settings_move_thresholds() -> None:
    frames = series(30, static_share=0.6)
    assert evaluate(frames, settings=RuleSettings(static_share=0.7))[0] == ()
