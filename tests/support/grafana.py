"""Grafana dashboards as a test reads them: their panels' queries, and Grafana's variables
substituted the way Grafana's Prometheus data source does before it sends a query.

- The built-in intervals (`$__rate_interval`, `$__interval`, `$__range` and their `_ms`/`_s`
  forms) become the durations given: the tests pick wide ones, so that a starved machine's
  missed scrapes still leave samples in every window.
- A templated variable is written `$var`, `${var}`, `${var:format}` or `[[var]]`. Its value
  is a list. A multi-value or "All" variable's values are regex-escaped (they sit in `=~`),
  and several become `(a|b)`: Grafana's `interpolateQueryExpr`. `ALL` (the variable set to
  "All") becomes its `allValue` (`.*` in our dashboards).
- A variable the dashboard does not define, or one the test gives no value, raises: a query
  that would reach Prometheus with a `$` in it is a dashboard bug, not a test to skip.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ALL = "$__all"  # the value of a variable set to "All"
BUILTINS = ("__rate_interval", "__interval", "__interval_ms", "__range", "__range_s", "__range_ms")
VARIABLE = re.compile(r"\$\{(\w+)(?::\w+)?\}|\[\[(\w+)\]\]|\$(\w+)")
# Grafana's prometheusRegularEscape/prometheusSpecialRegexEscape: a value inside a
# double-quoted PromQL string escapes regex metacharacters with a backslash, itself escaped.
REGEX_SPECIAL = re.compile(r"([$^*{}\[\]'+?.()|])")


@dataclass(frozen=True)
class Target:
    """One query of one panel."""

    panel: str  # "<id> <title>"
    ref: str
    expr: str


def panels(dash: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    """Every panel, those inside collapsed rows too; row panels themselves are not queries."""
    for p in dash["panels"]:
        if p.get("type") == "row":
            yield from p.get("panels", [])
        else:
            yield p


def targets(path: Path) -> list[Target]:
    dash = json.loads(path.read_text())
    return [
        Target(f"{p['id']} {p['title']}", t["refId"], t["expr"])
        for p in panels(dash)
        for t in p["targets"]
    ]


def variables(dash: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    return {v["name"]: v for v in dash.get("templating", {}).get("list", [])}


def used_variables(text: str) -> set[str]:
    return {next(g for g in m.groups() if g) for m in VARIABLE.finditer(text)}


def escape(value: str, regex: bool) -> str:
    """Grafana's escaping of a value: a multi-value or "All" variable's value sits in a regex
    (`=~`), so its metacharacters are escaped; any other's only its backslashes."""
    if not regex:
        return value.replace("\\", "\\\\")
    return REGEX_SPECIAL.sub(r"\\\\\1", value.replace("\\", "\\\\\\\\"))


def substitute(
    expr: str,
    values: Mapping[str, Sequence[str]],
    defined: Mapping[str, Mapping[str, Any]],
    *,
    rate_interval: str = "30s",
    interval: str = "5s",
    range_seconds: int = 300,
) -> str:
    """`expr` as Grafana sends it, for `values` (name -> the values picked; `[ALL]` for All,
    the variable's allValue) and the dashboard's variables (`variables(dash)`)."""
    builtin = {
        "__rate_interval": rate_interval,
        "__interval": interval,
        "__interval_ms": str(_seconds(interval) * 1000),
        "__range": f"{range_seconds}s",
        "__range_s": str(range_seconds),
        "__range_ms": str(range_seconds * 1000),
    }
    assert set(builtin) == set(BUILTINS)

    def one(m: re.Match[str]) -> str:
        name = next(g for g in m.groups() if g)
        if name in builtin:
            return builtin[name]
        if name not in defined:
            raise KeyError(f"the dashboard defines no variable ${name} (in {expr!r})")
        if name not in values:
            raise KeyError(f"the test gives no value for ${name} (in {expr!r})")
        var, picked = defined[name], list(values[name])
        if picked == [ALL]:
            return str(var["allValue"])
        regex = bool(var.get("multi") or var.get("includeAll"))
        if len(picked) == 1:
            return escape(picked[0], regex)
        return "(" + "|".join(escape(v, regex) for v in picked) + ")"

    return VARIABLE.sub(one, expr)


def _seconds(duration: str) -> int:
    m = re.fullmatch(r"(\d+)([smh])", duration)
    assert m is not None, duration
    return int(m.group(1)) * {"s": 1, "m": 60, "h": 3600}[m.group(2)]
