"""One poll loop per instance: schedule → read → derive → window → rules → tuner → one
frozen state, told to every subscriber.

`InstanceDriver` (driver.py) runs the loop and publishes an `InstanceState` (state.py) per
poll; the TUI, the exporter, the daemon's logs, `watch`, `record`, `recommend`, `tune` and
sweep's observation read only that. `live_driver` builds one over a live stats address.
See ARCHITECTURE.md.
"""

from __future__ import annotations

from uwsgitune.core.address import StatsAddress
from uwsgitune.pipeline.driver import (
    InstanceDriver,
    PollFn,
    Source,
    TunerFactory,
    TunerStage,
    poll_once,
    run_replay,
)
from uwsgitune.pipeline.latencystage import LatencyStage
from uwsgitune.pipeline.rules import LOOKBACK_SECONDS, RulesRunner
from uwsgitune.pipeline.state import InstanceState, PollCounts
from uwsgitune.rules.facts import Facts
from uwsgitune.rules.rulesettings import RuleSettings
from uwsgitune.sources.host import HostSampler
from uwsgitune.sources.poller import LiveSource, default_timeout

__all__ = [
    "LOOKBACK_SECONDS",
    "InstanceDriver",
    "InstanceState",
    "LatencyStage",
    "PollCounts",
    "PollFn",
    "RulesRunner",
    "Source",
    "TunerFactory",
    "TunerStage",
    "live_driver",
    "live_source",
    "poll_once",
    "run_replay",
]


def live_source(
    address: StatsAddress,
    interval: float = 1.0,
    timeout: float | None = None,
    host: HostSampler | None = None,
) -> LiveSource:
    """The source of a live stats address, its per-poll deadline from the interval when
    none is given."""
    return LiveSource(address, timeout=default_timeout(interval, timeout), host=host)


def live_driver(
    address: StatsAddress,
    *,
    interval: float = 1.0,
    timeout: float | None = None,
    window_seconds: float = 600.0,
    whole_frames: int | None = None,
    rules: RulesRunner | bool = True,
    rule_settings: RuleSettings | None = None,
    tuner: TunerFactory | None = None,
    name: str = "",
    mode: str = "",
    recommend: bool = True,
    latency: LatencyStage | None = None,
) -> InstanceDriver:
    """A driver over a live stats address. `rules`: True for the rules with the address's
    facts (and `rule_settings`), False for none, or a runner of the caller's."""
    if rules is True:
        rules = RulesRunner(Facts(stats_kind=address.kind), rule_settings)
    return InstanceDriver(
        live_source(address, interval, timeout),
        interval=interval,
        window_seconds=window_seconds,
        whole_frames=whole_frames,
        rules=rules or None,
        tuner=tuner,
        name=name,
        mode=mode,
        recommend=recommend,
        latency=latency,
    )
