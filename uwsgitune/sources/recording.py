"""Recordings: JSON lines of timestamped raw documents and host samples.

Line 1 is a header (`{"uwsgitune_recording": 1, ...}`); each further line is one poll:
`{"source", "t", "mono", "doc" | "error", "host", "read_seconds"}`, and `"latency"` when
the request log was read (`record --latency`): the poll's latency summary
(core/latencyform.py: the 10 s and 60 s windows, the p99 series, coverage, trust; no
Prometheus export, no request). The same files are the test fixtures, and `watch --replay`
/ `recommend --replay` run the live pipeline on them; a replayed poll carries its recorded
latency to the driver (`Poll.latency`).

The format stays version 1 while fields are only added: a reader ignores the fields it does
not know (an older uwsgitune replays a newer recording without its latency), and a missing
`"latency"` is a poll without one (a newer uwsgitune replays an older recording).
Request `vars` are emptied before writing unless the user opted in.
"""

from __future__ import annotations

import dataclasses
import json
from collections import deque
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import msgspec

from uwsgitune import __version__
from uwsgitune.core.address import AddressError, parse_address
from uwsgitune.core.latencyform import latency_summary, view_from_summary
from uwsgitune.core.latencyreport import LatencyView
from uwsgitune.core.model import parse_stats
from uwsgitune.core.redact import strip_request_vars
from uwsgitune.core.samples import HostSample, Poll, ProcSample, TcpQueue, UnixQueue
from uwsgitune.errors import UwsgituneError

FORMAT_VERSION = 1


class RecordingError(UwsgituneError):
    """A recording that cannot be read; one line naming the file and line."""

    code = 2


def poll_to_record(
    poll: Poll,
    raw: bytes | None,
    *,
    keep_vars: bool = False,
    latency: LatencyView | None = None,
) -> dict[str, Any]:
    rec: dict[str, Any] = {
        "source": poll.source,
        "t": poll.t,
        "mono": poll.mono,
        "read_seconds": round(poll.read_seconds, 6),
    }
    if raw is not None and poll.doc is not None:
        doc = json.loads(raw)
        rec["doc"] = doc if keep_vars else strip_request_vars(doc)
    else:
        rec["error"] = poll.error
    if poll.host is not None:
        rec["host"] = host_to_record(poll.host)
    if latency is not None:
        rec["latency"] = latency_summary(latency)
    return rec


def host_to_record(host: HostSample) -> dict[str, Any]:
    out = dataclasses.asdict(dataclasses.replace(host, procs=()))
    out["procs"] = [msgspec.structs.asdict(p) for p in host.procs]  # in its place
    return out


_HOST_FIELDS = {f.name for f in dataclasses.fields(HostSample)}


def host_from_record(data: dict[str, Any]) -> HostSample:
    # Fields a newer uwsgitune added are ignored, so old readers replay new recordings.
    fields = {k: v for k, v in data.items() if k in _HOST_FIELDS}
    fields["procs"] = tuple(ProcSample(**p) for p in fields.get("procs", ()))
    fields["unix_queues"] = tuple(UnixQueue(**q) for q in fields.get("unix_queues", ()))
    fields["tcp_queues"] = tuple(TcpQueue(**q) for q in fields.get("tcp_queues", ()))
    return HostSample(**fields)


def record_to_poll(rec: dict[str, Any]) -> Poll:
    host = host_from_record(rec["host"]) if rec.get("host") else None
    source, t, mono = str(rec["source"]), float(rec["t"]), float(rec["mono"])
    latency = view_from_summary(rec["latency"]) if rec.get("latency") else None
    if rec.get("doc") is not None:
        raw = json.dumps(rec["doc"]).encode()
        return Poll(
            source,
            t,
            mono,
            doc=parse_stats(raw),
            host=host,
            raw_size=len(raw),
            read_seconds=float(rec.get("read_seconds", 0.0)),
            latency=latency,
        )
    error = str(rec.get("error") or "poll failed")
    return Poll(source, t, mono, error=error, host=host, latency=latency)


class RecordingWriter:
    def __init__(self, stream: IO[str], *, keep_vars: bool = False) -> None:
        self._stream = stream
        self._keep_vars = keep_vars
        header = {
            "uwsgitune_recording": FORMAT_VERSION,
            "tool": f"uwsgitune {__version__}",
            "request_vars": keep_vars,
        }
        stream.write(json.dumps(header) + "\n")

    def write(self, poll: Poll, raw: bytes | None, latency: LatencyView | None = None) -> None:
        rec = poll_to_record(poll, raw, keep_vars=self._keep_vars, latency=latency)
        self._stream.write(json.dumps(rec, separators=(",", ":")) + "\n")
        self._stream.flush()


def read_recording(path: Path) -> Iterator[Poll]:
    """Yield the polls of a recording. Raises `RecordingError` naming the file and line."""
    try:
        handle = path.open("r", encoding="utf-8")
    except OSError as exc:
        raise RecordingError(f"{path}: cannot open ({exc.strerror}); check the path") from None
    with handle:
        for lineno, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                raise RecordingError(
                    f"{path}:{lineno}: not JSON; is this a `uwsgitune record` file?"
                ) from None
            if not isinstance(rec, dict):
                raise RecordingError(f"{path}:{lineno}: not a recording line (expected an object)")
            if "uwsgitune_recording" in rec:
                if rec["uwsgitune_recording"] != FORMAT_VERSION:
                    raise RecordingError(
                        f"{path}: recording format {rec['uwsgitune_recording']} is not supported"
                    )
                continue
            try:
                yield record_to_poll(rec)
            except (KeyError, TypeError, ValueError) as exc:
                what = type(exc).__name__
                raise RecordingError(f"{path}:{lineno}: damaged poll record ({what})") from None


class ReplaySource:
    """A recorded instance as a poll source (`pipeline.driver.Source`): the polls fed to it,
    in order, each with its recorded clocks; read as fast as they come (not paced)."""

    paced = False

    def __init__(self, name: str) -> None:
        self.name = name
        try:
            address = parse_address(name)
        except AddressError:  # a name no address parses: kept as it is
            self.uri, self.kind = name, None
        else:
            self.uri, self.kind = address.uri, address.kind
        self._polls: deque[Poll] = deque()

    def feed(self, poll: Poll) -> None:
        self._polls.append(poll)

    @property
    def exhausted(self) -> bool:
        return not self._polls

    def poll(self) -> Poll:
        return self._polls.popleft()

    def raw(self) -> bytes | None:
        return None  # a replayed poll is not recorded again
