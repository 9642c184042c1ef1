"""Config errors that read like `FILE: instance[1].interval: must be >= 0.1 (got 0)`.

pydantic's messages are reworded into one line per key: the location as the user wrote it
(`instance[1].interval`, or the environment variable that set it), the rule, and the value.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError
from pydantic_core import ErrorDetails

from uwsgitune.errors import UwsgituneError

_BOUNDS = {
    "greater_than_equal": ">=",
    "greater_than": ">",
    "less_than_equal": "<=",
    "less_than": "<",
}


class ConfigError(UwsgituneError):
    """One or more config problems; `lines()` gives one line each, prefixed by the source."""

    code = 2

    def __init__(self, problems: list[str], source: str = "") -> None:
        super().__init__("; ".join(problems))
        self.problems = problems
        self.source = source

    def lines(self) -> list[str]:
        prefix = f"{self.source}: " if self.source else ""
        return [prefix + p for p in self.problems]

    def __str__(self) -> str:
        return "\n".join(self.lines())


def location(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else part
    return out


def _got(value: Any) -> str:
    if isinstance(value, str | int | float | bool):
        return f" (got {value!r})" if isinstance(value, str) else f" (got {value})"
    return ""


def reason(err: ErrorDetails) -> str:
    kind, ctx = err["type"], err.get("ctx") or {}
    value = err.get("input")
    if kind in _BOUNDS:
        limit = next(iter(ctx.values()), "?")
        return f"must be {_BOUNDS[kind]} {limit}{_got(value)}"
    if kind == "missing":
        return "required key is missing"
    if kind == "extra_forbidden":
        return "unknown key (a typo?)"
    if kind == "string_pattern_mismatch":
        return f"must be letters, digits, '_', '.', '-' (1-64, starting alphanumeric){_got(value)}"
    msg = err["msg"]
    if kind == "value_error":
        return msg.removeprefix("Value error, ")
    msg = msg.replace("Input should be", "must be")
    return msg + _got(value)


def describe_errors(exc: ValidationError, origins: dict[str, str] | None = None) -> list[str]:
    """One line per error; a key set from the environment is named by its variable."""
    lines = []
    for err in exc.errors(include_url=False):
        where = location(tuple(err["loc"])) or "document"
        if origins and where in origins:
            where = f"{where} (from ${origins[where]})"
        lines.append(f"{where}: {reason(err)}")
    return lines
