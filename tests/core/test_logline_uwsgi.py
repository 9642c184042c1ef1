"""A real uWSGI sends its request log to a UDP socket with uwsgitune's log-format: every line
parses, and the recorder sees what the requests were."""

from __future__ import annotations

import socket
import time
import urllib.request
from collections.abc import Iterator

import pytest

from tests.uwsgi_harness import url, uwsgi_instance
from uwsgitune.core.latency import LatencyRecorder
from uwsgitune.core.logline import RequestLine, log_format, parse_line

pytestmark = pytest.mark.uwsgi


@pytest.fixture
def receiver() -> Iterator[socket.socket]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    sock.settimeout(10.0)
    yield sock
    sock.close()


def test_a_real_uwsgi_sends_lines_that_parse_and_record(receiver: socket.socket) -> None:
    port = receiver.getsockname()[1]
    with uwsgi_instance(
        processes=2,
        disable_logging=None,
        req_logger=f"socket:127.0.0.1:{port}",
        log_format=log_format(),
    ) as proc:
        stamp = f"t={time.time():.3f}"
        requests = [
            ("/io/20?token=secret", {}),
            ("/cpu/5", {"X-Request-Start": stamp}),
            ("/", {}),
        ]
        for path, headers in requests:
            urllib.request.urlopen(
                urllib.request.Request(url(proc, path), headers=headers), timeout=10
            ).read()
        datagrams = [receiver.recv(65536) for _ in requests]
    lines = [parse_line(d) for d in datagrams]
    assert all(isinstance(x, RequestLine) for x in lines), datagrams
    got = {x.path: x for x in lines if isinstance(x, RequestLine)}
    assert set(got) == {"/io/20", "/cpu/5", "/"}
    assert 20_000 <= got["/io/20"].service_us < 2_000_000
    assert got["/cpu/5"].stamp == stamp and got["/"].stamp is None
    assert all(x.status == 200 and x.wid in (1, 2) for x in got.values())
    now_us = time.time() * 1e6
    assert all(abs(x.start_us - now_us) < 120e6 for x in got.values())
    rec = LatencyRecorder()
    assert rec.ingest(datagrams, now=1.0) == 3
    window = rec.window(1.0, 10)
    assert window.service is not None and window.service.max_ms >= 20
    assert window.queue is not None and window.queue.count == 1  # the stamped one
    assert window.stamps.format == "t=seconds (nginx ${msec})"
