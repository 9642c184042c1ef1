"""The real `uwsgitune daemon` against real uWSGI instances: scrape, SIGHUP, SIGTERM."""

from __future__ import annotations

import signal
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.daemon.conftest import DaemonProc
from tests.daemon.helpers import EXPORTER_NAMES, http_get, scrape, scrape_until, value, wait_for
from tests.uwsgi_harness import url
from uwsgitune.launch import UwsgiProcess
from uwsgitune.loadgen import run_closed

pytestmark = pytest.mark.uwsgi

CONFIG = """
[daemon]
metrics_listen = "127.0.0.1:@PORT@"

[[instance]]
name = "a"
stats = "{a}"
interval = 0.2

[[instance]]
name = "b"
stats = "{b}"
interval = 0.2

[[instance]]
name = "hung"
stats = "{hung}"
timeout = 60
"""


def uri(path: str) -> str:
    return f"unix://{path}"


def polls(d: DaemonProc, stats: str) -> float:
    return value(scrape(d.port), "uwsgitune_poll_duration_seconds_count", stats_uri=uri(stats)) or 0


def test_daemon_serves_reloads_and_stops(
    uwsgi: Callable[..., UwsgiProcess], start_daemon: Callable[..., DaemonProc]
) -> None:
    a, b = uwsgi(processes=2), uwsgi(processes=3)
    hung_path = str(Path(a.workdir) / "hung.sock")
    with socket.socket(socket.AF_UNIX) as hung:  # connects, never answers: a hung master
        hung.bind(hung_path)
        hung.listen(16)
        text = CONFIG.format(a=a.stats, b=b.stats, hung=hung_path)
        d = start_daemon(config=text)
        assert any(m.startswith(b"READY=1") for m in d.notifications(timeout=10))
        # Each instance polls on its own thread: b can be up before a's first poll ends.
        samples = scrape_until(
            d.port, lambda s: all(value(s, "uwsgi_up", stats_uri=uri(x.stats)) == 1 for x in (a, b))
        )
        assert value(samples, "uwsgi_workers", stats_uri=uri(a.stats)) == 2
        assert value(samples, "uwsgi_workers", stats_uri=uri(b.stats)) == 3
        own = ("uwsgi_exporter_", "uwsgi_metric")  # self-metrics, uWSGI's metrics subsystem
        assert {n for n in samples if n.startswith("uwsgi_") and not n.startswith(own)} <= (
            EXPORTER_NAMES
        )
        # The hung instance (its first poll waits 60 s): down, and it holds no one back.
        assert value(samples, "uwsgi_up", stats_uri=uri(hung_path)) == 0
        before = polls(d, a.stats)
        time.sleep(1.0)
        assert polls(d, a.stats) - before >= 3
        _load_shows_in_metrics(d, a)
        _sighup_keeps_serving(d, a, b)
        _disconnect_is_logged_once(d, a, b)
        assert b"WATCHDOG=1" in d.notifications()  # drained: a full queue drops, never blocks
        t0 = time.monotonic()
        assert d.stop(signal.SIGTERM) == 0  # the poll of the hung socket is still in flight
        assert time.monotonic() - t0 < 5
    notes = d.notifications(timeout=0.5)
    assert b"STOPPING=1" in notes
    assert d.events("stopped") and "Traceback" not in d.log.read_text()
    assert not d.events("rules_failed") and not d.events("instance_failed")


def _load_shows_in_metrics(d: DaemonProc, a: UwsgiProcess) -> None:
    run_closed(url(a, "/io/20"), concurrency=2, duration=1.0, max_requests=200)
    s = scrape_until(
        d.port,
        lambda s: (
            value(s, "uwsgitune_mean_response_time_seconds", stats_uri=uri(a.stats)) is not None
        ),
    )
    served = sum(
        x.value for x in s["uwsgi_worker_requests_total"] if x.labels["stats_uri"] == uri(a.stats)
    )
    assert served >= 10


def _sighup_keeps_serving(d: DaemonProc, a: UwsgiProcess, b: UwsgiProcess) -> None:
    assert d.config is not None
    failures: list[int] = []
    stop = threading.Event()

    def scraper() -> None:
        while not stop.is_set():
            status = http_get(d.port)[0]
            if status != 200:
                failures.append(status)

    thread = threading.Thread(target=scraper)
    thread.start()
    try:
        before = polls(d, a.stats)
        old = d.config.read_text()
        new = old.replace('name = "b"', 'name = "gone"').replace(
            'stats = "' + b.stats + '"\n', 'stats = "' + b.stats + '"\nmode = "recommend"\n'
        )
        new = new.replace('name = "a"\n', 'name = "a"\nmode = "recommend"\n')
        d.config.write_text(new)
        d.proc.send_signal(signal.SIGHUP)
        wait_for(lambda: d.events("reloaded"))
        s = scrape(d.port)
        assert value(s, "uwsgitune_instance_info", stats_uri=uri(a.stats), mode="recommend") == 1
        assert polls(d, a.stats) >= before  # the same tracker: its counts go on
        assert (
            d.events("instance_changed")
            and d.events("instance_removed")
            and d.events("instance_added")
        )
        d.config.write_text(new.replace("interval = 0.2", "interval = 0", 1))
        d.proc.send_signal(signal.SIGHUP)
        failed = wait_for(lambda: d.events("reload_failed"))
        assert "instance[0].interval: must be >= 0.1 (got 0)" in failed[0]
        assert value(scrape(d.port), "uwsgi_up", stats_uri=uri(a.stats)) == 1
    finally:
        stop.set()
        thread.join()
    assert not failures


def _disconnect_is_logged_once(d: DaemonProc, a: UwsgiProcess, b: UwsgiProcess) -> None:
    a.stop()
    wait_for(lambda: value(scrape(d.port), "uwsgi_up", stats_uri=uri(a.stats)) == 0)
    time.sleep(1.0)  # several more failed polls
    s = scrape(d.port)
    assert value(s, "uwsgitune_poll_errors_total", stats_uri=uri(a.stats)) >= 2  # type: ignore[operator]
    assert not [x for x in s["uwsgi_worker_busy"] if x.labels["stats_uri"] == uri(a.stats)]
    assert len([x for x in d.events("disconnected") if "instance=a " in x]) == 1
    assert len(d.log_lines()) < 30  # state changes only, never a line per poll


def test_bad_config_is_one_line_and_exit_2(
    start_daemon: Callable[..., DaemonProc], tmp_path: Path
) -> None:
    d = start_daemon(config='[[instance]]\nname = "a"\nstats = "/x.sock"\ninterval = 0\n')
    assert d.proc.wait(10) == 2
    lines = d.log_lines()
    assert lines == [f"uwsgitune: {d.config}: instance[0].interval: must be >= 0.1 (got 0)"]


def test_flags_mode_and_a_taken_port(
    uwsgi: Callable[..., UwsgiProcess], start_daemon: Callable[..., DaemonProc]
) -> None:
    a = uwsgi(processes=1)
    d = start_daemon("--stats", a.stats, "--log-format", "json", "--interval", "0.2")
    wait_for(lambda: value(scrape(d.port), "uwsgi_up", stats_uri=uri(a.stats)) == 1)
    assert http_get(d.port, "/")[0] == 200  # the landing page
    assert http_get(d.port, "/nope")[0] == 404
    with socket.create_connection(("127.0.0.1", d.port)):  # a client that never sends
        d.proc.send_signal(signal.SIGHUP)
        wait_for(lambda: '"event": "reload_skipped"' in d.log.read_text())
        assert d.stop(signal.SIGINT) == 0
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        taken = start_daemon(
            "--stats", a.stats, "--metrics-listen", f"127.0.0.1:{s.getsockname()[1]}"
        )
        assert taken.proc.wait(10) == 1
    assert len(taken.log_lines()) == 1 and "cannot serve metrics on" in taken.log_lines()[0]
