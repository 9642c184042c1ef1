"""The exposition, rendered once per poll and served as those bytes to every scrape.

An instance's metrics change only when it is polled, so the text of every instance's
families (`UwsgiCollector`, all but a few hundred bytes of a scrape) is rendered once per
set of published states and kept: the bytes, and on the first scrape that asks for gzip,
their compressed form. A scrape then costs the few families that really change per scrape
(build info, `process_*`, `promhttp_*`), rendered after it, byte for byte what rendering
the whole registry gives, in the same order.

Gzip: the kept part goes through one zlib stream up to a sync flush, which ends on a byte
boundary; each scrape continues a copy of that stream with its own part and finishes it.
The answer is one ordinary gzip member, the kept prefix shared by every scrape of a poll.

A new set of states is recognised by identity (each poll publishes new `InstanceState`
objects); the kept entry holds those objects, so their ids cannot be reused meanwhile.
"""

from __future__ import annotations

import threading
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field

from prometheus_client.registry import Collector

from uwsgitune.exporter.collector import ExportOptions, StateSource, UwsgiCollector
from uwsgitune.exporter.text import render
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
        self, source: StateSource, live: Collector, options: ExportOptions | None = None
    ) -> None:
        self._source = source
        self._live = live
        self._options = options or ExportOptions()
        self._entry: _Entry | None = None
        self._lock = threading.Lock()
        self.renders = 0  # instance parts rendered (once per poll, whatever the scrapes)

    def _current(self) -> _Entry:
        states = tuple(self._source())
        with self._lock:
            entry = self._entry
            if entry is None or not _same(entry.states, states):
                collector = UwsgiCollector(lambda: states, self._options)
                entry = self._entry = _Entry(states, render(collector))
                self.renders += 1
            return entry

    def encoded(self, gzipped: bool) -> Encoded:
        entry = self._current()
        live = render(self._live)
        if not gzipped:
            return entry.text, live
        with entry.lock:
            if entry.stream is None:
                stream = zlib.compressobj(GZIP_LEVEL, zlib.DEFLATED, GZIP_WBITS)
                entry.gzip = stream.compress(entry.text) + stream.flush(zlib.Z_SYNC_FLUSH)
                entry.stream = stream
            rest = entry.stream.copy()
        assert entry.gzip is not None
        return entry.gzip, rest.compress(live) + rest.flush()
