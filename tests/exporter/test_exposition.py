"""The exposition rendered once per poll: the same bytes as rendering the whole registry at
every scrape, a gzip answer that is one ordinary member, and one render per set of states
however many scrapes ask."""

from __future__ import annotations

import gzip
import resource
import zlib
from collections.abc import Iterator
from dataclasses import replace
from functools import partial

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector, CollectorRegistry

from tests.exporter.test_collector import snapshot
from uwsgitune.exporter.exposition import POLLED_MAX_AGE, PollExposition, render
from uwsgitune.exporter.metrics import BuildInfo, UwsgiCollector, polled_registry
from uwsgitune.exporter.site import HandlerStats, handler_text
from uwsgitune.pipeline import InstanceState


class HandlerCollector(Collector):
    """The handler's families through prometheus_client: what `handler_text` writes by hand."""

    def __init__(self, stats: HandlerStats) -> None:
        self.stats = stats

    def collect(self) -> Iterator[Metric]:
        total = CounterMetricFamily(
            "promhttp_metric_handler_requests",
            "Total number of scrapes by HTTP status code.",
            labels=["code"],
        )
        for code in (200, 500, 503, *sorted(set(self.stats.codes) - {200, 500, 503})):
            total.add_metric([str(code)], float(self.stats.codes.get(code, 0)))
        yield total
        yield GaugeMetricFamily(
            "promhttp_metric_handler_requests_in_flight",
            "Current number of scrapes being served.",
            value=float(self.stats.in_flight),
        )
        limit = resource.getrlimit(resource.RLIMIT_AS)[0]
        yield GaugeMetricFamily(
            "process_virtual_memory_max_bytes",
            "Maximum amount of virtual memory available in bytes.",
            value=float(2**64 - 1 if limit == resource.RLIM_INFINITY else limit),
        )


def _whole(states: list[InstanceState], stats: HandlerStats) -> bytes:
    """What a scrape served before: the whole registry rendered, in registration order
    (without `process_*`, whose values move between two renders)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(UwsgiCollector(lambda: states))
    registry.register(BuildInfo())
    registry.register(HandlerCollector(stats))
    return render(registry)


def test_the_handlers_lines_by_hand_are_prometheus_clients() -> None:
    stats = HandlerStats()
    for codes, in_flight in (({}, 0), ({200: 3}, 1), ({200: 12345678, 503: 2, 400: 1, 431: 7}, 2)):
        stats.codes, stats.in_flight = dict(codes), in_flight
        assert handler_text(stats) == render(HandlerCollector(stats))
    assert b'{code="431"} 7.0\n' in handler_text(stats)


def test_the_same_bytes_as_rendering_everything_at_every_scrape() -> None:
    states = [
        snapshot("64-workers.json", "64-workers.json"),
        replace(snapshot("threads.json", "threads.json"), stats_uri="tcp://127.0.0.1:1717"),
    ]
    stats = HandlerStats()
    live = partial(handler_text, stats)
    exposition = PollExposition(lambda: states, polled_registry(), live=live)
    for code in (200, 200, 503):
        body, tail = exposition.encoded(False)
        assert body + tail == _whole(states, stats)
        zipped, ztail = exposition.encoded(True)
        assert gzip.decompress(zipped + ztail) == _whole(states, stats)
        stats.codes[code] = stats.codes.get(code, 0) + 1  # the live part follows it
    assert b'promhttp_metric_handler_requests_total{code="503"} 1.0' in b"".join(
        exposition.encoded(False)
    )


def test_a_gzip_answer_is_one_member_with_its_trailer() -> None:
    """Not two members glued together: clients that read only the first get it all."""
    states = [snapshot("64-workers.json", "64-workers.json")]
    for own in (b"", b"x 1.0\n", b"y 2.0\n" * 20000):  # none, a line, 120 KB: 2 blocks
        exposition = PollExposition(lambda: states, polled_registry(), live=lambda o=own: o)
        zipped, tail = exposition.encoded(True)
        stream = zlib.decompressobj(31)
        text = stream.decompress(zipped + tail)
        assert stream.eof and stream.unused_data == b""
        assert text == b"".join(exposition.encoded(False)) and text.endswith(own)
        assert zipped[:2] == b"\x1f\x8b" and len(zipped) < len(text) / 4


def test_rendered_once_per_poll_and_shared() -> None:
    first = [snapshot("64-workers.json", "64-workers.json")]
    states = first
    exposition = PollExposition(lambda: states, polled_registry())
    a, _ = exposition.encoded(False)
    b, _ = exposition.encoded(False)
    ga, _ = exposition.encoded(True)
    gb, _ = exposition.encoded(True)
    assert a is b and ga is gb and exposition.renders == 1  # one body for every scrape
    states = [replace(first[0])]  # a new poll publishes a new state, equal or not
    c, _ = exposition.encoded(False)
    assert c is not a and c == a and exposition.renders == 2
    states = []  # the last instance removed: the build info is left
    assert exposition.encoded(False)[0] == render(polled_registry()) and exposition.renders == 3


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def test_the_first_scrape_after_a_poll_renders_and_the_others_are_served_kept_bytes() -> None:
    """Nothing renders ahead of a scrape (bench/results/render_ahead.md): a poll publishes a
    state, the first scrape renders it, and the scrapes after it, until the next poll, are
    answered from what was kept, on the event loop, with no render."""
    clock = Clock()
    states = [snapshot("64-workers.json", "64-workers.json")]
    exposition = PollExposition(lambda: states, polled_registry(), mono=clock)
    assert exposition.kept(True) is None  # never rendered
    for poll in range(1, 4):
        states = [replace(states[0])]  # a poll publishes a new state
        assert exposition.kept(False) is None and exposition.renders == poll - 1
        first = exposition.encoded(True)  # the first scrape renders, compressed
        assert exposition.renders == poll
        clock.t += 1
        again = exposition.kept(True)
        assert again is not None and again[0] is first[0] and exposition.renders == poll
        assert gzip.decompress(again[0] + again[1]) == gzip.decompress(first[0] + first[1])


def test_a_poll_renders_only_its_own_instance() -> None:
    a = snapshot("64-workers.json", "64-workers.json")
    b = replace(snapshot("threads.json", "threads.json"), stats_uri="tcp://127.0.0.1:1717")
    states = [a, b]
    exposition = PollExposition(lambda: states, polled_registry())
    first = exposition.encoded(False)[0]
    states = [a, replace(b)]  # b polled again
    assert exposition.encoded(False)[0] == first and exposition.parts == 3


class Reads(Collector):
    """A polled family whose value counts its reads (as `process_*` move between reads)."""

    def __init__(self) -> None:
        self.n = 0

    def collect(self) -> Iterator[Metric]:
        self.n += 1
        yield GaugeMetricFamily("reads", "Reads.", value=float(self.n))


def test_polled_families_are_read_with_the_poll_and_again_when_polls_stall() -> None:
    clock = Clock()
    states = [snapshot("64-workers.json", "64-workers.json")]
    reads = Reads()
    exposition = PollExposition(lambda: states, reads, mono=clock, live=lambda: b"own 1.0\n")

    def served() -> tuple[bytes, bytes]:
        plain = b"".join(exposition.encoded(False))
        zipped = gzip.decompress(b"".join(exposition.encoded(True)))
        assert plain.endswith(b"own 1.0\n") and zipped.endswith(b"own 1.0\n")
        return plain, zipped

    first, zipped = served()
    assert first == zipped and b"reads 1.0\n" in first
    clock.t += POLLED_MAX_AGE / 2
    assert served() == (first, first) and reads.n == 1  # one read for the poll's scrapes
    clock.t += POLLED_MAX_AGE  # no new poll since: read again at each scrape
    plain, zipped = served()
    assert reads.n == 3 and plain == first.replace(b"reads 1.0", b"reads 2.0")
    assert zipped == first.replace(b"reads 1.0", b"reads 3.0")
    states = [replace(states[0])]  # a poll: the polled families are read with it again
    assert served() == (first.replace(b"reads 1.0", b"reads 4.0"),) * 2 and reads.n == 4
