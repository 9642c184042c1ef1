"""Every threshold of the rules engine, declared once: type, default, bounds, description.

The same declarations drive the config file (`[instance.rules]`), the CLI and the docs
(`settings_table`); the knobs the tuner shares are declared in `uwsgitune.core.settings`.
Shares are 0-1; CPU saturation is CPU used / effective CPUs (1.0 = every usable CPU busy).
"""

from __future__ import annotations

from uwsgitune.core.settings import SharedSettings
from uwsgitune.core.settings import count as _i
from uwsgitune.core.settings import num as _f
from uwsgitune.core.settings import settings_table as _table


class RuleSettings(SharedSettings):
    """The rules' thresholds; `cpu_saturated`, `cpu_instance_min`, `io_cpu_share`,
    `busy_full`, `memory_headroom`, `cpu_workers_per_cpu` and `staffing_beta` are
    `SharedSettings`, the same values the tuner reads (a finding sizes workers with the
    tuner's model, `uwsgitune.core.staffing`)."""

    # windows and hysteresis
    window_seconds: float = _f(
        30, 3, 3600, "Look-back of most rules: a condition must hold over it."
    )
    min_coverage: float = _f(
        0.5, 0.1, 1, "Share of a look-back the polls must span to judge at all."
    )
    min_frames: int = _i(5, 2, 10_000, "Fewest polls with rates a rule needs in its look-back.")
    clear_seconds: float = _f(
        30, 0, 3600, "A raised finding stays until its condition is gone this long."
    )
    # CPU and workers
    cpu_headroom: float = _f(
        0.6, 0.05, 1, "CPU saturation below which CPU has room for more workers."
    )
    all_busy_share: float = _f(
        0.7, 0.1, 1, "Share of polls with all workers busy to call them all busy."
    )
    target_utilisation: float = _f(0.7, 0.1, 1, "Busy ratio Little's-law sizing aims at.")
    max_scale_factor: float = _f(4, 1.1, 100, "One step adds at most this times the live workers.")
    # 1. listen queue
    listen_fill: float = _f(0.9, 0.1, 1, "Queue / backlog at or above which a socket is saturated.")
    listen_min_share: float = _f(0.15, 0.01, 1, "Share of polls saturated that makes a finding.")
    overflow_min_fill: float = _f(
        0.5, 0, 1, "Queue fill with host-wide overflows growing that counts."
    )
    burst_idle_share: float = _f(
        0.25, 0.01, 1, "Share of idle polls (empty queue) that marks bursts."
    )
    burst_idle_busy: float = _f(
        0.5, 0.01, 1, "Busy ratio below which a poll with no queue is idle."
    )
    burst_listen_factor: float = _f(
        4, 1.5, 64, "A burst listen is the backlog times this (<= somaxconn)."
    )
    # 2. oversubscription
    oversub_ratio: float = _f(
        2, 1.1, 100, "Live workers / effective CPUs above which CPU work is split."
    )
    oversub_stretch: float = _f(
        2, 1.1, 100, "Mean response time / CPU time per request meaning waiting."
    )
    # 3. under-provisioned IO-bound
    io_queue_min: float = _f(1, 0, 1e6, "Mean queued connections that count as a queue building.")
    io_queue_share: float = _f(0.5, 0.01, 1, "Share of polls with a queue for it to be building.")
    # 4. idle over-provisioning
    idle_window_seconds: float = _f(60, 10, 86400, "Look-back of the idle over-provisioning rule.")
    idle_busy_max: float = _f(0.2, 0.01, 1, "Mean busy ratio at or below which workers idle.")
    idle_min_reduction: int = _i(2, 1, 1000, "Fewest workers to free before saying so.")
    idle_min_workers: int = _i(2, 1, 1000, "Never recommend fewer live workers than this.")
    # 5. memory
    memory_pressure: float = _f(
        0.9, 0.1, 1, "Worker RSS / (RSS + available memory) that is critical."
    )
    memory_window_seconds: float = _f(60, 10, 86400, "Look-back of the RSS growth (leak) rule.")
    leak_min_growth: float = _f(
        0.2, 0.01, 100, "Relative RSS growth per worker over the look-back."
    )
    leak_min_mib_per_hour: float = _f(
        64, 0.1, 1e6, "RSS growth per worker per hour to call a leak."
    )
    leak_min_r2: float = _f(0.7, 0, 1, "Fit of a straight line to RSS (r²) to call growth steady.")
    reload_on_rss_factor: float = _f(1.5, 1.05, 10, "reload-on-rss at the current RSS times this.")
    # 6. threads under the GIL
    gil_cpu_pct: float = _f(85, 10, 100, "Worker CPU (% of one core) meaning the GIL is the limit.")
    gil_window_seconds: float = _f(60, 5, 3600, "Look-back of the per-worker GIL sampling.")
    gil_busy_share: float = _f(0.6, 0.05, 1, "Share of busy worker polls near one core.")
    # 7. health
    min_rps: float = _f(0.5, 0, 1e6, "Requests per second below which ratios are not judged.")
    exception_ratio: float = _f(0.05, 0.001, 1, "Exceptions per request that is a warning.")
    exception_critical: float = _f(0.5, 0.001, 1, "Exceptions per request that is critical.")
    harakiri_critical: int = _i(5, 1, 1_000_000, "Harakiri kills in a look-back that is critical.")
    respawn_storm_per_min: float = _f(10, 0.1, 1e6, "Worker respawns per minute that is a storm.")
    stuck_request_seconds: float = _f(30, 1, 86400, "A request in service this long is stuck.")
    signal_queue_min: int = _i(
        10, 1, 1_000_000, "Queued signals that, still growing, is a finding."
    )
    # 8. configuration hazards
    busy_service_ratio: float = _f(
        0.5, 0.01, 1, "Mean busy ratio of a busy service (default listen)."
    )
    somaxconn_near: float = _f(0.9, 0.1, 1, "listen / somaxconn at or above which it is near.")
    scaling_peak: float = _f(0.8, 0.1, 1, "Busy ratio of load peaks that would want more workers.")
    scaling_trough: float = _f(0.2, 0, 1, "Busy ratio of troughs that would want fewer.")
    # 9. static files
    static_share: float = _f(0.2, 0.01, 1, "Share of requests served as static files by workers.")
    # 10. latency (the request log; the target is `latency_target`, shared with the tuner)
    slow_worker_factor: float = _f(
        3, 1.5, 100, "A worker's p50 / the median of its peers' p50 that makes it slow."
    )
    slow_worker_min_ms: float = _f(
        10, 0, 1e6, "A slow worker's p50 is also at least this many ms above its peers'."
    )
    slow_worker_min_requests: int = _i(
        50, 5, 1_000_000, "Requests in the last 60 s each worker compared needs."
    )
    slow_route_share: float = _f(
        0.25, 0.01, 1, "Share of all service time a route takes to be named slow."
    )
    slow_route_ms: float = _f(
        500, 1, 600_000, "Route p99 (ms) that is slow without a latency target (else: the target)."
    )
    slow_route_min_requests: int = _i(
        20, 1, 1_000_000, "Requests in the last 60 s a route needs to be judged."
    )


DEFAULT_SETTINGS = RuleSettings()


def settings_table() -> list[tuple[str, str, object, str]]:
    """(name, type, default, description) for each setting: for docs and `--help`."""
    return _table(RuleSettings)


def whole_window_settings(window: float | None) -> RuleSettings:
    """One shot (`recommend`): every look-back is the observed window, so each rule judges
    all of it."""
    if window is None:
        return DEFAULT_SETTINGS
    names = ("window_seconds", "idle_window_seconds", "memory_window_seconds", "gil_window_seconds")
    fields = RuleSettings.model_fields
    update = {}
    for name in names:
        lo = next(m.ge for m in fields[name].metadata if hasattr(m, "ge"))
        update[name] = max(window, float(lo))
    return DEFAULT_SETTINGS.model_copy(update=update)
