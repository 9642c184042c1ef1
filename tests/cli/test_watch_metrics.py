"""`uwsgitune watch --plain --metrics-listen`: the same scrape target beside the line output."""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Callable

import pytest

from tests.daemon.conftest import UWSGITUNE
from tests.daemon.helpers import EXPORTER_NAMES, http_get, scrape_until, value
from uwsgitune.launch import UwsgiProcess, free_port

pytestmark = pytest.mark.uwsgi


def test_watch_plain_serves_metrics(uwsgi: Callable[..., UwsgiProcess]) -> None:
    a = uwsgi(processes=2)
    port = free_port()
    argv = [
        UWSGITUNE,
        "watch",
        a.stats,
        "--plain",
        "--interval",
        "0.2",
        "--metrics-listen",
        f"127.0.0.1:{port}",
    ]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        samples = scrape_until(port, lambda s: value(s, "uwsgi_workers") == 2)
        assert value(samples, "uwsgi_up", stats_uri=f"unix://{a.stats}") == 1
        own = ("uwsgi_exporter_", "uwsgi_metric")  # self-metrics, as the daemon has them
        uwsgi = {n for n in samples if n.startswith("uwsgi_") and not n.startswith(own)}
        assert uwsgi <= EXPORTER_NAMES
        assert value(samples, "uwsgi_exporter_scrapes_total") >= 1  # one state for every sink
        scrape_until(port, lambda s: "uwsgitune_busy_ratio" in s)  # rates from the 2nd poll
        assert http_get(port, "/nope")[0] == 404
    finally:
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=5)
    assert proc.returncode == 0, err
    assert out.count(b"\n") >= 2  # the plain lines went on while serving


def test_watch_refuses_a_bad_listen_address(uwsgi: Callable[..., UwsgiProcess]) -> None:
    out = subprocess.run(
        [UWSGITUNE, "watch", "/tmp/none.sock", "--plain", "--metrics-listen", ":9117"],
        capture_output=True,
        timeout=20,
    )
    assert out.returncode == 2
    assert out.stderr.decode().strip().startswith("uwsgitune: cannot serve metrics on :9117: ")
