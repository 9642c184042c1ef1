"""Validated model of one uWSGI stats document.

Theory of operation
-------------------
The stats server writes one JSON document per connection. Its shape drifts across 2.0.x
releases and options (`--stats-minified`, `--stats-no-cores`, `--enable-metrics`, the Emperor),
so every model ignores unknown keys and gives every field a default. The raw bytes are
validated directly (`model_validate_json`), which measured faster than `json.loads` alone.

Units, as uWSGI writes them (see uwsgi-facts.md):
- `running_time`, `avg_rt`: microseconds. `running_time` is time spent serving requests.
- `rss`, `vsz`, `tx`: bytes. `rss`/`vsz` are 0 without `--memory-report`.
- `last_spawn`, `req_info.request_start`: epoch seconds.

Request `vars` can hold cookies and auth headers. They are kept as parsed here (the core may
need the method and path) and are dropped by `redact` before anything is shown or stored.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from uwsgitune.core.repair import repair_request_vars

__all__ = [
    "Core",
    "EmperorDoc",
    "Parsed",
    "ReqInfo",
    "Socket",
    "StatsDoc",
    "ValidationError",
    "Vassal",
    "Worker",
    "parse_document",
    "parse_stats",
]


# Every number is bounded, so that a hostile or broken peer gives a poll error naming the
# field (never an OverflowError deep in the host sampler or in the exposition): uWSGI's
# counters are uint64, pids at most the kernel's PID_MAX_LIMIT (2**22), ids 32-bit.
U64 = Annotated[int, Field(ge=0, le=2**64 - 1)]
Pid = Annotated[int, Field(ge=0, le=2**22)]
Id32 = Annotated[int, Field(ge=0, le=2**32 - 1)]
Num = Annotated[float, Field(ge=-(2.0**63), le=2.0**64, allow_inf_nan=False)]


class _Model(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class ReqInfo(_Model):
    request_start: Num = 0.0


class Core(_Model):
    id: U64 = 0
    requests: U64 = 0
    static_requests: U64 = 0
    routed_requests: U64 = 0
    offloaded_requests: U64 = 0
    write_errors: U64 = 0
    read_errors: U64 = 0
    in_request: U64 = 0
    vars: tuple[str, ...] = ()
    req_info: ReqInfo = Field(default_factory=ReqInfo)


class App(_Model):
    id: U64 = 0
    mountpoint: str = ""
    startup_time: Num = 0
    requests: U64 = 0
    exceptions: U64 = 0
    chdir: str = ""


class Worker(_Model):
    id: U64 = 0
    pid: Pid = 0
    accepting: U64 = 0
    requests: U64 = 0
    delta_requests: U64 = 0
    exceptions: U64 = 0
    harakiri_count: U64 = 0
    signals: U64 = 0
    signal_queue: U64 = 0
    status: str = "idle"
    rss: U64 = 0
    vsz: U64 = 0
    running_time: U64 = 0
    last_spawn: Num = 0
    respawn_count: U64 = 0
    tx: U64 = 0
    avg_rt: U64 = 0
    apps: tuple[App, ...] = ()
    cores: tuple[Core, ...] = ()

    @property
    def live(self) -> bool:
        """A worker is live unless cheaped or never spawned (`accepting` lies here)."""
        return self.status != "cheap" and self.pid > 0

    @property
    def busy(self) -> bool:
        return self.status == "busy"


class Socket(_Model):
    name: str = ""
    proto: str = ""
    queue: U64 = 0
    max_queue: U64 = 0
    shared: U64 = 0
    can_offload: U64 = 0

    @property
    def is_unix(self) -> bool:
        """TCP names look like `host:port`; everything else (a path, `@abstract`) is unix."""
        if self.name.startswith(("/", "@", ".")):
            return True
        return ":" not in self.name


class Metric(_Model):
    type: U64 = 0
    oid: str = ""
    value: Num = 0


class Cache(_Model):
    name: str = ""
    hits: U64 = 0
    miss: U64 = 0
    full: U64 = 0
    items: U64 = 0
    max_items: U64 = 0


class Vassal(_Model):
    id: str = ""
    pid: Pid = 0
    born: Num = 0
    last_mod: Num = 0
    ready: U64 = 0
    accepting: U64 = 0
    respawns: U64 = 0
    cursed: U64 = 0
    monitor: str = ""


class StatsDoc(_Model):
    version: str = ""
    listen_queue: U64 = 0
    listen_queue_errors: U64 = 0
    signal_queue: U64 = 0
    load: U64 = 0
    pid: Pid = 0
    uid: Id32 = 0
    gid: Id32 = 0
    cwd: str = ""
    sockets: tuple[Socket, ...] = ()
    workers: tuple[Worker, ...] = ()
    metrics: dict[str, Metric] | None = None
    caches: tuple[Cache, ...] = ()
    # Emperor documents carry vassals and no workers.
    vassals: tuple[Vassal, ...] | None = None
    emperor: tuple[str, ...] | None = None

    @property
    def is_emperor(self) -> bool:
        return self.vassals is not None

    @property
    def live_workers(self) -> tuple[Worker, ...]:
        return tuple(w for w in self.workers if w.live)

    @property
    def threads(self) -> int:
        """Threads per worker, from the cores list (1 when the cores are not reported)."""
        return max((len(w.cores) for w in self.workers), default=1) or 1


EmperorDoc = StatsDoc


@dataclass(frozen=True)
class Parsed:
    """A validated document, the bytes it was read from (repaired when `repairs`), and how
    many request `vars` strings had to be repaired to make it valid JSON."""

    doc: StatsDoc
    raw: bytes
    repairs: int = 0


def _json_invalid(exc: ValidationError) -> bool:
    return any(e.get("type") == "json_invalid" for e in exc.errors(include_url=False))


def parse_document(raw: bytes | str) -> Parsed:
    """The one parse of a stats document: the fast parse, and only when it fails on invalid
    JSON, the same after repairing request data (core/repair.py). Raises the first
    `ValidationError` (a ValueError) when the document is bad anywhere else."""
    data = raw if isinstance(raw, bytes) else raw.encode("utf-8", "surrogatepass")
    try:
        return Parsed(StatsDoc.model_validate_json(data), data)
    except ValidationError as exc:
        if not _json_invalid(exc):
            raise
        fixed, repairs = repair_request_vars(data)
        if not repairs:
            raise
        try:
            return Parsed(StatsDoc.model_validate_json(fixed), fixed, repairs)
        except ValidationError:
            raise exc from None


def parse_stats(raw: bytes | str) -> StatsDoc:
    """Validate one raw document (request data repaired, see `parse_document`)."""
    return parse_document(raw).doc
