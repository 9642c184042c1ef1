"""The exposition, rendered once per poll and served as those bytes to every scrape.

An instance's metrics change only when it is polled, so the text of each instance's
families (`UwsgiCollector`, all but a few hundred bytes of a scrape) is rendered once per
published state and kept, then merged with the other instances' into the kept text of the
set of states, followed by the `polled` families (build info, the daemon's `process_*`,
read then; at a scrape instead once they are POLLED_MAX_AGE old, as when polls stall), and,
on the first scrape that asks for gzip, its compressed form. A scrape then
costs its own few lines (`live`: the handler's counts, `promhttp_*`), written after it,
byte for byte what rendering the whole registry gives, in the same order.

When a scrape is due before an instance's next poll ends (`scrapeclock.py`), the poll
thread renders at the end of the poll (`prepare`), compressed too if the last scrape asked
for gzip: the scrape then only serves bytes. Otherwise the first scrape after a poll
renders, and the others of that poll share it.

Gzip: the kept part goes through zlib up to a sync flush, which ends on a byte boundary;
each scrape's own part follows as a final stored (uncompressed) deflate block, then the
gzip trailer (the CRC-32 continued from the kept part's, and the length). The answer is one
ordinary gzip member, the kept prefix shared by every scrape of a poll; a scrape's part is
a few hundred bytes, and copying a zlib stream to compress them cost more than the rest of
the scrape.

A new state is recognised by identity (each poll publishes a new `InstanceState`); what is
kept holds those objects, so their ids cannot be reused meanwhile.
"""

from __future__ import annotations

import struct
import threading
import time
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from prometheus_client.registry import Collector

from uwsgitune.exporter.collector import (
    ExportOptions,
    StateSource,
    UwsgiCollector,
    instance_families,
)
from uwsgitune.exporter.scrapeclock import ScrapeClock
from uwsgitune.exporter.text import Chunk, chunks, merge, render
from uwsgitune.pipeline.state import InstanceState

Encoded = tuple[bytes, bytes]  # (the kept part, shared by the scrapes of a poll; the rest)
GZIP_LEVEL = 1  # as every scrape compressed before: fast, ~8x on an exposition
GZIP_WBITS = 31  # a gzip header and trailer
POLLED_MAX_AGE = 5.0  # seconds: older polled families (`process_*`) are read at the scrape


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
        self.clock = ScrapeClock()
        self._gzip = False  # whether the last scrape asked for gzip
        self.renders = 0  # kept texts built (once per set of states, whatever the scrapes)
        self.prepared = 0  # of which in a poll thread, before the scrape
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

    def prepare(self, within: float) -> bool:
        """Render now (a poll thread, after its poll) if a scrape is due `within` seconds."""
        if not self.clock.due(self._mono(), within):
            return False
        entry = self._current()
        if self._gzip:
            self._compress(entry)
        self.prepared += 1
        return True

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
        """The kept part and this scrape's own (rendered now), the scrape noted. The polled
        families are read again, as the scrape's own, when they are older than
        POLLED_MAX_AGE: polls that stalled must not freeze the daemon's own `process_*`."""
        now = self._mono()
        self.clock.scraped(now)
        self._gzip = gzipped
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
