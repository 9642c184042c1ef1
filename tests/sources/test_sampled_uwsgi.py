"""A real uWSGI with uwsgitune's sampling hook (uwsgitune/uwsgi_sample.py) logs about 1 request
in K, each line saying K; uWSGI's own forced lines (log-5xx) come outside the sample."""

from __future__ import annotations

import os
import socket
import threading
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator

import pytest

from tests.uwsgi_harness import url
from uwsgitune.actuate.doctor.reqlogsetup import HOOK
from uwsgitune.core.latency import LatencyRecorder
from uwsgitune.core.logline import LineFault, log_format, parse_line, sample_every
from uwsgitune.launch import UwsgiProcess

pytestmark = pytest.mark.uwsgi
Start = Callable[..., UwsgiProcess]


@pytest.fixture
def receiver() -> Iterator[socket.socket]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    sock.bind(("127.0.0.1", 0))
    yield sock
    sock.close()


def sampled_instance(uwsgi: Start, port: int, k: str) -> UwsgiProcess:
    return uwsgi(
        processes=2,
        disable_logging=True,
        log_5xx=True,
        req_logger=f"socket:127.0.0.1:{port}",
        log_format=log_format(sampled=True),
        uwsgitune_sample=k,
        **{"import": str(HOOK)},
    )


def get(proc: UwsgiProcess, path: str, n: int, clients: int = 2) -> None:
    def run(count: int) -> None:
        for _ in range(count):
            try:
                with urllib.request.urlopen(url(proc, path), timeout=10) as answer:
                    answer.read()
            except urllib.error.HTTPError as exc:
                exc.close()
            except OSError:  # /error: uWSGI logs a 500 and closes without an answer
                pass

    threads = [threading.Thread(target=run, args=(n // clients,)) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def drain(sock: socket.socket, quiet: float = 1.0) -> list[bytes]:
    """Every datagram until none came for `quiet` seconds (the master relays them late)."""
    sock.settimeout(quiet)
    got = []
    while True:
        try:
            got.append(sock.recv(65536))
        except TimeoutError:
            return got


def test_one_request_in_k_is_logged_and_forced_lines_stay_outside(
    uwsgi: Start, receiver: socket.socket
) -> None:
    proc = sampled_instance(uwsgi, receiver.getsockname()[1], "4")
    get(proc, "/hello", 800)
    get(proc, "/error", 40)
    lines = drain(receiver)
    parsed = [parse_line(d) for d in lines]
    hello = [d for d, p in zip(lines, parsed, strict=True) if not isinstance(p, LineFault)]
    outside = [p for p in parsed if p is LineFault.UNSAMPLED]
    assert len(lines) == len(hello) + len(outside), [p for p in parsed if p is not None][:5]
    assert {sample_every(d) for d in hello} == {4}
    ok = [p for p in parsed if not isinstance(p, LineFault) and p.path == "/hello"]
    errors = [p for p in parsed if not isinstance(p, LineFault) and p.path == "/error"]
    # 800 draws of 1/4: 200 expected, σ = 12.2; [120, 280] is 6.5σ either way
    assert 120 <= len(ok) <= 280, len(ok)
    assert all(p.status == 500 for p in errors)
    # log-5xx logs every error: those the hook drew carry the tail, the rest come outside
    assert len(errors) + len(outside) == 40, (len(errors), len(outside))
    rec = LatencyRecorder()
    assert rec.ingest(lines, now=1.0) == len(hello)
    assert rec.sample_every == 4 and rec.tally.mismatch() is None
    assert rec.tally.faults[LineFault.UNSAMPLED] == len(outside)


def test_a_k_that_is_no_count_logs_every_request_and_says_why(
    uwsgi: Start, receiver: socket.socket
) -> None:
    proc = sampled_instance(uwsgi, receiver.getsockname()[1], "often")
    get(proc, "/hello", 30)
    lines = drain(receiver)
    assert len(lines) == 30 and {sample_every(d) for d in lines} == {1}
    said = proc.log.read_text()
    assert "uwsgitune: uwsgitune-sample = often is not a whole number from 1 to 1000000" in said


def test_strict_mode_with_the_environment_samples_too(
    uwsgi: Start, receiver: socket.socket, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`strict = true` refuses `uwsgitune-sample`; `env = UWSGITUNE_SAMPLE=K` is read instead.
    uWSGI also reads every `UWSGI_*` variable of its environment as an option, so strict
    mode refuses CI's `UWSGI_EXPORTER` (the Go exporter's path, .ci/run): not passed on."""
    for name in [n for n in os.environ if n.startswith("UWSGI_")]:
        monkeypatch.delenv(name)
    proc = uwsgi(
        processes=2,
        strict=True,
        disable_logging=True,
        req_logger=f"socket:127.0.0.1:{receiver.getsockname()[1]}",
        log_format=log_format(sampled=True),
        env="UWSGITUNE_SAMPLE=3",
        **{"import": str(HOOK)},
    )
    get(proc, "/hello", 300)
    lines = drain(receiver)
    assert {sample_every(d) for d in lines} == {3}
    assert 40 <= len(lines) <= 170, len(lines)  # 100 expected, σ = 8.2
