"""The request log's stage: who may put lines in the picture, coverage, Little's estimate.

Real sockets on loopback, a real sender proof (sock_diag and /proc): lines this process sends
are proved when this process is named the master; the same lines are refused when another
process is; when the proof cannot be made they are shown but marked untrusted.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from tests.support.frames import frame, tcp
from tests.support.latency import log_line
from uwsgitune.core.frame import Frame
from uwsgitune.pipeline.latencystage import BATCH_MAX, BURST_RATE, LatencyStage, _little_ms
from uwsgitune.sources.logsender import SenderCheck
from uwsgitune.sources.reqlog import Drained, Receiver


class Clock:
    def __init__(self, t: float = 5000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


@pytest.fixture
def sender() -> Iterator[socket.socket]:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    yield s
    s.close()


def send(s: socket.socket, stage: LatencyStage, lines: list[bytes]) -> None:
    host, port = stage.receiver.address
    for line in lines:
        s.sendto(line, (host, port))


def drain_all(stage: LatencyStage, want: int, timeout: float = 10.0) -> int:
    """Drain until `want` datagrams were read (they are on loopback: at once, but never
    assumed)."""
    got = 0
    end = time.monotonic() + timeout
    while stage.receiver.totals.received < want and time.monotonic() < end:
        got += stage.drain_once()
        time.sleep(0.01)
    return got + stage.drain_once()


# Another process that sends one request log line to the port it reads, says so, and keeps
# its socket open (so the proof finds it, and not among the master's) until killed.
STRANGER = """
import socket, sys
port = int(sys.stdin.readline())
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.sendto(b"uwt1 1795732664212899 5233 200 1 2476 GET [-] /x\\n", ("127.0.0.1", port))
print("sent", flush=True)
sys.stdin.read()
"""


def rated(i: int, rps: float, dt: float = 1.0, **kw: object) -> Frame:
    f = frame(i)
    return replace(f, rps=rps, dt=dt, mono=1000.0 + i * dt, kind="ok", **kw)  # type: ignore[arg-type]


def test_the_masters_lines_are_recorded_and_trusted(sender: socket.socket) -> None:
    clock = Clock()
    stage = LatencyStage(("127.0.0.1", 0), clock=clock)
    try:
        stage.set_master(os.getpid())  # this process holds the sending socket
        send(sender, stage, [log_line(20_000 + i, wid=1 + i % 2) for i in range(50)])
        assert drain_all(stage, 50) == 50
        view = stage.view(None)
        assert view.lines == 50 and view.trusted and view.trust_note is None
        assert view.short.service is not None and view.short.service.count == 50
        assert sorted(view.short.workers) == [1, 2]
        assert view.refused == 0 and view.silent_for == 0.0
    finally:
        stage.close()


def test_a_strangers_lines_are_refused_and_counted(sender: socket.socket) -> None:
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    stage = LatencyStage(("127.0.0.1", 0))
    try:
        stage.set_master(other.pid)  # the "master" is another process: our socket is not its
        send(sender, stage, [log_line(1000)] * 20)
        assert drain_all(stage, 20) == 0
        view = stage.view(None)
        assert view.lines == 0 and view.refused == 20
        assert view.short.service is None
    finally:
        stage.close()
        other.kill()
        other.wait()


def test_a_strangers_line_between_the_masters_in_one_read_is_refused_and_counted(
    sender: socket.socket,
) -> None:
    """The master's datagrams and a stranger's, interleaved in the socket's queue, are read
    in one batch (recvmmsg): each is judged by its own source, so the stranger's line is
    refused and counted and the master's are all recorded."""
    stage = LatencyStage(("127.0.0.1", 0), clock=Clock())
    with subprocess.Popen(
        [sys.executable, "-c", STRANGER], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    ) as stranger:
        try:
            assert stage.receiver.batched
            stage.set_master(os.getpid())  # this process holds the master's socket
            send(sender, stage, [log_line(20_000 + i) for i in range(3)])
            assert stranger.stdin is not None and stranger.stdout is not None
            stranger.stdin.write(f"{stage.receiver.address[1]}\n".encode())
            stranger.stdin.flush()
            assert stranger.stdout.readline() == b"sent\n"  # queued after the master's three
            send(sender, stage, [log_line(30_000 + i) for i in range(3)])
            assert drain_all(stage, 7) == 6
            view = stage.view(None)
            assert view.lines == 6 and view.refused == 1 and view.trusted
            assert stage.receiver.totals.received == 7
        finally:
            stage.close()
            stranger.kill()


def test_lines_whose_sender_cannot_be_proved_are_shown_untrusted(
    sender: socket.socket, tmp_path: Path
) -> None:
    clock = Clock()
    # /proc/<pid>/fd unreadable (here: absent), as for a master of another user's
    check = SenderCheck(proc=tmp_path)
    stage = LatencyStage(("127.0.0.1", 0), check=check, clock=clock)
    try:
        stage.set_master(os.getpid())
        send(sender, stage, [log_line(5000)] * 10)
        assert drain_all(stage, 10) == 10
        view = stage.view(None)
        assert view.lines == 10 and not view.trusted
        assert view.trust_note is not None and "never acted on" in view.trust_note
        clock.t += 61  # a minute without unproven lines: trusted again
        assert stage.view(None).trusted
    finally:
        stage.close()


def test_nothing_is_drained_before_the_master_is_known(sender: socket.socket) -> None:
    stage = LatencyStage(("127.0.0.1", 0))
    try:
        stage.start()
        send(sender, stage, [log_line(1000)] * 5)
        time.sleep(0.3)  # the reader runs, but waits for a master to prove against
        assert stage.receiver.totals.received == 0
        stage.set_master(os.getpid())
        end = time.monotonic() + 10
        while stage.recorder.recorded < 5 and time.monotonic() < end:
            time.sleep(0.02)
        assert stage.view(None).lines == 5  # queued in the kernel meanwhile, none lost
    finally:
        stage.close()
    assert stage.receiver.fileno() == -1


def test_coverage_is_the_lines_over_the_requests_of_the_last_minute(
    sender: socket.socket,
) -> None:
    stage = LatencyStage(("127.0.0.1", 0))
    try:
        stage.set_master(os.getpid())
        assert stage.view(rated(0, rps=0.0)).coverage is None  # nothing counted yet
        send(sender, stage, [log_line(1000)] * 80)
        drain_all(stage, 80)
        assert stage.view(rated(1, rps=100.0)).coverage == pytest.approx(0.8)
        send(sender, stage, [log_line(1000)] * 100)
        drain_all(stage, 180)
        assert stage.view(rated(2, rps=100.0)).coverage == pytest.approx(0.9)
        # a minute later the first polls have left the window
        assert stage.view(rated(63, rps=100.0)).coverage == pytest.approx(0.0)
    finally:
        stage.close()


def test_a_sampled_line_counts_for_the_requests_it_stands_for(sender: socket.socket) -> None:
    """1 request in 20 logged: 5 lines over 100 requests counted is the whole sample."""
    stage = LatencyStage(("127.0.0.1", 0))
    try:
        stage.set_master(os.getpid())
        sampled = log_line(1000).replace(b" uwt1 ", b" uwk20 uwt1 ", 1)
        outside = log_line(1000, status=500).replace(b" uwt1 ", b" uwk- uwt- ", 1)
        send(sender, stage, [outside] * 2 + [sampled] * 5)  # in order: all in once 5 are
        drain_all(stage, 5)
        view = stage.view(rated(1, rps=100.0))
        assert view.sample_every == 20 and view.lines == 5
        assert view.coverage == pytest.approx(1.0)
        assert view.faults.get("unsampled") == 2
    finally:
        stage.close()


def test_littles_law_estimates_the_mean_queue_wait_from_the_listen_queue() -> None:
    frames = [rated(i, rps=200.0, sockets=(tcp(queue=10),)) for i in range(20)]
    assert _little_ms(frames, frames[-1]) == pytest.approx(10 / 200 * 1000)  # 50 ms
    empty = [rated(i, rps=200.0, sockets=(tcp(queue=None),)) for i in range(3)]  # type: ignore[arg-type]
    assert _little_ms(empty, empty[-1]) is None  # a unix socket's queue unknown: no guess
    idle = [rated(i, rps=0.0, sockets=(tcp(queue=3),)) for i in range(3)]
    assert _little_ms(idle, idle[-1]) is None


class CountingReceiver(Receiver):
    """A real receiver that counts the drains asked of it."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0))
        self.drains = 0

    def drain(self, *args: Any, **kwargs: Any) -> Drained:
        self.drains += 1
        return super().drain(*args, **kwargs)


def test_the_reader_takes_the_lines_in_batches_not_a_wake_per_datagram(
    sender: socket.socket,
) -> None:
    """A line every millisecond for half a second: the reader thread rests `batch_every`
    after a small drain, so a few dozen drains take all 500 lines (a wake per datagram
    costs more than the line: bench/results/latency_overhead.md), and none is lost."""
    rx = CountingReceiver()
    stage = LatencyStage(rx.address, receiver=rx, batch_every=0.05)
    stage.set_master(os.getpid())
    stage.start()
    try:
        for i in range(500):
            send(sender, stage, [log_line(5_000 + i, wid=1 + i % 4)])
            time.sleep(0.001)
        end = time.monotonic() + 10
        while stage.recorder.recorded < 500 and time.monotonic() < end:
            time.sleep(0.05)
    finally:
        stage.close()
    assert stage.recorder.recorded == 500
    assert rx.drains <= 60, rx.drains  # ~0.6 s / 0.05 s; a drain per datagram: hundreds


def test_the_rest_after_a_small_drain_lets_in_at_most_a_quarter_of_the_buffer() -> None:
    """The reader rests `batch_every`, or longer when even a burst of `BURST_RATE` lines/s
    would fill at most a quarter of its buffer meanwhile, and `BATCH_MAX` at most."""
    rx = CountingReceiver()
    stage = LatencyStage(rx.address, receiver=rx, batch_every=0.02)
    try:
        assert stage._rest(128) == 0.02  # the common 416 KiB buffer: the shortest rest
        # an 8 MiB buffer (~2,500 lines a quarter): what a burst fills a quarter in
        assert stage._rest(2500) == pytest.approx(2500 / BURST_RATE)
        assert 0.02 < stage._rest(2500) < BATCH_MAX
        assert stage._rest(10**6) == BATCH_MAX
    finally:
        stage.close()
