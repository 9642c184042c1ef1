"""Issue 14.4: hostile or broken stats peers. Out-of-range numbers are a poll error naming
the field (never a crash in the host sampler); one broken instance never breaks another's
metrics."""

from __future__ import annotations

import pytest
from prometheus_client import generate_latest

from tests.conftest import stats_fixture
from tests.observe.helpers import document, fake_server, send, worker
from uwsgitune.core.address import parse_address
from uwsgitune.core.derive import Tracker
from uwsgitune.core.model import StatsDoc, parse_stats
from uwsgitune.core.samples import Poll
from uwsgitune.exporter.collector import registry_for
from uwsgitune.pipeline import InstanceState
from uwsgitune.sources.poller import Observer

HOSTILE = [
    ("master-pid-negative", document(pid=-1), "pid"),
    ("master-pid-2**31", document(pid=2**31), "pid"),
    ("worker-pid-2**31", document(workers=[worker(1, 2**31)]), "workers.0.pid"),
    ("400-digit-counter", document(workers=[worker(1, 5, requests=10**400)]), "workers.0.requests"),
    (
        "400-digit-float",
        document(workers=[worker(1, 5, last_spawn=10**400)]),
        "workers.0.last_spawn",
    ),
]


@pytest.mark.parametrize(("name", "raw", "field"), HOSTILE, ids=[h[0] for h in HOSTILE])
def test_out_of_range_numbers_are_a_poll_error(name: str, raw: bytes, field: str) -> None:
    with fake_server(send(raw)) as addr:
        poll = Observer(parse_address(addr)).poll()  # the real host sampler: nothing raises
    assert not poll.ok and poll.error is not None
    assert f"({field}: " in poll.error and poll.error.startswith(f"{addr}: "), poll.error


def _state(uri: str, doc: StatsDoc) -> InstanceState:
    poll = Poll(uri, 1000.0, 10.0, doc=doc)
    return InstanceState(uri, "app", "observe", Tracker(uri).update(poll), poll)


def test_one_broken_instance_never_breaks_another() -> None:
    good = parse_stats(stats_fixture("processes.json"))
    # A value the model would refuse, smuggled past it: the collector's safety net.
    huge = good.workers[0].model_copy(update={"requests": 10**400})
    broken = good.model_copy(update={"workers": (huge, *good.workers[1:])})
    states = [_state("unix:///bad.sock", broken), _state("unix:///good.sock", good)]
    text = generate_latest(registry_for(lambda: states)).decode()
    assert 'uwsgi_up{stats_uri="unix:///good.sock"} 1.0' in text
    assert 'uwsgi_up{stats_uri="unix:///bad.sock"} 0.0' in text
    assert 'uwsgi_worker_requests_total{stats_uri="unix:///good.sock"' in text
    assert 'uwsgi_worker_requests_total{stats_uri="unix:///bad.sock"' not in text
