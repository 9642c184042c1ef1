"""Findings as a person reads them: pure functions returning text, for `recommend` and the TUI.

Evidence reads in human units (`core.units`): `memory_per_worker 12.7 MiB`, `instance_cpu
0.2%`. A recommendation says what happens to the instance, then how the change takes effect:

- the live worker count: `4 → 8 live workers (FIFO)`;
- the pool itself: `processes 8 → 16, then 16 live workers (reload)`;
- threads: `threads 4 → 1 per worker, processes = 4 (reload)`;
- any other setting: `listen 100 → 1024 (restart)`, `harakiri = 30 (reload)`.

The data behind it (setting, value, current, apply) is unchanged in `--json`
(`finding.finding_to_dict`).
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from uwsgitune.core import units
from uwsgitune.rules.finding import Apply, Evidence, Finding, Recommendation

_MARK = {"critical": "CRIT", "warning": "WARN", "info": "INFO"}
# How each route is named in an advice line, and what it asks of the person who applies it.
ROUTE: dict[Apply, str] = {
    "fifo": "FIFO",
    "reload": "reload",
    "restart": "restart",
    "sysctl": "sysctl",
    "outside": "outside uWSGI",
}
HOW: dict[Apply, str] = {
    "fifo": "write + or - to the master FIFO; the workers change live",
    "reload": "edit the ini, then a graceful reload (r)",
    "restart": "a full stop and start (a new bind)",
    "sysctl": "as root",
}


def evidence_text(evidence: Sequence[Evidence]) -> str:
    """`live 4 workers, memory_per_worker 12.7 MiB, instance_cpu 0.2%`."""
    return units.evidence_text((e.name, e.value, e.unit) for e in evidence)


def _live(n: int | str | None) -> str:
    return f"{n} live {'worker' if n == 1 else 'workers'}"


def _set(setting: str, current: int | str | None, value: int | str | None) -> str:
    return f"{setting} = {value}" if current is None else f"{setting} {current} → {value}"


def change_text(rec: Recommendation) -> str:
    """What the change does to the instance, and its route: `4 → 8 live workers (FIFO)`."""
    if rec.apply == "outside":
        return f"{rec.setting.removeprefix('outside:')} ({ROUTE['outside']})"
    route = ROUTE[rec.apply]
    together = dict(rec.together)
    live = together.pop("cheaper-initial", None)
    # `cheaper` is the floor: only its FIFO move (a `-`) changes the live count alone.
    only_live = rec.setting == "cheaper-initial" or (rec.setting, rec.apply) == ("cheaper", "fifo")
    if only_live and not together and live is None and rec.current is not None:
        return f"{rec.current} → {_live(rec.value)} ({route})"
    if rec.direction in ("enable", "disable") and rec.current is None:
        head = f"{rec.direction} {rec.setting}"
    elif rec.setting == "threads" and rec.current is not None:
        head = f"threads {rec.current} → {rec.value} per worker"
    else:
        head = _set(rec.setting, rec.current, rec.value)
    listen = together.pop("listen", None) if rec.apply == "sysctl" else None
    parts = [head, *(f"{k} = {v}" for k, v in together.items())]
    if live is not None:
        parts.append(f"then {_live(live)}")
    text = f"{', '.join(parts)} ({route})"
    return text if listen is None else f"{text}, then listen = {listen} ({ROUTE['restart']})"


def recommendation_text(rec: Recommendation) -> str:
    """The change and its expected effect: `4 → 8 live workers (FIFO): more in service`."""
    return f"{change_text(rec)}: {rec.effect}" if rec.effect else change_text(rec)


def finding_lines(f: Finding) -> list[str]:
    clock = time.strftime("%H:%M:%S", time.gmtime(f.window.start))
    head = f"{_MARK[f.severity]} {f.id}"
    if f.clearing:
        head += " (clearing)"
    lines = [head, f"  {f.reason}"]
    if f.recommendation is not None:
        lines.append(f"  do: {recommendation_text(f.recommendation)}")
    span = f"{f.window.frames} polls over {units.seconds(f.window.seconds)} from {clock} UTC"
    lines.append(f"  evidence ({span}): {evidence_text(f.evidence)}")
    return lines


def routes_legend(findings: Sequence[Finding]) -> list[str]:
    """One line per route the advice above uses: what applying it takes."""
    used = {f.recommendation.apply for f in findings if f.recommendation is not None}
    return [f"  {ROUTE[a]}: {how}" for a, how in HOW.items() if a in used]


def report(source: str, findings: Sequence[Finding]) -> list[str]:
    if not findings:
        return [f"{source}: no findings"]
    lines = [f"{source}: {len(findings)} finding(s)"]
    for f in findings:
        lines.extend(finding_lines(f))
    legend = routes_legend(findings)
    return [*lines, "how to apply:", *legend] if legend else lines
