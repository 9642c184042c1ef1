"""A real uWSGI with memory-report: a worker's RSS comes from the stats once it has served a
request, and only the others' are read from /proc (statm), never the master's."""

from __future__ import annotations

import time
import urllib.request
from collections.abc import Callable

import pytest

from tests.uwsgi_harness import url
from uwsgitune.core.address import parse_address
from uwsgitune.core.derive import Tracker
from uwsgitune.core.model import parse_stats
from uwsgitune.core.samples import Poll
from uwsgitune.launch import UwsgiProcess
from uwsgitune.sources.host import HostSampler
from uwsgitune.sources.stats import read_stats

pytestmark = pytest.mark.uwsgi


def test_statm_is_read_only_for_workers_whose_stats_carry_no_rss(
    uwsgi: Callable[..., UwsgiProcess],
) -> None:
    proc = uwsgi(processes=4)
    addr = parse_address(proc.stats)
    with urllib.request.urlopen(url(proc), timeout=10) as r:  # one request: one worker
        assert r.status == 200
    end = time.monotonic() + 10
    while True:  # memory-report sets the RSS at the end of the request
        raw = read_stats(addr, timeout=2.0)
        doc = parse_stats(raw)
        if any(w.rss for w in doc.workers) or time.monotonic() > end:
            break
        time.sleep(0.05)
    reported = {w.pid: w.rss for w in doc.live_workers if w.rss}
    bare = {w.pid for w in doc.live_workers if not w.rss}
    assert len(reported) == 1 and len(bare) == 3, doc.workers
    sampler = HostSampler(netlink=False)
    try:
        host = sampler.sample(doc)
    finally:
        sampler.close()
    procs = host.by_pid
    assert procs[doc.pid].rss is None  # the master's: nothing reads it
    for pid in reported:
        assert procs[pid].rss is None and procs[pid].cpu_seconds >= 0
    for pid in bare:
        assert (procs[pid].rss or 0) > 0
    # the frame shows the stats' RSS where there is one, /proc's elsewhere, as before
    frame = Tracker(proc.stats).update(Poll(proc.stats, time.time(), 1.0, doc=doc, host=host))
    shown = {w.pid: w.rss for w in frame.workers if w.live}
    assert {pid: shown[pid] for pid in reported} == reported
    assert all(shown[pid] == procs[pid].rss for pid in bare)
