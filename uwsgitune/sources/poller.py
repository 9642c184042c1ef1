"""One poll of one instance: read the stats, validate, sample the host. Never raises for
anything the peer does; a failed poll is a `Poll` with a one-line `error`."""

from __future__ import annotations

import time
from collections.abc import Callable

from pydantic import ValidationError

from uwsgitune.core.address import StatsAddress
from uwsgitune.core.model import StatsDoc, parse_stats
from uwsgitune.core.samples import Poll
from uwsgitune.sources.host import HostSampler
from uwsgitune.sources.stats import MAX_DOCUMENT, StatsError, read_stats


def describe_validation(err: ValidationError) -> str:
    """One line for a document pydantic refused: truncated JSON reads as such."""
    first = err.errors(include_url=False)[0]
    kind, msg = first.get("type", ""), first.get("msg", "")
    if kind == "json_invalid":
        if "EOF" in msg:
            return "truncated JSON (the document ends early); the peer closed mid-document"
        return f"invalid JSON ({msg}); is this a uWSGI stats socket?"
    where = ".".join(str(p) for p in first.get("loc", ())) or "document"
    return f"not a uWSGI stats document ({where}: {msg})"


class Observer:
    """Polls one address. Holds no connection between polls."""

    def __init__(
        self,
        address: StatsAddress,
        *,
        timeout: float = 2.0,
        host: HostSampler | None = None,
        max_bytes: int = MAX_DOCUMENT,
        wall: Callable[[], float] = time.time,
        mono: Callable[[], float] = time.monotonic,
    ) -> None:
        self.address = address
        self.timeout = timeout
        self.host = host if host is not None else HostSampler()
        self.max_bytes = max_bytes
        self._wall = wall
        self._mono = mono
        self.last_raw: bytes | None = None

    def poll(self) -> Poll:
        source = str(self.address)
        start = self._mono()
        try:
            raw = read_stats(self.address, timeout=self.timeout, max_bytes=self.max_bytes)
        except StatsError as exc:
            return Poll(source, self._wall(), self._mono(), error=str(exc))
        t, mono = self._wall(), self._mono()
        read_s = mono - start
        try:
            doc: StatsDoc = parse_stats(raw)
        except ValidationError as exc:
            return Poll(source, t, mono, error=f"{source}: {describe_validation(exc)}")
        if not doc.model_fields_set & {"workers", "vassals"}:
            # Valid JSON, but neither a uWSGI instance nor an Emperor: some other service.
            return Poll(
                source, t, mono, error=f"{source}: JSON without workers; not a uWSGI stats socket"
            )
        parsed = self._mono()
        self.last_raw = raw
        host = self.host.sample(doc)
        return Poll(
            source,
            t,
            mono,
            doc=doc,
            host=host,
            raw_size=len(raw),
            read_seconds=read_s,
            parse_seconds=parsed - mono,
        )
