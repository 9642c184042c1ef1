"""The exposition: the metrics in Prometheus's text format, rendered once per poll and served
as those bytes to every scrape of that poll.

Rendered once per poll. An instance's metrics change only when it is polled, so the text of
each instance's families (`metrics.UwsgiCollector`, all but a few hundred bytes of a scrape)
is rendered once per published state and kept, then merged with the other instances' into
the kept text of the set of states, followed by the `polled` families (build info, the
daemon's `process_*`, read then; at a scrape instead once they are POLLED_MAX_AGE old, as
when polls stall), and, on the first scrape that asks for gzip, its compressed form. A
scrape then costs its own few lines (`live`: the site's counts, `promhttp_*`), written
after it, byte for byte what rendering the whole registry gives, in the same order. A new
state is recognised by identity (each poll publishes a new `InstanceState`); what is kept
holds those objects, so their ids cannot be reused meanwhile.

Rendered at the scrape. The first scrape after a poll renders, and the other scrapes of
that poll are served the kept bytes (`kept`: without a thread, on the event loop). Nothing
renders ahead of a scrape: rendering in the poll thread before a scrape that was due saved
no CPU, it cost 9% more at a 15 s scrape interval (two renders a scrape instead of one:
bench/results/render_ahead.md), so issue 37's rule (keep it only for a 20% saving) took it
out. A poll that no scrape reads costs no render.

Shared while it runs. Scrapes that arrive while a render runs wait for it (`InFlight`):
fifty scrapes arriving together cost one render (one thread, one transient peak of the
registry's objects) and hold one body between them, not fifty.

The text writer. `generate_latest` validates and escapes every label name of every sample:
64 workers make ~1,400 samples and ~11 ms of that. Our families only carry legacy-valid
names, and one worker's label set repeats across its 20-odd metrics, so the rendered
`{...}` part is cached per label set (`render`, `chunks`, `merge`). Anything this writer
does not expect (timestamps, exemplars, OpenMetrics-only samples, other metric types) falls
back to `generate_latest` for the whole output. Equality with `generate_latest` is tested
on recorded documents.

Gzip. The kept part goes through zlib up to a sync flush, which ends on a byte boundary;
each scrape's own part follows as a final stored (uncompressed) deflate block, then the
gzip trailer (the CRC-32 continued from the kept part's, and the length). The answer is one
ordinary gzip member, the kept prefix shared by every scrape of a poll; a scrape's part is
a few hundred bytes, and copying a zlib stream to compress them cost more than the rest of
the scrape.
"""

from __future__ import annotations

import asyncio
import contextlib
import struct
import threading
import time
import zlib
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from prometheus_client import generate_latest
from prometheus_client.core import Metric
from prometheus_client.registry import Collector
from prometheus_client.samples import Sample
from prometheus_client.utils import floatToGoString

from uwsgitune.exporter.metrics import (
    ExportOptions,
    StateSource,
    UwsgiCollector,
    instance_families,
)
from uwsgitune.pipeline.state import InstanceState

Encoded = tuple[bytes, bytes]  # (the kept part, shared by the scrapes of a poll; the rest)
GZIP_LEVEL = 1  # as every scrape compressed before: fast, ~8x on an exposition
GZIP_WBITS = 31  # a gzip header and trailer
POLLED_MAX_AGE = 5.0  # seconds: older polled families (`process_*`) are read at the scrape
T = TypeVar("T")


# The text writer --------------------------------------------------------------------------

_TYPES = {"gauge": "gauge", "counter": "counter", "summary": "summary", "histogram": "histogram"}


class _Unexpected(Exception):
    pass


def _escape_value(value: str) -> str:
    return value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")


def _labels(sample: Sample, cache: dict[tuple[tuple[str, str], ...], str]) -> str:
    if not sample.labels:
        return ""
    key = tuple(sample.labels.items())  # as inserted: one call site always inserts alike
    text = cache.get(key)
    if text is None:
        items = sorted(key)
        text = "{" + ",".join(f'{k}="{_escape_value(v)}"' for k, v in items) + "}"
        cache[key] = text
    return text


def _family_lines(
    metric: object,
    out: list[str],
    cache: dict[tuple[tuple[str, str], ...], str],
    values: dict[float, str],
) -> None:
    mtype = _TYPES.get(getattr(metric, "type", ""))
    if mtype is None:
        raise _Unexpected
    name = metric.name + ("_total" if mtype == "counter" else "")  # type: ignore[attr-defined]
    doc = metric.documentation.replace("\\", r"\\").replace("\n", r"\n")  # type: ignore[attr-defined]
    out.append(f"# HELP {name} {doc}\n# TYPE {name} {mtype}\n")
    for s in metric.samples:  # type: ignore[attr-defined]
        if s.timestamp is not None or s.exemplar is not None or s.name.endswith("_created"):
            raise _Unexpected
        value = values.get(s.value)
        if value is None:  # most values repeat (0, 1): format each once per scrape
            value = values[s.value] = floatToGoString(s.value)  # type: ignore[no-untyped-call]
        out.append(f"{s.name}{_labels(s, cache)} {value}\n")


def render(registry: Collector) -> bytes:
    """The text format (0.0.4), byte for byte what `generate_latest` writes, faster."""
    out: list[str] = []
    cache: dict[tuple[tuple[str, str], ...], str] = {}
    values: dict[float, str] = {}
    try:
        for metric in registry.collect():
            _family_lines(metric, out, cache, values)
    except _Unexpected:
        return generate_latest(registry)
    return "".join(out).encode("utf-8")


# One family's part of the text: (its name and type, its HELP and TYPE lines, its samples).
Chunk = tuple[str, str, str]


def chunks(families: Iterable[Metric]) -> tuple[Chunk, ...] | None:
    """Each family's text apart, to be merged with other instances' (`merge`); None when a
    family is not one this writer renders (the caller renders the whole registry then)."""
    cache: dict[tuple[tuple[str, str], ...], str] = {}
    values: dict[float, str] = {}
    out: list[Chunk] = []
    lines: list[str] = []
    try:
        for metric in families:
            _family_lines(metric, lines, cache, values)
            out.append((f"{metric.name} {metric.type}", lines[0], "".join(lines[1:])))
            lines.clear()
    except _Unexpected:
        return None
    return tuple(out)


def merge(parts: Iterable[tuple[Chunk, ...]]) -> bytes:
    """The text of every part's families, as `render` gives for a collector yielding each
    family once with the samples of every part, in order of first appearance."""
    heads: dict[str, str] = {}
    bodies: dict[str, list[str]] = {}
    for part in parts:
        for name, head, body in part:
            if name in bodies:
                bodies[name].append(body)
            else:
                heads[name], bodies[name] = head, [body]
    return "".join(heads[n] + "".join(b) for n, b in bodies.items()).encode("utf-8")


# The kept exposition of a set of states ------------------------------------------------------


@dataclass
class _Entry:
    states: tuple[InstanceState, ...]
    text: bytes  # the instances' families, then the polled ones from `split` on
    split: int
    made: float  # monotonic, when the polled families were read
    gzip: bytes | None = None  # a gzip header and `text` deflated, flushed to a byte boundary
    gz_split: int = 0  # where in `gzip` the polled families start (flushed there too)
    crc: int = 0  # CRC-32 of `text`, with `gzip`
    crc_split: int = 0  # of `text[:split]`
    lock: threading.Lock = field(default_factory=threading.Lock)


def _stored_end(tail: bytes, crc: int, size: int) -> bytes:
    """`tail` as the final stored deflate blocks of a gzip member whose first `size` bytes
    (CRC-32 `crc`) went before, byte-aligned, then the member's trailer (RFC 1951 3.2.4,
    RFC 1952 2.3.1)."""
    out = []
    blocks = [tail[i : i + 0xFFFF] for i in range(0, len(tail), 0xFFFF)] or [b""]
    for i, block in enumerate(blocks):
        final = i == len(blocks) - 1
        out.append(struct.pack("<BHH", final, len(block), len(block) ^ 0xFFFF) + block)
    out.append(struct.pack("<II", zlib.crc32(tail, crc), (size + len(tail)) & 0xFFFFFFFF))
    return b"".join(out)


def _same(a: Sequence[InstanceState], b: Sequence[InstanceState]) -> bool:
    return len(a) == len(b) and all(x is y for x, y in zip(a, b, strict=True))


class PollExposition:
    """`encoded(gzip)`: the exposition of `source()`'s states and of `polled`, then `live()`'s
    text, as two parts."""

    def __init__(
        self,
        source: StateSource,
        polled: Collector,
        options: ExportOptions | None = None,
        mono: Callable[[], float] = time.monotonic,
        live: Callable[[], bytes] = bytes,
    ) -> None:
        self._source = source
        self._mono = mono
        self._polled = polled
        self._live = live
        self._options = options or ExportOptions()
        self._entry: _Entry | None = None
        self._parts: dict[int, tuple[InstanceState, tuple[Chunk, ...] | None]] = {}
        self._lock = threading.Lock()
        self.renders = 0  # kept texts built (once per set of states, whatever the scrapes)
        self.parts = 0  # instance texts rendered (once per published state)

    def _part(self, state: InstanceState) -> tuple[Chunk, ...] | None:
        kept = self._parts.get(id(state))
        if kept is not None and kept[0] is state:
            return kept[1]
        self.parts += 1
        return chunks(instance_families(state, self._options))

    def _current(self) -> _Entry:
        states = tuple(self._source())
        with self._lock:
            entry = self._entry
            if entry is not None and _same(entry.states, states):
                return entry
            parts = [self._part(s) for s in states]
            self._parts = {id(s): (s, p) for s, p in zip(states, parts, strict=True)}
            if any(p is None for p in parts):  # a family the fast writer does not render
                text = render(UwsgiCollector(lambda: states, self._options))
            else:
                text = merge(p for p in parts if p is not None)
            made = self._mono()
            entry = self._entry = _Entry(states, text + render(self._polled), len(text), made)
            self.renders += 1
            return entry

    def _compress(self, entry: _Entry) -> None:
        """The kept text's gzip, once: up to a sync flush, which each scrape's part ends."""
        with entry.lock:
            if entry.gzip is None:
                stream = zlib.compressobj(GZIP_LEVEL, zlib.DEFLATED, GZIP_WBITS)
                head, polled = memoryview(entry.text)[: entry.split], entry.text[entry.split :]
                zhead = stream.compress(head) + stream.flush(zlib.Z_SYNC_FLUSH)
                entry.crc_split = zlib.crc32(head)
                entry.crc = zlib.crc32(polled, entry.crc_split)
                entry.gz_split = len(zhead)
                entry.gzip = zhead + stream.compress(polled) + stream.flush(zlib.Z_SYNC_FLUSH)

    def kept(self, gzipped: bool) -> Encoded | None:
        """The answer if nothing is left to render or compress but the scrape's own part
        (about 0.2 ms: it may run on the event loop); else None, and `encoded` renders."""
        entry = self._entry
        if entry is None or (gzipped and entry.gzip is None):
            return None
        if not _same(entry.states, tuple(self._source())):
            return None
        return self._answer(entry, gzipped)

    def encoded(self, gzipped: bool) -> Encoded:
        entry = self._current()
        if gzipped:
            self._compress(entry)
        return self._answer(entry, gzipped)

    def _answer(self, entry: _Entry, gzipped: bool) -> Encoded:
        """The kept part and this scrape's own (rendered now). The polled families are read
        again, as the scrape's own, when they are older than POLLED_MAX_AGE: polls that
        stalled must not freeze the daemon's own `process_*`."""
        now = self._mono()
        live = self._live()
        if now - entry.made > POLLED_MAX_AGE:
            own = render(self._polled) + live
            if not gzipped:
                return entry.text[: entry.split], own
            assert entry.gzip is not None  # `_compress` sets it, and the rest before it
            kept = entry.gzip[: entry.gz_split]
            return kept, _stored_end(own, entry.crc_split, entry.split)
        if not gzipped:
            return entry.text, live
        assert entry.gzip is not None  # `_compress` sets it, and `crc` before it
        return entry.gzip, _stored_end(live, entry.crc, len(entry.text))


# One render in flight, shared ------------------------------------------------------------------


class InFlight(Generic[T]):
    """One work in flight per key (a kind of answer, a probe's target), shared by every caller
    that asks while it runs. A caller that comes after it finished starts a new one: nothing
    is cached past the work itself."""

    def __init__(self) -> None:
        self._running: dict[Hashable, asyncio.Future[T]] = {}

    def __len__(self) -> int:
        """Works running, abandoned by their waiters or not: threads taken."""
        return len(self._running)

    def __contains__(self, key: Hashable) -> bool:
        return key in self._running

    async def run(self, key: Hashable, work: Callable[[], T]) -> T:
        """`work()` in a thread, or the result of the same `key`'s work already running.
        Cancelling a waiter (its deadline) leaves the shared work to the others."""
        future = self._running.get(key)
        if future is None:
            future = asyncio.ensure_future(asyncio.to_thread(work))
            self._running[key] = future
            future.add_done_callback(lambda done: self._finished(key, done))
        return await asyncio.shield(future)

    def _finished(self, key: Hashable, done: asyncio.Future[T]) -> None:
        if self._running.get(key) is done:
            del self._running[key]
        if not done.cancelled():
            with contextlib.suppress(Exception):
                done.exception()  # retrieved: a failure nobody waits for is not logged twice
