"""One poll, once, for every sink: watch → frame → rules → tuner → one frozen state.

`InstancePipeline.step` (runner.py) runs in the instance's poll thread and publishes an
`InstanceState` (state.py) by reference; the TUI, the exporter, the daemon's logs,
`recommend` and `tune` read only that. See ARCHITECTURE.md.
"""

from uwsgitune.pipeline.rules import LOOKBACK_SECONDS, RulesRunner
from uwsgitune.pipeline.runner import InstancePipeline, Tuner, pipeline_for
from uwsgitune.pipeline.state import InstanceState, PollCounts

__all__ = [
    "LOOKBACK_SECONDS",
    "InstancePipeline",
    "InstanceState",
    "PollCounts",
    "RulesRunner",
    "Tuner",
    "pipeline_for",
]
