"""The daemon's configuration: a TOML file (or flags), validated once, frozen.

```toml
[daemon]
metrics_listen = "127.0.0.1:9117"   # uwsgi_exporter's port: uwsgitune replaces it
log_format = "text"                 # or "json"
state_dir = "/var/lib/uwsgitune"
# web_config_file = "/etc/uwsgitune/web.yml"   # TLS and basic auth (exporter-toolkit's file)
# probe_targets = ["tcp://10.0.0.5:1717"]       # /probe's allow-list; /probe is off without

[[instance]]
name = "app"
stats = "/run/uwsgi/app-stats.sock"
fifo = "/run/uwsgi/app.fifo"
override = "/var/lib/uwsgitune/app.ini"
mode = "observe"                    # observe | recommend | apply
min_workers = 2
max_workers = 16
interval = 1.0
# restart_command = ["systemctl", "restart", "uwsgi@app"]   # lets apply change listen
# trust_tcp_stats = false           # apply over a TCP stats address not proved the master's
# latency = "127.0.0.1:9118"        # receive its request log: live latency percentiles
# latency_target = "p99=250ms"      # the findings and the tuner hold it (needs latency)

[instance.tuner]                    # any tuner setting (uwsgitune.tuner.tunersettings)
cooldown_down = 60
[instance.rules]                    # any rule setting (uwsgitune.rules.rulesettings)
window_seconds = 60
```

examples/uwsgitune.toml lists every setting with its default and unit. A setting the rules and
the tuner share (cpu_saturated, cpu_instance_min, io_cpu_share, busy_full, memory_headroom,
cpu_workers_per_cpu, staffing_beta) set in either table applies to both; set in both, it must
agree.

Environment overrides (applied before validation, so they are checked like the file):
`UWSGITUNE_<KEY>` sets `[daemon]` keys (`UWSGITUNE_METRICS_LISTEN`), and
`UWSGITUNE_INSTANCE_<NAME>_<KEY>` sets a key of the instance whose name, upper-cased with
every other character as `_`, is NAME (`UWSGITUNE_INSTANCE_APP_MODE=recommend`); the
`[instance.tuner]` and `[instance.rules]` tables are set in the file only.

Every problem is one line, as `FILE: instance[1].interval: must be >= 0.1 (got 0)`:
pydantic's messages are reworded (`describe_errors`) with the location as the user wrote it
(`instance[1].interval`, or the environment variable that set it), the rule, and the value.
The web config the `[daemon]` section names is checked with it (`exporter/webconfig.py`),
so that `config check` reports its problems too.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_serializer,
    field_validator,
    model_validator,
)
from pydantic_core import ErrorDetails

from uwsgitune.actuate.peer import PeerSettings
from uwsgitune.core.address import AddressError, parse_address, split_listen
from uwsgitune.core.latencytarget import TargetField
from uwsgitune.core.settings import check_worker_bounds, field_of, restart_argv
from uwsgitune.daemon.tables import TunerTable, check_shared, lift_bounds, set_keys, shared
from uwsgitune.errors import ConfigError
from uwsgitune.rules.rulesettings import RuleSettings
from uwsgitune.sources.reqlog import ReqlogAddressError, parse_reqlog_address
from uwsgitune.tuner.tunersettings import TunerSettings

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib  # type: ignore[import-not-found, unused-ignore]

DEFAULT_LISTEN = "127.0.0.1:9117"
ENV_PREFIX = "UWSGITUNE_"
Mode = Literal["observe", "recommend", "apply"]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class DaemonSection(_Frozen):
    # One address, or a list (uwsgi_exporter's repeatable --web.listen-address).
    metrics_listen: str | tuple[str, ...] = DEFAULT_LISTEN
    log_format: Literal["text", "json", "logfmt"] = "text"  # logfmt is text
    log_level: Literal["debug", "info", "warn", "error"] = "info"
    state_dir: Path = Path("/var/lib/uwsgitune")
    # The scrape target, as uwsgi_exporter's flags set it (docs/migrating-from-uwsgi_exporter.md)
    telemetry_path: str = Field("/metrics", pattern=r"^/[A-Za-z0-9_./-]*$")
    web_config_file: Path | None = None  # exporter-toolkit's TLS and basic-auth file
    collect_cores: bool = False
    scrape_timeout_offset: float = Field(0.25, ge=0, le=60)
    probe_targets: tuple[str, ...] = ()  # /probe's allow-list; empty: /probe is off
    uwsgi_metrics_max_series: int = Field(500, ge=0, le=100_000)
    latency_routes: bool = False  # uwsgi_request_route_duration_seconds{route}: ~49 series a route

    @field_validator("metrics_listen")
    @classmethod
    def _listen(cls, value: str | tuple[str, ...]) -> str | tuple[str, ...]:
        for text in (value,) if isinstance(value, str) else value:
            split_listen(text)
        if not value:
            raise ValueError("give at least one HOST:PORT")
        return value

    @field_validator("probe_targets")
    @classmethod
    def _targets(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for text in value:
            try:
                parse_address(text)
            except AddressError as exc:
                raise ValueError(str(exc)) from None
        return value

    @field_validator("telemetry_path")
    @classmethod
    def _path(cls, value: str) -> str:
        if value == "/probe" or value.startswith("/-/"):
            raise ValueError(f"{value} is taken by the exporter's own endpoints")
        return value

    @property
    def listens(self) -> tuple[str, ...]:
        value = self.metrics_listen
        return (value,) if isinstance(value, str) else value


class InstanceConfig(_Frozen):
    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
    stats: str
    fifo: Path | None = None
    override: Path | None = None
    mode: Mode = "observe"
    # the tuner's declarations; without max_workers the ceiling is the instance's `processes`
    min_workers: int = field_of(TunerSettings, "min_workers")
    max_workers: int | None = field_of(TunerSettings, "max_workers", default=None)
    interval: float = field_of(TunerSettings, "interval")
    timeout: float | None = Field(None, gt=0, le=60)
    # argv that restarts the instance (a fresh bind): the only way `listen` is applied
    restart_command: tuple[str, ...] | None = None
    trust_tcp_stats: bool = field_of(PeerSettings, "trust_tcp_stats")
    # where uWSGI sends its request log (`req-logger = socket:ADDR`): UDP on loopback
    latency: str | None = None
    # the latency target the findings and the tuner hold ("p99=250ms"; needs `latency`)
    latency_target: TargetField = field_of(TunerSettings, "latency_target")
    tuner: TunerTable = TunerTable()  # [instance.tuner]: any tuner setting
    rules: RuleSettings = RuleSettings()  # [instance.rules]: any rule setting

    @model_validator(mode="before")
    @classmethod
    def _lift(cls, data: Any) -> Any:
        return lift_bounds(data)

    @field_serializer("tuner", "rules")
    def _set_only(self, table: BaseModel) -> dict[str, Any]:
        return set_keys(table)  # a dump validates again: only what the file set

    @field_validator("restart_command", mode="before")
    @classmethod
    def _restart(cls, value: object) -> object:
        if value is None or not isinstance(value, str | list | tuple):
            return value
        return restart_argv(value)

    @field_validator("stats")
    @classmethod
    def _stats(cls, value: str) -> str:
        try:
            parse_address(value)
        except AddressError as exc:
            raise ValueError(str(exc)) from None
        return value

    @field_validator("latency")
    @classmethod
    def _latency(cls, value: str | None) -> str | None:
        if value is None:
            return value
        try:
            host, port = parse_reqlog_address(value)
        except ReqlogAddressError as exc:
            raise ValueError(str(exc)) from None
        return f"{host}:{port}"

    @model_validator(mode="after")
    def _bounds(self) -> InstanceConfig:
        check_worker_bounds(self.min_workers, self.max_workers)
        check_shared(self.tuner, self.rules)
        if self.mode == "apply" and self.fifo is None:
            raise ValueError("mode 'apply' needs a fifo (the master FIFO uwsgitune writes to)")
        if self.restart_command is not None and self.override is None:
            raise ValueError("restart_command needs an override (listen is written there)")
        tables = shared(self.tuner, self.rules)
        if self.latency_target is not None and "latency_target" in tables:
            raise ValueError("latency_target is set twice; keep it in [[instance]]")
        if self.latency is None and (self.latency_target or tables.get("latency_target")):
            raise ValueError(
                "latency_target needs latency, the address uWSGI sends its request log to "
                '(latency = "127.0.0.1:9118"; uwsgitune doctor --latency prints the ini lines)'
            )
        return self

    def _target(self) -> dict[str, Any]:
        """The instance's `latency_target`, for both the tuner's and the rules' settings."""
        return {} if self.latency_target is None else {"latency_target": self.latency_target}

    def tuner_settings(self, workers_max: int | None) -> TunerSettings:
        """The tuner's settings: the bounds, `[instance.tuner]` and the shared settings of
        `[instance.rules]`; without max_workers the ceiling is `processes` (`workers_max`)."""
        top = max(self.max_workers or workers_max or 0, self.min_workers)
        bounds = {"min_workers": self.min_workers, "max_workers": top, "interval": self.interval}
        keys = {**set_keys(self.tuner), **shared(self.tuner, self.rules), **self._target()}
        return TunerSettings(**keys, **bounds)

    def rule_settings(self) -> RuleSettings:
        """The rules' settings: `[instance.rules]` and the shared settings of `[instance.tuner]`."""
        keys = {**set_keys(self.rules), **shared(self.tuner, self.rules), **self._target()}
        return RuleSettings(**keys)


class DaemonConfig(_Frozen):
    daemon: DaemonSection = DaemonSection()
    instance: tuple[InstanceConfig, ...] = ()

    @model_validator(mode="after")
    def _unique(self) -> DaemonConfig:
        if not self.instance and not self.daemon.probe_targets:
            raise ValueError("no [[instance]]: give at least one, with name and stats")
        for attr in ("name", "stats", "latency"):
            seen: set[str] = set()
            for inst in self.instance:
                if getattr(inst, attr) is None:
                    continue
                value = str(getattr(inst, attr))
                if value in seen:
                    raise ValueError(f"two instances share the {attr} {value!r}")
                seen.add(value)
        return self

    def by_name(self) -> dict[str, InstanceConfig]:
        return {i.name: i for i in self.instance}


# pydantic's messages, reworded: one line per key, as the user wrote it ------------------------

_BOUNDS = {
    "greater_than_equal": ">=",
    "greater_than": ">",
    "less_than_equal": "<=",
    "less_than": "<",
}


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


def env_key(name: str) -> str:
    """The NAME part of UWSGITUNE_INSTANCE_<NAME>_<KEY> for an instance name."""
    return re.sub(r"[^A-Za-z0-9]", "_", name).upper()


def apply_env(data: dict[str, Any], env: Mapping[str, str]) -> dict[str, str]:
    """Apply overrides in place; return {dotted location: variable} to name them in errors."""
    origins: dict[str, str] = {}
    daemon_keys = set(DaemonSection.model_fields)
    instances = data.get("instance")
    by_env = {}
    if isinstance(instances, list):
        by_env = {
            env_key(str(i.get("name", ""))): (n, i)
            for n, i in enumerate(instances)
            if isinstance(i, dict)
        }
    for var in sorted(env):
        if not var.startswith(ENV_PREFIX) or var == ENV_PREFIX + "CONFIG":
            continue
        rest = var[len(ENV_PREFIX) :]
        if rest.lower() in daemon_keys:
            data.setdefault("daemon", {})[rest.lower()] = env[var]
            origins[f"daemon.{rest.lower()}"] = var
        elif rest.startswith("INSTANCE_"):
            _apply_instance_env(var, rest[len("INSTANCE_") :], env[var], by_env, origins)
    return origins


def _apply_instance_env(
    var: str,
    rest: str,
    value: str,
    by_env: dict[str, tuple[int, dict[str, Any]]],
    origins: dict[str, str],
) -> None:
    for key in sorted(InstanceConfig.model_fields, key=len, reverse=True):
        suffix = "_" + key.upper()
        if rest.endswith(suffix) and rest[: -len(suffix)] in by_env:
            index, inst = by_env[rest[: -len(suffix)]]
            inst[key] = value
            origins[f"instance[{index}].{key}"] = var
            return
    raise ConfigError([f"{var}: no instance and key match it (UWSGITUNE_INSTANCE_<NAME>_<KEY>)"])


def validate(
    data: dict[str, Any], source: str, env: Mapping[str, str] | None = None
) -> DaemonConfig:
    """Validate a parsed document (after env overrides). Raises ConfigError naming every key."""
    try:
        origins = apply_env(data, env or {})
        config = DaemonConfig.model_validate(data)
    except ConfigError as exc:
        raise ConfigError(exc.problems, source=source) from None
    except ValidationError as exc:
        raise ConfigError(describe_errors(exc, origins), source=source) from None
    web = config.daemon.web_config_file
    if web is not None:  # checked here so that `config check` reports its problems too
        from uwsgitune.exporter.webconfig import load_web_config  # YAML and TLS: ~40 ms

        load_web_config(web)
    return config


def load_config(path: Path, env: Mapping[str, str] | None = None) -> DaemonConfig:
    """Read, parse and validate one TOML file."""
    try:
        text = path.read_bytes().decode("utf-8")
        data = tomllib.loads(text)
    except OSError as exc:
        raise ConfigError([exc.strerror or str(exc)], source=str(path)) from None
    except UnicodeDecodeError:
        raise ConfigError(["not UTF-8 text"], source=str(path)) from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError([f"invalid TOML: {exc}"], source=str(path)) from None
    return validate(data, str(path), env)
