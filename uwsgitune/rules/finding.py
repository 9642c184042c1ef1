"""What the rules engine says: frozen findings with their evidence and recommendation.

The JSON form (`finding_to_dict`) is a contract: the TUI, the daemon's metrics
(`uwsgitune_findings_active{rule,severity}`, `uwsgitune_recommended_value{setting}`) and the
tuner read it. Ids are stable dotted names (`listen_queue.capacity_short`); add new keys,
never rename old ones.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

Severity = Literal["info", "warning", "critical"]
SEVERITY_RANK: dict[str, int] = {"info": 0, "warning": 1, "critical": 2}

# How a change takes effect (see the facts file): a FIFO command on the running master; a
# graceful reload `r` that re-reads the ini; a full stop and start (a new bind, e.g. `listen`);
# a kernel sysctl; or a change outside uWSGI (nginx, more CPU, the application).
Apply = Literal["fifo", "reload", "restart", "sysctl", "outside"]
Direction = Literal["raise", "lower", "set", "enable", "disable"]


@dataclass(frozen=True)
class Evidence:
    """One number behind a finding: `name` is stable, `value` is in `unit`."""

    name: str
    value: float | int | str | bool | None
    unit: str = ""


@dataclass(frozen=True)
class Recommendation:
    """A concrete change: `setting` to `value` (from `current`), applied by `apply`."""

    setting: str  # a uWSGI option, `net.core.somaxconn`, or `outside:<what>`
    direction: Direction
    value: int | str | None
    apply: Apply
    effect: str  # the expected effect, one sentence
    current: int | str | None = None
    together: tuple[tuple[str, int | str], ...] = ()  # companion settings changed with it


@dataclass(frozen=True)
class EvidenceWindow:
    """The frames the evidence comes from: wall-clock span and how many polls."""

    start: float
    end: float
    frames: int

    @property
    def seconds(self) -> float:
        return max(self.end - self.start, 0.0)


@dataclass(frozen=True)
class Finding:
    id: str
    severity: Severity
    reason: str  # one sentence
    evidence: tuple[Evidence, ...]
    window: EvidenceWindow
    recommendation: Recommendation | None = None
    since: float | None = None  # epoch when first raised (set by the engine)
    clearing: bool = False  # the condition is gone; kept until it stays gone for a window

    @property
    def rule(self) -> str:
        """The rule family: `listen_queue` for `listen_queue.capacity_short`."""
        return self.id.split(".", 1)[0]

    def value(self, name: str) -> float | int | str | bool | None:
        for e in self.evidence:
            if e.name == name:
                return e.value
        raise KeyError(name)


def _num(value: float | int | str | bool | None) -> float | int | str | bool | None:
    return round(value, 4) if isinstance(value, float) else value


def finding_to_dict(f: Finding) -> dict[str, Any]:
    """The stable JSON form of a finding."""
    rec = f.recommendation
    return {
        "id": f.id,
        "rule": f.rule,
        "severity": f.severity,
        "reason": f.reason,
        "evidence": {e.name: {"value": _num(e.value), "unit": e.unit} for e in f.evidence},
        "window": {
            "start": round(f.window.start, 3),
            "end": round(f.window.end, 3),
            "seconds": round(f.window.seconds, 3),
            "frames": f.window.frames,
        },
        "recommendation": None
        if rec is None
        else {
            "setting": rec.setting,
            "direction": rec.direction,
            "current": rec.current,
            "value": rec.value,
            "apply": rec.apply,
            "effect": rec.effect,
            "with": dict(rec.together),
        },
        "since": f.since,
        "clearing": f.clearing,
    }


def worst(findings: tuple[Finding, ...] | list[Finding]) -> Severity | None:
    if not findings:
        return None
    top = max(findings, key=lambda f: SEVERITY_RANK[f.severity])
    return top.severity
