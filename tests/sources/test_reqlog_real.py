"""The request log receiver and the sender proof against a real uWSGI 2.0 (docs/latency.md).

What uWSGI sends (one line per datagram, the tail, `-` for an absent stamp), what happens to
the user's own request log, and who sent it: the master's datagrams are proved, a local
stranger's are not, and after a reload the master's new port is proved afresh.
"""

from __future__ import annotations

import os
import re
import socket
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.uwsgi_harness import url
from uwsgitune.launch import UwsgiProcess
from uwsgitune.loadgen import LoadResult, run_closed
from uwsgitune.sources.logsender import SenderCheck
from uwsgitune.sources.reqlog import (
    DEFAULT_LINE_FORMAT,
    LOG_TAIL,
    MEMORY_REPORT_FORMAT,
    Drained,
    Receiver,
)

Start = Callable[..., UwsgiProcess]


def get(proc: UwsgiProcess, path: str, stamp: str | None = None) -> None:
    headers = {"X-Request-Start": stamp} if stamp else {}
    req = urllib.request.Request(url(proc, path), headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=5) as answer:
            answer.read()
    except OSError:  # /error: an exception before any answer, the connection closed
        pass


def collect(rx: Receiver, n: int, timeout: float = 8.0) -> dict[tuple[str, int], list[bytes]]:
    """Drain until `n` lines arrived (or the timeout)."""
    out: dict[tuple[str, int], list[bytes]] = {}
    end = time.monotonic() + timeout
    while time.monotonic() < end and sum(map(len, out.values())) < n:
        got: Drained = rx.drain()
        for src, lines in got.lines.items():
            out.setdefault(src, []).extend(lines)
        time.sleep(0.02)
    return out


def with_logger(uwsgi: Start, rx: Receiver, fmt: str, **more: object) -> UwsgiProcess:
    opts: dict[str, object] = {
        "disable_logging": None,
        "req_logger": f"socket:{rx.address[0]}:{rx.address[1]}",
        "log_format": fmt,
    }
    opts.update(more)
    return uwsgi(processes=2, **opts)


TAIL = re.compile(rb"^127\.0\.0\.1 uwt1 (\d{16}) (\d+) (\d{3}) (\d+) (\d+) (\w+) \[(.*)\] (.*)$")


def test_each_request_is_one_datagram_one_line_with_the_tail(uwsgi: Start) -> None:
    with Receiver("127.0.0.1:0") as rx:
        proc = with_logger(uwsgi, rx, "%(addr) " + LOG_TAIL)
        get(proc, "/hello?token=1")
        get(proc, "/cpu/2", stamp="t=1795717026.520")
        get(proc, "/error")
        got = collect(rx, 3)
        ((src, lines),) = got.items()  # one sender
        assert src[0] == "127.0.0.1" and len(lines) == 3
        assert rx.totals.cut == 0 and rx.totals.received == 3  # each ended in its newline
        fields = {m.group(8): m.groups() for m in map(TAIL.match, lines) if m}
        assert set(fields) == {b"/hello?token=1", b"/cpu/2", b"/error"}
        assert fields[b"/hello?token=1"][6] == b"-"  # no X-Request-Start: `-`
        assert fields[b"/cpu/2"][6] == b"t=1795717026.520"
        assert fields[b"/error"][2] == b"500" and fields[b"/cpu/2"][2] == b"200"
        assert int(fields[b"/cpu/2"][1]) >= 2000  # micros: at least the 2 ms of CPU
        assert abs(int(fields[b"/cpu/2"][0]) / 1e6 - time.time()) < 60  # tmicros: epoch µs


def test_disable_logging_sends_only_forced_lines(uwsgi: Start) -> None:
    with Receiver("127.0.0.1:0") as rx:
        proc = with_logger(uwsgi, rx, LOG_TAIL, disable_logging=True, log_5xx=True)
        for _ in range(3):
            get(proc, "/hello")
        get(proc, "/error")  # forced by log-5xx: the one line that goes out
        time.sleep(1.0)
        got = collect(rx, 4, timeout=2.0)
        lines = [line for v in got.values() for line in v]
        assert len(lines) == 1 and lines[0].endswith(b" GET [-] /error")


def test_the_users_log_keeps_its_lines_only_through_a_second_req_logger(
    uwsgi: Start, tmp_path: Path
) -> None:
    """`req-logger` takes the request lines away from the general log (here stderr): the
    user keeps them with `req-logger = file:...`, which gets the same line as the datagram."""
    reqlog = tmp_path / "requests.log"
    with Receiver("127.0.0.1:0") as rx:
        sock = f"socket:{rx.address[0]}:{rx.address[1]}"
        proc = with_logger(
            uwsgi,
            rx,
            DEFAULT_LINE_FORMAT + " " + LOG_TAIL,
            req_logger=[sock, f"file:{reqlog}"],
        )
        get(proc, "/hello")
        get(proc, "/io/1")
        sent = [line for v in collect(rx, 2).values() for line in v]
        assert len(sent) == 2
        time.sleep(0.5)
        assert sorted(reqlog.read_bytes().splitlines()) == sorted(sent)
        general = proc.log.read_text()
        assert " GET /hello " not in general and " GET /io/1 " not in general


def _normalised(line: str) -> str:
    line = re.sub(r"\[[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d [\d:]{8} \d{4}\]", "[DATE]", line)
    return re.sub(r"\d+", "N", line)


def test_the_default_line_spelled_as_a_log_format_is_the_default_line(
    uwsgi: Start, tmp_path: Path
) -> None:
    """What the doctor prints to keep the user's default line: the same line, but for the
    app id and request counters (no variable holds them) and `(-)` for an empty user."""
    plain = uwsgi(processes=1, disable_logging=None)
    get(plain, "/hello")
    time.sleep(0.5)
    (default,) = [ln for ln in plain.log.read_text().splitlines() if " GET /hello " in ln]
    spelled_log = tmp_path / "spelled.log"
    spelled = uwsgi(
        processes=1,
        disable_logging=None,
        req_logger=f"file:{spelled_log}",
        log_format=MEMORY_REPORT_FORMAT + DEFAULT_LINE_FORMAT,
    )
    get(spelled, "/hello")
    time.sleep(0.5)
    (mine,) = spelled_log.read_text().splitlines()
    expected = _normalised(default).replace("app: N|req: N/N", "app: -|req: -/-")
    assert _normalised(mine) == expected.replace(" () ", " (-) ")


def test_the_masters_datagrams_are_proven_and_a_strangers_are_not(uwsgi: Start) -> None:
    with Receiver("127.0.0.1:0") as rx:
        proc = with_logger(uwsgi, rx, LOG_TAIL)
        check = SenderCheck(min_interval=0.0)
        try:
            get(proc, "/hello")
            ((master_src, _),) = collect(rx, 1).items()
            assert check.verdict(master_src, proc.pid).proven
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as stranger:
                stranger.sendto(b"uwt1 1 1 200 1 1 GET [-] /forged\n", rx.address)
                ((foreign_src, lines),) = collect(rx, 1).items()
                assert lines == [b"uwt1 1 1 200 1 1 GET [-] /forged"]
                verdict = check.verdict(foreign_src, proc.pid)
                assert not verdict.proven and "not the master's" in verdict.reason
            # the master's socket, checked against another process: not proven
            assert not check.verdict(master_src, os.getpid()).proven

            # a reload re-executes the master: same pid, a new logger socket and port
            proc.fifo_write("r")
            end = time.monotonic() + 20
            new_src = master_src
            while new_src == master_src and time.monotonic() < end:
                get(proc, "/hello")
                got = collect(rx, 1, timeout=1.0)
                new_src = next(iter(got), master_src)
            assert new_src != master_src and proc.alive()
            assert check.verdict(new_src, proc.pid).proven
        finally:
            check.close()


@pytest.fixture
def stranger() -> Iterator[socket.socket]:
    """A local process's UDP socket, open for the whole test (so its proof can be tried)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        yield sock


def test_a_foreign_flood_is_counted_and_the_masters_lines_stay_proven(
    uwsgi: Start, stranger: socket.socket
) -> None:
    """A local stranger floods the port with empty, oversized and malformed datagrams while
    uWSGI sends its lines: every drain stays within its bound, the bad ones are counted, the
    master's lines still arrive and are proven, the stranger's are not."""
    with Receiver("127.0.0.1:0") as rx:
        proc = with_logger(uwsgi, rx, LOG_TAIL)
        stop = threading.Event()

        def flood() -> None:
            junk = [b"", b"x" * (rx.max_size + 100), b"\xff\xfe garbage uwt1 ] [\n", b"uwt1\n"]
            for i in range(40_000):
                if stop.is_set():
                    break
                stranger.sendto(junk[i % len(junk)], rx.address)

        flooder = threading.Thread(target=flood)
        flooder.start()
        served: list[LoadResult] = []
        loader = threading.Thread(
            target=lambda: served.append(run_closed(url(proc, "/hello"), 2, 5.0, 300))
        )
        loader.start()
        check = SenderCheck(min_interval=0.0)
        sources: dict[tuple[str, int], int] = {}
        try:
            while loader.is_alive() or flooder.is_alive():
                got = rx.drain(max_datagrams=500, max_bytes=64 * 1024)
                assert got.received + got.oversized + got.empty <= 500
                assert sum(len(ln) for v in got.lines.values() for ln in v) < 64 * 1024 + 16384
                for src, lines in got.lines.items():
                    sources[src] = sources.get(src, 0) + len(lines)
                time.sleep(0.005)
        finally:
            stop.set()
            flooder.join(10)
            loader.join(10)
        time.sleep(0.3)
        for src, lines in rx.drain().lines.items():
            sources[src] = sources.get(src, 0) + len(lines)
        proven = {src: n for src, n in sources.items() if check.proven(src, proc.pid)}
        check.close()
        assert len(proven) == 1 and len(sources) == 2  # the master's, and the stranger's
        (n,) = proven.values()
        t = rx.totals
        assert 0 < n <= served[0].ok
        assert n == served[0].ok or t.kernel_drops > 0  # a line missing is a drop counted
        assert t.oversized > 0 and t.empty > 0 and proc.alive()
