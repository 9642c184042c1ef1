"""Findings as text for the CLI: pure functions returning lines."""

from __future__ import annotations

import time
from collections.abc import Sequence

from uwsgitune.rules.finding import Evidence, Finding, Recommendation

_MARK = {"critical": "CRIT", "warning": "WARN", "info": "INFO"}
_APPLY = {
    "fifo": "live, through the master FIFO",
    "reload": "graceful reload (r), after editing the ini",
    "restart": "full stop and start (a new bind)",
    "sysctl": "sysctl, as root",
    "outside": "outside uWSGI",
}


def _value(e: Evidence) -> str:
    v = e.value
    if v is None:
        return "unknown"
    if e.unit == "bytes" and isinstance(v, int | float):
        return f"{v / 1048576:.1f} MiB"
    if e.unit == "ratio" and isinstance(v, float):
        return f"{v:.0%}"
    text = f"{v:.3g}" if isinstance(v, float) else str(v)
    return f"{text} {e.unit}" if e.unit and e.unit != "ratio" else text


def recommendation_line(rec: Recommendation) -> str:
    if rec.apply == "outside":
        what = rec.setting.removeprefix("outside:")
        return f"do: {what} ({_APPLY['outside']}): {rec.effect}"
    change = f"{rec.setting} = {rec.value}"
    if rec.current is not None:
        change = f"{rec.setting}: {rec.current} -> {rec.value}"
    extra = "".join(f", {k} = {v}" for k, v in rec.together)
    return f"do: {change}{extra}  [{_APPLY[rec.apply]}]: {rec.effect}"


def finding_lines(f: Finding) -> list[str]:
    clock = time.strftime("%H:%M:%S", time.gmtime(f.window.start))
    head = f"{_MARK[f.severity]} {f.id}"
    if f.clearing:
        head += " (clearing)"
    lines = [head, f"  {f.reason}"]
    if f.recommendation is not None:
        lines.append(f"  {recommendation_line(f.recommendation)}")
    evidence = ", ".join(f"{e.name} {_value(e)}" for e in f.evidence)
    lines.append(
        f"  evidence ({f.window.frames} polls over {f.window.seconds:.0f} s from {clock} UTC): "
        f"{evidence}"
    )
    return lines


def report(source: str, findings: Sequence[Finding]) -> list[str]:
    if not findings:
        return [f"{source}: no findings"]
    lines = [f"{source}: {len(findings)} finding(s)"]
    for f in findings:
        lines.extend(finding_lines(f))
    return lines
