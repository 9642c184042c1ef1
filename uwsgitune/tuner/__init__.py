"""The autotuner's pure core: settings, state, and `decide` (no I/O, no clock reads)."""

from uwsgitune.tuner.decision import Decision, TunerState
from uwsgitune.tuner.policy import decide
from uwsgitune.tuner.tunersettings import TunerSettings

__all__ = ["Decision", "TunerSettings", "TunerState", "decide"]
