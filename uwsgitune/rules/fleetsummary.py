"""A fleet's findings summed up: who has too many workers, who too few, what could be freed,
the worst listen queues, and where the tuner and the rules disagree. Pure.

Theory of operation
-------------------
Each instance arrives as an `InstanceVerdict`: its findings over the range, the rules it
could not judge, and a few numbers read from its frames. The summary reads only those:

- **over-provisioned**: a finding that sizes the pool down (`idle_overprovisioned`,
  `oversubscribed_cpu`, `memory.pressure`): `live - target_workers` could go, and with a
  known RSS per worker, that many times its memory is freed (unknown RSS is counted as
  unknown, never as 0).
- **under-provisioned**: a finding that sizes it up (`listen_queue.capacity_short`,
  `underprovisioned_io`): `target_workers - live` short.
- **worst listen queues**: the highest peak fill (queue / backlog) of any socket in the
  range, where a queue is known.
- **tuner vs rules**: where uwsgitune's tuner exported its wish
  (`uwsgitune_tuner_desired_workers`, its last value in the range), its direction from the
  live count against the rules' (their target, or "keep" with no sizing finding). Opposite
  or one-sided moves are a disagreement. Instances without the series are "tuner unknown".

`--by LABEL` adds the same counts per value of a label, so that a deployment's pods, which
churn, read as one.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from uwsgitune.core import units
from uwsgitune.rules.finding import SEVERITY_RANK, Finding

# Findings that size the pool, and the evidence that holds their target.
SIZING: Mapping[str, str] = {
    "idle_overprovisioned": "target_workers",
    "oversubscribed_cpu": "target_workers",
    "memory.pressure": "workers_that_fit",
    "listen_queue.capacity_short": "target_workers",
    "underprovisioned_io": "target_workers",
}
WORST_QUEUES = 5


@dataclass(frozen=True)
class InstanceVerdict:
    """One instance over the range: what the rules said and what its frames showed."""

    name: str
    labels: Mapping[str, str]
    source: str  # "daemon" or "exporter": whose series it has
    findings: tuple[Finding, ...] = ()
    unknown: Mapping[str, str] = field(default_factory=dict)  # rule -> the series it needs
    observed: bool = True
    live: int | None = None  # at the last frame
    mem_per_worker: int | None = None
    peak_fill: float | None = None
    peak_queue: int | None = None
    tuner_desired: int | None = None
    steps: int = 0
    missing: int = 0
    resets: int = 0

    def target(self) -> tuple[int, str] | None:
        """The rules' worker target and the finding that sets it, if any finding sizes."""
        for f in sorted(self.findings, key=lambda f: -SEVERITY_RANK[f.severity]):
            name = SIZING.get(f.id)
            if name is None:
                continue
            try:
                value = f.value(name)
            except KeyError:
                continue
            if isinstance(value, int | float) and not isinstance(value, bool):
                return int(value), f.id
        return None


def _direction(want: int, live: int) -> int:
    return (want > live) - (want < live)


@dataclass
class Tally:
    """Counts over a set of instances (the fleet, or one `--by` group)."""

    instances: int = 0
    observed: int = 0
    critical: int = 0
    warning: int = 0
    over: int = 0
    workers_freed: int = 0
    memory_freed: int = 0
    memory_unknown: int = 0  # over-provisioned instances whose RSS is unknown
    under: int = 0
    workers_short: int = 0
    disagree: int = 0
    tuner_unknown: int = 0

    def add(self, v: InstanceVerdict) -> None:
        self.instances += 1
        if not v.observed:
            return
        self.observed += 1
        ranks = [SEVERITY_RANK[f.severity] for f in v.findings]
        self.critical += max(ranks, default=0) >= SEVERITY_RANK["critical"]
        self.warning += max(ranks, default=0) == SEVERITY_RANK["warning"]
        target, live = v.target(), v.live or 0
        if target is not None and target[0] < live:
            self.over += 1
            self.workers_freed += live - target[0]
            if v.mem_per_worker:
                self.memory_freed += (live - target[0]) * v.mem_per_worker
            else:
                self.memory_unknown += 1
        elif target is not None and target[0] > live:
            self.under += 1
            self.workers_short += target[0] - live
        if v.tuner_desired is None:
            self.tuner_unknown += 1
        elif disagreement(v) is not None:
            self.disagree += 1


def disagreement(v: InstanceVerdict) -> str | None:
    """Why the tuner's wish and the rules' target point different ways, or None."""
    if v.tuner_desired is None or v.live is None or not v.observed:
        return None
    target = v.target()
    rules = target[0] if target else v.live
    tuner_dir, rules_dir = _direction(v.tuner_desired, v.live), _direction(rules, v.live)
    if tuner_dir == rules_dir:
        return None
    said = f"{target[1]} says {rules}" if target else "the rules say keep"
    return f"tuner wants {v.tuner_desired}, {said} (live {v.live})"


@dataclass(frozen=True)
class FleetSummary:
    fleet: Tally
    groups: Mapping[str, Tally]  # by the `--by` label's value
    by: str | None
    worst_queues: tuple[InstanceVerdict, ...]
    disagreements: tuple[tuple[InstanceVerdict, str], ...]


def summarise(verdicts: Sequence[InstanceVerdict], by: str | None = None) -> FleetSummary:
    fleet = Tally()
    groups: dict[str, Tally] = {}
    for v in verdicts:
        fleet.add(v)
        if by is not None:
            key = v.labels.get(by, f"(no {by})")
            groups.setdefault(key, Tally()).add(v)
    queued = [v for v in verdicts if v.observed and v.peak_fill]
    queued.sort(key=lambda v: (-(v.peak_fill or 0.0), -(v.peak_queue or 0), v.name))
    disagree = [(v, why) for v in verdicts if (why := disagreement(v)) is not None]
    return FleetSummary(
        fleet, dict(sorted(groups.items())), by, tuple(queued[:WORST_QUEUES]), tuple(disagree)
    )


def _tally_line(t: Tally) -> str:
    parts = [f"{t.instances} instances ({t.observed} observed)"]
    parts.append(f"{t.critical} critical, {t.warning} warning")
    freed = units.size(t.memory_freed) if t.memory_freed else "no memory known"
    if t.memory_unknown:
        freed += f" (+ unknown on {t.memory_unknown})"
    parts.append(f"over-provisioned {t.over} (-{t.workers_freed} workers, {freed})")
    parts.append(f"under-provisioned {t.under} (+{t.workers_short} workers)")
    parts.append(f"tuner disagrees {t.disagree} (unknown {t.tuner_unknown})")
    return "; ".join(parts)


def summary_lines(s: FleetSummary) -> list[str]:
    """The fleet summary as a person reads it."""
    t = s.fleet
    out = ["fleet: " + _tally_line(t)]
    if t.over:
        mem = units.size(t.memory_freed) if t.memory_freed else "memory unknown"
        unknown = f"; RSS unknown on {t.memory_unknown} of them" if t.memory_unknown else ""
        out.append(f"  {t.workers_freed} workers could be freed, {mem}{unknown}")
    if t.under:
        out.append(f"  {t.workers_short} workers short on {t.under} instances")
    if s.worst_queues:
        out.append("  worst listen queues:")
        for v in s.worst_queues:
            out.append(
                f"    {v.name}: peak {units.percent(v.peak_fill or 0.0)} of its backlog "
                f"({v.peak_queue} waiting)"
            )
    if s.disagreements:
        out.append("  tuner and rules disagree:")
        out.extend(f"    {v.name}: {why}" for v, why in s.disagreements)
    if t.tuner_unknown:
        out.append(
            f"  tuner unknown on {t.tuner_unknown} instances "
            "(no uwsgitune_tuner_desired_workers: no uwsgitune tuner there)"
        )
    if s.by is not None:
        out.append(f"by {s.by}:")
        out.extend(f"  {key}: {_tally_line(g)}" for key, g in s.groups.items())
    return out


def _tally_dict(t: Tally) -> dict[str, Any]:
    return dict(vars(t))


def summary_to_dict(s: FleetSummary) -> dict[str, Any]:
    return {
        "fleet": _tally_dict(s.fleet),
        "by": s.by,
        "groups": {k: _tally_dict(g) for k, g in s.groups.items()},
        "worst_listen_queues": [
            {"instance": v.name, "peak_fill": v.peak_fill, "peak_queue": v.peak_queue}
            for v in s.worst_queues
        ],
        "disagreements": [{"instance": v.name, "why": why} for v, why in s.disagreements],
    }


def count_sources(verdicts: Iterable[InstanceVerdict]) -> dict[str, int]:
    out: dict[str, int] = {}
    for v in verdicts:
        out[v.source] = out.get(v.source, 0) + 1
    return out
