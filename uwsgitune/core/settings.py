"""What the rules' and the tuner's settings share: the field helpers and the common knobs.

Each knob both read is declared here once (type, default, bounds, unit, description):
`RuleSettings` and `TunerSettings` inherit it, and the config file, the CLI and the docs
read the same declarations (`settings_table`, `SHARED`).
Shares are 0-1; CPU saturation is `uwsgitune.core.signals.cpu_saturation` (1.0 = every CPU
the instance can get is busy).
"""

from __future__ import annotations

import copy
import shlex
import shutil
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic_core import PydanticCustomError

from uwsgitune.core.latencytarget import TargetField


def num(default: float, lo: float, hi: float, text: str) -> Any:
    """A float setting: default, inclusive bounds, one-line description (unit first)."""
    return Field(float(default), ge=lo, le=hi, description=text)


def count(default: int, lo: int, hi: int, text: str) -> Any:
    """An integer setting, as `num`."""
    return Field(default, ge=lo, le=hi, description=text)


class SharedSettings(BaseModel):
    """The knobs the rules and the tuner both read: one value, so they never disagree."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    cpu_saturated: float = num(0.85, 0.1, 1, "CPU saturation at or above which CPU is used up.")
    # the CPU used up limits the instance only when its own workers use it, or its requests
    # wait for it: others' CPU does not hold back a pool whose requests wait on IO
    cpu_instance_min: float = num(
        0.25, 0.01, 1, "Share of effective CPUs the instance itself uses for CPU to be its limit."
    )
    io_cpu_share: float = num(
        0.5, 0.01, 1, "CPU time / response time below which requests wait on IO."
    )
    busy_full: float = num(0.9, 0.1, 1, "Busy ratio (Little's L / capacity) meaning all busy.")
    memory_headroom: float = num(0.8, 0.1, 1, "Share of available memory new workers may take.")
    cpu_workers_per_cpu: float = num(1.5, 0.5, 8, "Requests in service per CPU when CPU-bound.")
    staffing_beta: float = num(
        2.0, 0, 10, "Spare workers per square root of the requests in service (L + beta√L)."
    )
    # the latency target (core/latencytarget.py): the findings and the tuner judge one
    latency_target: TargetField = Field(
        None,
        description="Latency target of real traffic, p99=250ms or p95=0.25s (None: none; "
        "needs the request log, --latency).",
    )
    latency_min_requests: int = count(
        200, 10, 1_000_000, "Fewest requests in a latency window to judge its percentiles."
    )
    latency_min_coverage: float = num(
        0.7, 0.1, 1, "Share of requests logged (coverage) below which latency is not judged."
    )


SHARED = frozenset(SharedSettings.model_fields)


def settings_table(model: type[BaseModel]) -> list[tuple[str, str, object, str]]:
    """(name, type, default, description) of each field of `model`: for docs and `--help`."""
    return [
        (name, str(getattr(f.annotation, "__name__", f.annotation)), f.default, f.description or "")
        for name, f in model.model_fields.items()
    ]


def restart_argv(value: str | Sequence[str], name: str = "restart_command") -> tuple[str, ...]:
    """The argv of a restart command (one string is split like a shell would), checked once
    for the config file and the CLI. Raises ValueError, one line naming the fix."""
    if isinstance(value, str):
        try:
            value = shlex.split(value)
        except ValueError as exc:
            raise ValueError(f"{exc}; quote it as one shell word") from None
    argv = tuple(str(v) for v in value)
    if not argv:
        raise ValueError(f"{name} is empty; give the command that restarts the instance")
    if shutil.which(argv[0]) is None:
        raise ValueError(f"{argv[0]!r} not found; give a full path")
    return argv


WORKER_BOUNDS = "worker_bounds"


def check_worker_bounds(lo: int, hi: int | None) -> None:
    """min_workers <= max_workers, checked here once for every settings model."""
    if hi is not None and hi < lo:
        raise PydanticCustomError(
            WORKER_BOUNDS,
            "max_workers ({hi}) < min_workers ({lo}); give min_workers <= max_workers",
            {"lo": lo, "hi": hi},
        )


def flag_name(key: str) -> str:
    return "--" + key.replace("_", "-")


def add_flag(parser: Any, model: type[BaseModel], key: str, **kwargs: Any) -> Any:
    """`--key-name` for the setting `key` of `model`: its help, and unless given, its type,
    default and metavar from the one declaration (`kwargs` keep a flag's historic form).
    A boolean setting is a switch (`store_true`)."""
    field = model.model_fields[key]
    kwargs.setdefault("help", (field.description or "").rstrip("."))
    if field.annotation is bool:
        kwargs.setdefault("default", field.default)
        return parser.add_argument(flag_name(key), action="store_true", **kwargs)
    kind = int if field.annotation in (int, int | None) else float
    kwargs.setdefault("type", kind)
    if "default" not in kwargs and field.default is not None:
        kwargs["default"] = field.default
    kwargs.setdefault("metavar", "N" if kind is int else "VALUE")
    return parser.add_argument(flag_name(key), **kwargs)


def flag_problem(exc: ValidationError) -> str:
    """The first problem of a settings ValidationError, worded for the command line."""
    first = exc.errors(include_url=False)[0]
    if first["type"] == WORKER_BOUNDS:
        ctx = first.get("ctx") or {}
        return f"--min-workers {ctx['lo']} > --max-workers {ctx['hi']}; give min <= max"
    where = ".".join(str(x) for x in first["loc"]) or "settings"
    return f"{flag_name(where)}: {first['msg']}"


def field_of(model: type[BaseModel], key: str, **changes: Any) -> Any:
    """The declaration of `model`'s setting `key`, for another model that exposes it (bounds,
    unit and description stay the one declaration); `changes` e.g. `default=None`."""
    info = copy.copy(model.model_fields[key])
    for attr, value in changes.items():
        setattr(info, attr, value)
    return info
