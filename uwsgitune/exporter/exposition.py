"""The exposition, rendered once per poll and served as those bytes to every scrape.

An instance's metrics change only when it is polled, so the text of each instance's
families (`UwsgiCollector`, all but a few hundred bytes of a scrape) is rendered once per
published state and kept, then merged with the other instances' into the kept text of the
set of states, and, on the first scrape that asks for gzip, its compressed form. A scrape
then costs the few families that really change per scrape (build info, `process_*`,
`promhttp_*`), rendered after it, byte for byte what rendering the whole registry gives,
in the same order.

When a scrape is due before an instance's next poll ends (`scrapeclock.py`), the poll
thread renders at the end of the poll (`prepare`), compressed too if the last scrape asked
for gzip: the scrape then only serves bytes. Otherwise the first scrape after a poll
renders, and the others of that poll share it.

Gzip: the kept part goes through one zlib stream up to a sync flush, which ends on a byte
boundary; each scrape continues a copy of that stream with its own part and finishes it.
The answer is one ordinary gzip member, the kept prefix shared by every scrape of a poll.

A new state is recognised by identity (each poll publishes a new `InstanceState`); what is
kept holds those objects, so their ids cannot be reused meanwhile.
"""

from __future__ import annotations

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


@dataclass
class _Entry:
    states: tuple[InstanceState, ...]
    text: bytes
    gzip: bytes | None = None
    stream: zlib._Compress | None = None  # after `gzip`, flushed to a byte boundary
    lock: threading.Lock = field(default_factory=threading.Lock)


def _same(a: Sequence[InstanceState], b: Sequence[InstanceState]) -> bool:
    return len(a) == len(b) and all(x is y for x, y in zip(a, b, strict=True))


class PollExposition:
    """`encoded(gzip)`: the exposition of `source()`'s states then of `live`, as two parts."""

    def __init__(
        self,
        source: StateSource,
        live: Collector,
        options: ExportOptions | None = None,
        mono: Callable[[], float] = time.monotonic,
    ) -> None:
        self._source = source
        self._mono = mono
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
            entry = self._entry = _Entry(states, text)
            self.renders += 1
            return entry

    def _compress(self, entry: _Entry) -> None:
        """The kept text's gzip, once: up to a sync flush, which later scrapes continue."""
        with entry.lock:
            if entry.stream is None:
                stream = zlib.compressobj(GZIP_LEVEL, zlib.DEFLATED, GZIP_WBITS)
                entry.gzip = stream.compress(entry.text) + stream.flush(zlib.Z_SYNC_FLUSH)
                entry.stream = stream

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
        if entry is None or (gzipped and entry.stream is None):
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
        """The kept part and this scrape's own (rendered now), the scrape noted."""
        self.clock.scraped(self._mono())
        self._gzip = gzipped
        live = render(self._live)
        if not gzipped:
            return entry.text, live
        with entry.lock:
            assert entry.gzip is not None and entry.stream is not None
            rest = entry.stream.copy()
        return entry.gzip, rest.compress(live) + rest.flush()
