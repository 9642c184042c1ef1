"""The autotuner's pure core: settings, state, and `decide` (no I/O, no clock reads)."""

from uwsgitune.tuner.policy import decide
from uwsgitune.tuner.settings import TunerSettings
from uwsgitune.tuner.state import Decision, TunerState

__all__ = ["Decision", "TunerSettings", "TunerState", "decide"]
