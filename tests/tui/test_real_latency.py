"""The request log end to end, against a real uWSGI sending it (issue 38): `watch --latency`
in a real terminal (tmux) shows the percentiles, the routes (`l`) and a worker's detail;
`record --latency` keeps each poll's latency and `watch --replay --json` shows it again.
One instance for all of it: each start costs seconds of CI."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.tui.tmux import Tmux, with_status
from tests.uwsgi_harness import url
from uwsgitune.core.logline import log_format
from uwsgitune.launch import UwsgiProcess

pytestmark = [pytest.mark.uwsgi, pytest.mark.slow]
BIN = Path(sys.executable).parent / "uwsgitune"
PATHS = ("/io/30", "/cpu/2", "/io/1")  # one slow route, two fast ones


def free_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def traffic(proc: UwsgiProcess, rounds: int) -> None:
    for _ in range(rounds):
        for path in PATHS:
            with urllib.request.urlopen(url(proc, path), timeout=5) as answer:
                answer.read()


def rows(screen: str) -> dict[str, int]:
    """The routes screen's rows: route -> count."""
    return {m[0]: int(m[1]) for m in re.findall(r"(/(?:io|cpu)/\d+) +(\d+) ", screen)}


def polled(recording: Path) -> bool:
    """The recording holds a poll (its header comes first)."""
    return recording.exists() and len(recording.read_text().splitlines()) >= 2


@pytest.fixture
def term() -> Iterator[Callable[[str], Tmux]]:
    sessions: list[Tmux] = []

    def start(command: str) -> Tmux:
        sessions.append(Tmux(command, width=120, height=40))
        return sessions[-1]

    yield start
    for s in sessions:
        s.kill()


def test_watch_record_and_replay_show_the_request_logs_percentiles(
    uwsgi: Callable[..., UwsgiProcess], term: Callable[[str], Tmux], tmp_path: Path
) -> None:
    addr = f"127.0.0.1:{free_udp_port()}"
    proc = uwsgi(
        processes=2,
        disable_logging=None,
        req_logger=f"socket:{addr}",
        log_format=log_format(None),
    )
    tui = term(with_status(f"{BIN} watch {proc.stats} --latency {addr} --interval 0.5"))
    tui.wait_for(lambda s: f"master {proc.pid}" in s)
    traffic(proc, 20)  # 60 requests, 20 per route

    def counted(screen: str) -> bool:
        return re.search(r"service 10s +[\d.]+ (µs|ms)", screen) is not None and "l routes" in (
            " ".join(screen.split())
        )

    screen = tui.wait_for(counted)
    assert "logged" in screen and "queue" in screen
    assert "UNTRUSTED" not in screen and "MISMATCH" not in screen  # the master, proved
    assert re.search(r"p99 60s +[\d.]+ ms", screen), screen
    tui.keys("l")
    every = {"/io/30": 20, "/cpu/2": 20, "/io/1": 20}  # live: the next polls complete it
    routes = tui.wait_for(lambda s: rows(s) == every, timeout=10)
    slow = re.search(r"/io/30 +20 +([\d.]+) ms", routes)
    assert slow is not None and 25 <= float(slow.group(1)) <= 200, routes  # 30 ms of waiting
    assert routes.index("/io/30") < routes.index("/io/1")  # by share of time
    tui.keys("Escape")
    tui.wait_for(lambda s: "slowest routes" not in s)
    tui.keys("Enter")  # the first worker's detail
    detail = tui.wait_for(lambda s: "latency of this worker" in s)
    assert re.search(r"60s +p50 [\d.]+ (µs|ms) +p95", detail), detail
    tui.keys("Escape")
    tui.wait_for(lambda s: "latency of this worker" not in s)
    tui.keys("q")
    assert tui.wait_dead(10) == 0

    recording = tmp_path / "run.jsonl"
    rec = subprocess.Popen(
        [
            BIN,
            "record",
            proc.stats,
            "--latency",
            addr,
            "-o",
            recording,
            "--duration",
            "2",
            "--interval",
            "0.5",
        ],
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not polled(recording):
            time.sleep(0.1)  # listening and polling: the lines from now on are received
        traffic(proc, 5)
        _, err = rec.communicate(timeout=15)
    finally:
        if rec.poll() is None:
            rec.kill()
    assert rec.returncode == 0, err
    polls = [json.loads(line) for line in recording.read_text().splitlines()[1:]]
    assert polls and all("latency" in p for p in polls)
    replay = subprocess.run(
        [BIN, "watch", "--replay", recording, "--json"],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    (inst,) = json.loads(replay.stdout)["instances"]
    latency = inst["latency"]
    assert latency["long"]["requests"] == 15 and latency["trusted"] is True
    assert {r["route"] for r in latency["long"]["routes"]} == set(PATHS)
    assert latency == polls[-1]["latency"]  # the last poll's, as recorded
