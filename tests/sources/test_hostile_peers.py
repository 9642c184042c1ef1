"""Issue 14.4: hostile or broken stats peers. Out-of-range numbers are a poll error naming
the field (never a crash in the host sampler); one broken instance never breaks another's
metrics."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import msgspec
import pytest
from prometheus_client import generate_latest

from tests.conftest import stats_fixture
from tests.support.instances import document, fake_server, read_then_send, send, worker
from tests.tuner.plant import Plant
from uwsgitune.actuate.service import TunerService, TunerSetup
from uwsgitune.cli.main import main
from uwsgitune.core.address import parse_address
from uwsgitune.core.derive import Tracker
from uwsgitune.core.model import StatsDoc, parse_stats
from uwsgitune.core.samples import Poll
from uwsgitune.exporter.metrics import registry_for
from uwsgitune.pipeline import InstanceState
from uwsgitune.sources.poller import LiveSource
from uwsgitune.tuner import TunerSettings

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
        poll = LiveSource(parse_address(addr)).poll()  # the real host sampler: nothing raises
    assert not poll.ok and poll.error is not None
    assert f"({field}: " in poll.error and poll.error.startswith(f"{addr}: "), poll.error


def _state(uri: str, doc: StatsDoc) -> InstanceState:
    poll = Poll(uri, 1000.0, 10.0, doc=doc)
    return InstanceState(uri, "app", "observe", Tracker(uri).update(poll), poll)


def test_one_broken_instance_never_breaks_another() -> None:
    good = parse_stats(stats_fixture("processes.json"))
    # A value the model would refuse, smuggled past it: the collector's safety net.
    huge = msgspec.structs.replace(good.workers[0], requests=10**400)
    broken = msgspec.structs.replace(good, workers=(huge, *good.workers[1:]))
    states = [_state("unix:///bad.sock", broken), _state("unix:///good.sock", good)]
    text = generate_latest(registry_for(lambda: states)).decode()
    assert 'uwsgi_up{stats_uri="unix:///good.sock"} 1.0' in text
    assert 'uwsgi_up{stats_uri="unix:///bad.sock"} 0.0' in text
    assert 'uwsgi_worker_requests_total{stats_uri="unix:///good.sock"' in text
    assert 'uwsgi_worker_requests_total{stats_uri="unix:///bad.sock"' not in text


ESCAPES = "\x1b]0;owned\x07\x1b[2J\x9b1m\u202e"


def test_terminal_escapes_in_a_status_line_are_never_printed(
    capsys: pytest.CaptureFixture[str],
) -> None:
    answer = f"HTTP/1.0 {ESCAPES}404 Gone\r\n\r\n".encode()
    with fake_server(read_then_send(answer)) as addr:
        assert main(["watch", f"http://{addr}", "--once"]) == 1
    err = capsys.readouterr().err
    assert "HTTP \\x1b]0;owned\\x07" in err, err  # shown, escaped
    assert not any(c in err for c in "\x1b\x07\x9b\u202e"), err


def test_terminal_escapes_in_a_document_are_never_printed(
    capsys: pytest.CaptureFixture[str],
) -> None:
    busy = worker(1, 5, status="busy" + ESCAPES)
    busy["cores"][0] |= {"in_request": 1, "vars": [f"PATH_INFO=/{ESCAPES}", "REQUEST_METHOD=GET"]}
    socket = {"name": f"/run/{ESCAPES}.sock", "proto": "uwsgi" + ESCAPES}
    raw = document(version=ESCAPES, workers=[busy], sockets=[socket])
    with fake_server(send(raw)) as addr:
        assert main(["watch", addr, "--once"]) == 0
    out = capsys.readouterr().out
    assert "\\x1b" in out and not any(c in out for c in "\x1b\x07\x9b\u202e"), out


@pytest.fixture
def foreign_pid() -> Iterator[int]:
    """A process of another uid: a `sleep` as nobody when we are root, else init."""
    if os.getuid() != 0:
        yield 1
        return
    proc = subprocess.Popen(["sleep", "30"], user=65534)
    try:
        yield proc.pid
    finally:
        proc.kill()  # only the process this fixture started, by its handle
        proc.wait(5)


def test_apply_refuses_a_stats_socket_served_by_another_uid(
    tmp_path: Path, foreign_pid: int
) -> None:
    """SO_PEERCRED: the socket is served by this test's uid, the master it names runs as
    another: nothing is applied (observing stays allowed)."""
    for pid, refused in ((foreign_pid, True), (os.getpid(), False)):
        path = str(tmp_path / f"{pid}.sock")
        with fake_server(send(document(pid=pid)), unix_path=path) as addr:
            poll = LiveSource(parse_address(addr)).poll()
        assert poll.ok and poll.peer_uid == os.getuid()
        frames = tuple(Plant(live=2, cpus=8, io_ms=50).frame(float(t)) for t in range(6))
        state = InstanceState(addr, frame=frames[-1], poll=poll, frames=frames)
        fifo = tmp_path / f"{pid}.fifo"  # none there: a change the peer check lets through
        setup = TunerSetup(parse_address(addr), fifo, _settings, "apply", lock_dir=tmp_path)
        tuner = TunerService(setup, _no_poll, mono=partial(float, frames[-1].mono))
        result = tuner.step(state)
        tuner.close()
        assert result is not None and result.decision is not None
        assert result.decision.is_change and result.mode == "apply"
        assert result.stopped is not None
        assert ("is served by uid" in result.stopped) is refused, result.stopped
        assert ("no such file" in result.stopped) is not refused, result.stopped


def _settings(_slots: int | None) -> TunerSettings:
    return TunerSettings(max_workers=8)


def _no_poll() -> InstanceState:
    raise AssertionError("a FIFO change waits on no poll")
