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

from prometheus_client.registry import CollectorRegistry

from uwsgitune.core.address import AddressError, StatsAddress, parse_address
from uwsgitune.exporter.exposition import render
from uwsgitune.exporter.metrics import ExportOptions, UwsgiCollector
from uwsgitune.pipeline import InstanceState, poll_once
from uwsgitune.sources.poller import LiveSource

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
    """One poll of the target through the pipeline's stages (read, parse, derive), on
    demand; the connection is closed before this returns. The host is not sampled: a probe
    target is usually another host's, and one poll has no rates to give anyway."""
    return poll_once(LiveSource(addr, timeout=timeout, sample_host=False))


def probe_text(addr: StatsAddress, timeout: float, options: ExportOptions) -> bytes:
    snap = probe_snapshot(addr, timeout)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(UwsgiCollector(lambda: [snap], options))
    return render(registry)
