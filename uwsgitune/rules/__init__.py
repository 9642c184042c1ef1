"""The rules engine: pure findings with evidence from a window of frames (see `engine`)."""

from uwsgitune.rules.engine import EngineState, evaluate
from uwsgitune.rules.facts import ConfigFacts, Facts
from uwsgitune.rules.finding import (
    Evidence,
    EvidenceWindow,
    Finding,
    Recommendation,
    finding_to_dict,
)
from uwsgitune.rules.rulesettings import RuleSettings

__all__ = [
    "ConfigFacts",
    "EngineState",
    "Evidence",
    "EvidenceWindow",
    "Facts",
    "Finding",
    "Recommendation",
    "RuleSettings",
    "evaluate",
    "finding_to_dict",
]
