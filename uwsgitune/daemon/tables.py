"""`[instance.tuner]` and `[instance.rules]`: every tuner and rule setting, per instance.

The tables are the settings models themselves (`TunerSettings`, `RuleSettings`): each key is
validated by its one declaration, and only the keys a table sets are taken from it. A setting
both read (`uwsgitune.core.settings.SHARED`: cpu_saturated, cpu_instance_min, io_cpu_share,
busy_full, memory_headroom, cpu_workers_per_cpu, staffing_beta) set in either table applies
to both. Set in both, it must agree, or the instance is refused in one line naming the key
and both tables: neither table can win silently, since the user who wrote two values meant
one of them and only they know which, and a finding and the tuner's decision must never
size workers differently.
min_workers, max_workers and interval are the instance's own keys; given in `[instance.tuner]`
they are moved there (given in both places is an error).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from uwsgitune.core.settings import SHARED
from uwsgitune.tuner.tunersettings import TunerFields

BOUNDS = ("min_workers", "max_workers", "interval")  # [[instance]] keys that are tuner settings


TunerTable = TunerFields  # [instance.tuner]: the bounds are checked on the instance


def lift_bounds(data: Any) -> Any:
    """Move min_workers/max_workers/interval from `[instance.tuner]` to the instance."""
    if not isinstance(data, dict) or not isinstance(data.get("tuner"), dict):
        return data
    tuner = dict(data["tuner"])
    for key in BOUNDS:
        if key in tuner:
            if key in data:
                raise ValueError(f"{key} is set twice; keep it in [[instance]] or [instance.tuner]")
            data = {**data, key: tuner.pop(key)}
    return {**data, "tuner": tuner}


def set_keys(table: BaseModel, keys: frozenset[str] | None = None) -> dict[str, Any]:
    return {k: getattr(table, k) for k in table.model_fields_set if keys is None or k in keys}


def check_shared(tuner: BaseModel, rules: BaseModel) -> None:
    """A shared setting given in both tables must agree: the rules and the tuner read one."""
    t, r = set_keys(tuner, SHARED), set_keys(rules, SHARED)
    for key in sorted(t.keys() & r.keys()):
        if t[key] != r[key]:
            raise ValueError(
                f"{key} is {t[key]} in [instance.tuner] but {r[key]} in [instance.rules]; "
                "the rules and the tuner share it: set it once"
            )


def shared(tuner: BaseModel, rules: BaseModel) -> dict[str, Any]:
    return {**set_keys(tuner, SHARED), **set_keys(rules, SHARED)}
