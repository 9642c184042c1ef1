"""`/probe?target=URI`: one read of one instance from the allow-list, rendered at once.

uwsgi_exporter's multi-target mode, for one Prometheus job over many instances. It is off
unless the config lists `probe_targets`, and only those targets are read: the endpoint is
never an open proxy to whatever address a client names. A target is compared by its parsed
form (`127.0.0.1:1717`, `tcp://127.0.0.1:1717` are the same), and never expanded: a `~` in
the client's target is matched as written (a listed `~/stats.sock` by that spelling or by
the path it names), so no request makes the server look a user up (`~user` asks NSS, which
can be LDAP, on the event loop). A failed read is a 200 with `uwsgi_up 0` and the error
counted, as the exporter answers, so Prometheus records it.

Probes of one target that arrive while its read runs share that read (`site.py`), and at
most `PROBES_AT_ONCE` targets are read at once: a probe of another target past that is a
503 with `Retry-After`. So probes can neither multiply reads of an instance nor take every
thread of the pool that renders the scrapes.
"""

from __future__ import annotations

import time

from prometheus_client.registry import CollectorRegistry

from uwsgitune.core.address import AddressError, StatsAddress, parse_address
from uwsgitune.core.derive import Tracker
from uwsgitune.core.model import DocumentError, parse_document
from uwsgitune.core.samples import Poll
from uwsgitune.exporter.exposition import render
from uwsgitune.exporter.metrics import ExportOptions, UwsgiCollector
from uwsgitune.pipeline.state import InstanceState, PollCounts
from uwsgitune.sources.stats import StatsError, read_stats

PROBES_AT_ONCE = 4  # targets read at once; the default thread pool has 6 threads on 2 CPUs


class AllowList:
    def __init__(self, targets: tuple[str, ...]) -> None:
        """Each listed target by its address (`~` expanded, once, here) and as written."""
        self.targets: dict[str, StatsAddress] = {}
        for text in targets:
            addr = parse_address(text)
            self.targets[addr.uri] = addr
            self.targets.setdefault(parse_address(text, expand=False).uri, addr)

    @property
    def enabled(self) -> bool:
        return bool(self.targets)

    def find(self, target: str) -> StatsAddress | None:
        """The allowed address `target` names, or None (unparsable or not listed)."""
        try:
            return self.targets.get(parse_address(target, expand=False).uri)
        except AddressError:
            return None


def probe_snapshot(addr: StatsAddress, timeout: float) -> InstanceState:
    """Read the stats once (the connection is closed before this returns)."""
    start = time.perf_counter()
    source = str(addr)
    try:
        parsed = parse_document(read_stats(addr, timeout=timeout))
        poll = Poll(source, time.time(), time.monotonic(), doc=parsed.doc, repairs=parsed.repairs)
    except StatsError as exc:
        poll = Poll(source, time.time(), time.monotonic(), error=str(exc))
    except DocumentError:
        poll = Poll(source, time.time(), time.monotonic(), error=f"{source}: invalid stats")
    seconds = time.perf_counter() - start
    frame = Tracker(source).update(poll)
    counts = PollCounts(1, 0 if poll.ok else 1, seconds, seconds, int(poll.repairs > 0))
    return InstanceState(addr.uri, frame=frame, poll=poll if poll.ok else None, counts=counts)


def probe_text(addr: StatsAddress, timeout: float, options: ExportOptions) -> bytes:
    snap = probe_snapshot(addr, timeout)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(UwsgiCollector(lambda: [snap], options))
    return render(registry)
