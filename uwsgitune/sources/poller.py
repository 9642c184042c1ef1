"""One poll of one instance: read the stats, validate, sample the host. Never raises for
anything the peer does; a failed poll is a `Poll` with a one-line `error`.

`default_timeout`: the per-poll deadline when the user gives none: the interval, within
0.5-5 s (a slow answer must not stall a fast poll loop, a fast one not fail a slow one)."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable

import msgspec
import psutil

from uwsgitune.core.address import StatsAddress
from uwsgitune.core.model import DocumentError, Parsed, parse_document
from uwsgitune.core.redact import printable
from uwsgitune.core.samples import Poll
from uwsgitune.sources.host import HostSampler
from uwsgitune.sources.stats import MAX_DOCUMENT, StatsError, read_stats_from


def describe_validation(err: DocumentError) -> str:
    """One line for a document the model refused: truncated JSON reads as such."""
    if err.kind == "truncated":
        return "truncated JSON (the document ends early); the peer closed mid-document"
    if err.kind == "json":
        return printable(f"invalid JSON ({err.msg}); is this a uWSGI stats socket?")
    where = err.where or "document"  # keys: peer data
    return printable(f"not a uWSGI stats document ({where}: {err.msg})")


def _local_ips() -> set[str]:
    ips = {"127.0.0.1", "::1", "localhost", "0.0.0.0", "::"}
    try:
        for addrs in psutil.net_if_addrs().values():
            ips.update(a.address.split("%", 1)[0] for a in addrs)
    except (OSError, psutil.Error):
        pass
    return ips


def is_local_address(address: StatsAddress) -> bool:
    """Unix sockets are local; a TCP/HTTP stats address is local when its host is ours."""
    if address.kind in ("unix", "abstract"):
        return True
    host = address.host
    if host.startswith("127.") or host in _local_ips():
        return True
    try:
        resolved = socket.getaddrinfo(host, None)
    except OSError:
        return False
    local = _local_ips()
    return all(str(info[4][0]) in local or str(info[4][0]).startswith("127.") for info in resolved)


class LiveSource:
    """Polls one live stats address (`pipeline.driver.Source`). Holds no connection between
    polls: each one connects, reads the whole document and closes."""

    paced = True
    exhausted = False

    def __init__(
        self,
        address: StatsAddress,
        *,
        timeout: float = 2.0,
        host: HostSampler | None = None,
        sample_host: bool = True,
        max_bytes: int = MAX_DOCUMENT,
        wall: Callable[[], float] = time.time,
        mono: Callable[[], float] = time.monotonic,
    ) -> None:
        self.address = address
        self.name, self.uri, self.kind = str(address), address.uri, address.kind
        self.timeout = timeout
        # The host around a remote instance is not ours to sample: its pids, cgroups and
        # backlogs would be read from the wrong machine. Remote frames carry no host data.
        local = sample_host and is_local_address(address)
        self.host: HostSampler | None = (
            host if host is not None else (HostSampler() if local else None)
        )
        self.max_bytes = max_bytes
        self._wall = wall
        self._mono = mono
        self.last_raw: bytes | None = None

    def raw(self) -> bytes | None:
        return self.last_raw

    def poll(self) -> Poll:
        source = str(self.address)
        start = self._mono()
        try:
            got = read_stats_from(self.address, timeout=self.timeout, max_bytes=self.max_bytes)
        except StatsError as exc:
            return Poll(source, self._wall(), self._mono(), error=str(exc))
        t, mono = self._wall(), self._mono()
        raw = got.data
        parsed = _parse(raw)
        if isinstance(parsed, str):
            return Poll(source, t, mono, error=f"{source}: {parsed}")
        done = self._mono()
        self.last_raw = parsed.raw  # repaired, when it was: what a recording stores
        try:
            host = self.host.sample(parsed.doc) if self.host is not None else None
        except (ValueError, OverflowError, OSError, psutil.Error) as exc:
            # A bug's safety net: the model bounds every pid, so this should not happen.
            why = f"host sampling failed ({type(exc).__name__}) for master pid {parsed.doc.pid}"
            return Poll(source, t, mono, error=f"{source}: {why}; report this as a bug")
        return Poll(
            source,
            t,
            mono,
            doc=parsed.doc,
            host=host,
            raw_size=len(raw),
            read_seconds=mono - start,
            parse_seconds=done - mono,
            repairs=parsed.repairs,
            peer_uid=got.peer_uid,
        )


def _has_workers(raw: bytes) -> bool:
    """Whether the document has a `workers` key (an empty list counts). Only asked of a
    document without workers: the model gives every field a default."""
    top = msgspec.json.decode(raw)
    return isinstance(top, dict) and "workers" in top


def _parse(raw: bytes) -> Parsed | str:
    """The parsed document, or why it is not one (one line, without the address)."""
    try:
        parsed = parse_document(raw)
    except DocumentError as exc:
        return describe_validation(exc)
    if not parsed.doc.workers and parsed.doc.vassals is None and not _has_workers(parsed.raw):
        # Valid JSON, but neither a uWSGI instance nor an Emperor: some other service.
        return "JSON without workers; not a uWSGI stats socket"
    return parsed


def default_timeout(interval: float, timeout: float | None = None) -> float:
    return timeout or min(max(interval, 0.5), 5.0)
