"""Every knob of the tuner, declared once: type, default, bounds, description.

Times are seconds; shares are 0-1; CPU saturation is `uwsgitune.core.signals.cpu_saturation`
(1.0 = every CPU the instance can get is busy). Frozen: a running tuner's settings never change
under it. The knobs the rules share are declared in `uwsgitune.core.settings`; the daemon's
`[instance.tuner]` table and the CLI's flags read these declarations.
"""

from __future__ import annotations

from pydantic import Field, model_validator

from uwsgitune.core.settings import SharedSettings, check_worker_bounds
from uwsgitune.core.settings import count as _i
from uwsgitune.core.settings import num as _f
from uwsgitune.core.settings import settings_table as _table


class TunerFields(SharedSettings):
    """The tuner's knobs, each declared once; `cpu_saturated`, `cpu_instance_min`,
    `io_cpu_share`, `busy_full`, `memory_headroom`, `cpu_workers_per_cpu` and `staffing_beta`
    are `SharedSettings`, the same values the rules read. The daemon's `[instance.tuner]`
    table is this model (its bounds are checked on the instance)."""

    # bounds
    min_workers: int = _i(1, 1, 4096, "The floor: never fewer live workers (uWSGI `cheaper`).")
    max_workers: int = _i(8, 1, 4096, "The ceiling: never more live workers.")
    memory_budget: int | None = Field(
        None, ge=1, description="Bytes all workers may use together (None: available memory)."
    )
    # sizing
    interval: float = _f(1.0, 0.1, 3600, "Seconds between polls; staleness counts in these.")
    queue_min: float = _f(0.5, 0, 1e6, "Mean queued connections that count as a queue.")
    max_up_factor: float = _f(4.0, 1.1, 16, "A step up at most multiplies the live count by this.")
    model_band: float = _f(
        0.5, 0, 4, "Hold while live workers are within this share above the model's count."
    )
    probe_step: float = _f(0.25, 0.01, 4, "A probe past the model's count adds this share.")
    uncertain: float = _f(
        0.15, 0.01, 10, "Relative error of the model's count above which it is probed around."
    )
    # hill climbing
    measure_frames: int = _i(4, 2, 600, "Polls at one count before judging it (and its noise).")
    min_noise: float = _f(0.05, 0.0, 1, "Smallest relative change of throughput taken as real.")
    reprobe_after: float = _f(1800, 10, 86400, "Forget what probing learned after this long.")
    # pacing and safety
    cooldown_up: float = _f(5, 0, 3600, "Seconds after a change before adding workers.")
    cooldown_down: float = _f(30, 0, 86400, "Seconds after a change before removing workers.")
    down_window: float = _f(30, 1, 86400, "Low demand must last this long before shrinking.")
    max_changes_per_hour: int = _i(60, 1, 3600, "Changes allowed in any hour.")
    stale_intervals: float = _f(2, 1, 100, "Stats older than this many intervals are stale.")
    settle_after_change: float = _f(2, 0, 600, "Seconds after a +/- before the metrics count.")
    settle_after_reload: float = _f(3, 0, 600, "Seconds after a reload before the metrics count.")
    verify_deadline: float = _f(6, 1, 600, "Seconds a +/- has to show in the stats.")
    reload_deadline: float = _f(
        20, 2, 600, "Seconds a reload has to come back (at least worker-reload-mercy + 15)."
    )
    listen_cooldown: float = _f(3600, 60, 86400 * 7, "Seconds between two listen restarts.")
    restart_deadline: float = _f(60, 5, 600, "Seconds a restart has to come back with the listen.")


class TunerSettings(TunerFields):
    """The settings a tuner runs with: the knobs, with min_workers <= max_workers."""

    @model_validator(mode="after")
    def _check(self) -> TunerSettings:
        check_worker_bounds(self.min_workers, self.max_workers)
        return self

    @property
    def stale_after(self) -> float:
        return self.stale_intervals * self.interval


def settings_table() -> list[tuple[str, str, object, str]]:
    """(name, type, default, description) of each setting: for docs and `--help`."""
    return _table(TunerSettings)
