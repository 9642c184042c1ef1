"""The latency target against a real uWSGI 2.0 sending its request log (docs/latency.md):
the whole path, from the master's datagrams through the `LatencyStage`, the rules and the
tuner service, to one decision and one finding.

Two clients keep both workers of an instance busy on a route that takes 150 ms, under a
target of p99 = 100 ms. Service time alone misses the target, so the tuner must not grow
the pool (more workers cannot make a request faster) and must not shrink it: it holds
with `latency-service`, the percentiles in its evidence, on the basis it says (no stamp:
service time + Little's mean queue wait). The rules say the same miss is not capacity, and
name the route. Observe mode: nothing is applied; the decision is the point.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

from tests.uwsgi_harness import url
from uwsgitune.actuate.audit import AuditLog
from uwsgitune.actuate.service import TunerSetup, tuner_factory
from uwsgitune.core.address import parse_address
from uwsgitune.core.logline import log_format
from uwsgitune.launch import UwsgiProcess
from uwsgitune.loadgen import run_closed
from uwsgitune.pipeline import InstanceState, LatencyStage, live_driver
from uwsgitune.rules import RuleSettings
from uwsgitune.tuner import TunerSettings

SECONDS = 16.0  # the 10 s window at this count, and a few polls to decide on it
TARGET = "p99=100ms"


def test_a_service_time_miss_holds_the_pool_and_names_the_route(
    uwsgi: Callable[..., UwsgiProcess], tmp_path: Path
) -> None:
    stage = LatencyStage("127.0.0.1:0")
    host, port = stage.receiver.address
    proc = uwsgi(
        processes=2,
        disable_logging=None,
        req_logger=f"socket:{host}:{port}",
        log_format=log_format(None),
    )
    few = {"latency_target": TARGET, "latency_min_requests": 40}
    setup = TunerSetup(
        stats=parse_address(proc.stats),
        fifo=Path(proc.fifo),
        settings=lambda _slots: TunerSettings(max_workers=4, **few),  # type: ignore[arg-type]
        mode="observe",
        audit=AuditLog(tmp_path / "audit.jsonl"),
        lock_dir=tmp_path / "locks",
    )
    driver = live_driver(
        parse_address(proc.stats),
        interval=0.5,
        tuner=tuner_factory(setup),
        mode="observe",
        latency=stage,
        # a look-back of 20 s: judged once the polls span 10 s of it
        rule_settings=RuleSettings(window_seconds=20, **few),  # type: ignore[arg-type]
    )
    states: list[InstanceState] = []
    driver.subscribe(states.append)
    load = threading.Thread(target=run_closed, args=(url(proc, "/io/150"), 2, SECONDS), daemon=True)
    load.start()
    try:
        driver.run(deadline=time.monotonic() + SECONDS)
    finally:
        driver.close()
        load.join(SECONDS + 10)

    decisions = [s.tuning.decision for s in states if s.tuning and s.tuning.decision]
    assert decisions and all(d.action != "up" for d in decisions), [d.line() for d in decisions]
    held = [d for d in decisions if d.code == "latency-service"]
    assert held, [d.line() for d in decisions[-3:]]
    d = held[-1]
    ev = d.evidence
    assert (d.action, d.live, d.desired) == ("hold", 2, 2)
    assert ev["latency_target_ms"] == 100.0 and ev["latency_basis"] == "little"
    assert 140 <= ev["service_p50_ms"] <= 400 and ev["service_p99_ms"] >= 140  # type: ignore[operator]
    assert ev["little_wait_ms"] is not None and ev["latency_coverage"] >= 0.7  # type: ignore[operator]
    assert "more workers cannot fix" in d.reason and "mean queue wait (Little's law" in d.reason

    last = states[-1]
    view = last.latency
    assert view is not None and view.trusted and view.lines >= 40
    found = {f.id: f for f in last.findings}
    service = found["latency.service_over_target"]
    assert "latency.queue_over_target" not in found
    assert "/io" in str(service.value("slowest_routes"))
    assert "worker 1" in str(service.value("slowest_workers")) or "worker 2" in str(
        service.value("slowest_workers")
    )
