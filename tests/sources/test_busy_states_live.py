"""The busy workers' scheduler states on a real uWSGI (`Frame.busy_blocked`): a worker in a
request that sleeps (`/io/N`, as one waiting on a database does) reads asleep, one in a
request that burns CPU (`/cpu/N`) reads runnable, whatever the machine's load: a spinning
process is running or waiting for a CPU, never asleep."""

from __future__ import annotations

import threading
import time
import urllib.request
from collections.abc import Callable

import pytest

from tests.sources.test_live import Watch
from tests.uwsgi_harness import url
from uwsgitune.launch import UwsgiProcess

pytestmark = pytest.mark.uwsgi


def _get(address: str) -> None:
    try:
        with urllib.request.urlopen(address, timeout=60) as r:
            r.read()
    except OSError:
        pass  # the instance stopped under it: the test's verdict is already made


def test_a_sleeping_request_reads_blocked_a_burning_one_does_not(
    uwsgi: Callable[..., UwsgiProcess],
) -> None:
    proc = uwsgi(processes=3)
    watch = Watch(str(proc.options["stats"]))
    watch.frame()
    clients = [
        threading.Thread(target=_get, args=(url(proc, path),), daemon=True)
        for path in ("/io/6000", "/cpu/6000")
    ]
    for c in clients:
        c.start()
    seen = []
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:  # until both requests are in service at a poll
            f = watch.frame()
            seen.append((f.busy, f.busy_blocked))
            if f.busy == 2:
                break
            time.sleep(0.2)
        # each poll while both are in service: the sleeper asleep, the burner runnable
        polls = [watch.frame() for _ in range(3)]
    finally:
        for c in clients:
            c.join(timeout=30)
    both = [(f.busy, f.busy_blocked) for f in polls if f.busy == 2]
    assert both and all(b == 1 for _, b in both), (seen, both)
    # once the workers show idle (a worker's status moves a moment after its answer): none
    end = time.monotonic() + 30
    idle = watch.frame()
    while idle.busy and time.monotonic() < end:
        time.sleep(0.2)
        idle = watch.frame()
    assert (idle.busy, idle.busy_blocked) == (0, 0), idle
