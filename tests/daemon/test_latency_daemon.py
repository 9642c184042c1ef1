"""The daemon's request log address: busy at start, it is said once and bound again while the
polls go on; a log-format mismatch and an untrusted sender are logged when they begin and
end (the real daemon, no uWSGI needed for the address; the log lines from states)."""

from __future__ import annotations

import io
import itertools
import logging
import socket
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest

from tests.daemon.conftest import DaemonProc
from tests.support.latency import log_line, recorder_with, view_of
from uwsgitune.daemon import logs
from uwsgitune.daemon.config import InstanceConfig
from uwsgitune.daemon.instance import InstanceRunner
from uwsgitune.pipeline import InstanceState


def _wait(d: DaemonProc, event: str, timeout: float = 20.0) -> list[str]:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        got = d.events(event)
        if got:
            return got
        time.sleep(0.1)
    raise AssertionError(f"no {event} in 20 s: {d.log_lines()}")


def test_a_busy_address_is_said_once_and_bound_when_free(
    start_daemon: Callable[..., DaemonProc],
) -> None:
    taken = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    taken.bind(("127.0.0.1", 0))
    addr = f"127.0.0.1:{taken.getsockname()[1]}"
    d = start_daemon("--stats", "/nonexistent/uwsgi-stats.sock", "--latency", addr)
    try:
        (busy,) = _wait(d, "latency_unavailable")
        assert "Address already in use" in busy and "retry_seconds=5" in busy
        time.sleep(6)  # a retry at 5 s finds it still held: not said again
        assert len(d.events("latency_unavailable")) == 1 and not d.events("latency_listening")
        taken.close()
        (bound,) = _wait(d, "latency_listening")
        assert addr in bound
        assert d.proc.poll() is None  # it never stopped polling
    finally:
        taken.close()


@pytest.fixture
def lines() -> Any:
    buf = io.StringIO()
    logs.setup("text", stream=buf)
    yield lambda: [ln.split("event=")[1].split()[0] for ln in buf.getvalue().splitlines()]
    logging.getLogger(logs.LOGGER).handlers.clear()


def test_mismatch_and_trust_are_logged_when_they_begin_and_end(lines: Any) -> None:
    runner = InstanceRunner(InstanceConfig(name="app", stats="/nonexistent.sock"))
    good = view_of(recorder_with([(10.0, [log_line(1000)] * 20)]), 10.0)
    bad = view_of(recorder_with([(10.0, [b"GET / 200 in 3 ms\n"] * 20)]), 10.0)
    assert bad.mismatch is not None and good.mismatch is None
    states = [
        InstanceState("u"),
        InstanceState("u", latency=good),
        InstanceState("u", latency=bad),
        InstanceState("u", latency=bad),
        InstanceState("u", latency=replace(bad, trusted=False, trust_note="not proved")),
        InstanceState("u", latency=good),
    ]
    for old, new in itertools.pairwise(states):
        runner._log_latency(old, new)
    assert lines() == [
        "latency_format_mismatch",
        "latency_untrusted",
        "latency_format_ok",
        "latency_trusted",
    ]
