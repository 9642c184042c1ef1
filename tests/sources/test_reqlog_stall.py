"""Never harm the instance: uWSGI keeps serving and obeying while uwsgitune does not read its
request log, or is not there at all (real uWSGI 2.0, `req-logger = socket:127.0.0.1:PORT`).

The master sends each line with a blocking `sendmsg`. Over UDP a full receive buffer, or a
port nobody binds, makes the kernel drop the datagram and the send return at once; so while
the receiver stalls (bound, never drained) or is gone, the app serves at the throughput of a
run without req-logger (wide margin: a busy 2-core machine), and a FIFO `+`, a graceful
reload `r` and a worker respawn all complete. The stall is real: the kernel counts the
datagrams it dropped on the stalled socket.

Why not unix: the same stall over a unix datagram socket blocks the master, and a FIFO `+`
waits until the reader goes (the last test). Sabotage (by hand, see the report): the
never-harm tests run over that unix socket fail (the master's stats stop answering).
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.uwsgi_harness import url
from uwsgitune.core.address import parse_address
from uwsgitune.core.model import StatsDoc, parse_stats
from uwsgitune.launch import UwsgiProcess, free_port
from uwsgitune.loadgen import LoadResult, LoadRun, run_closed
from uwsgitune.sources.netlink import Diag
from uwsgitune.sources.reqlog import LOG_TAIL, Receiver
from uwsgitune.sources.stats import read_stats

Start = Callable[..., UwsgiProcess]
STEADY = 4.0  # seconds of steady load per throughput phase
# uWSGI's own reload mercy is 60 s; a graceful reload under this suite's load on a 2-core
# machine once took over 20 s with no receiver involved. A stalled master never completes.
EVENT_TIMEOUT = 60.0


def doc(proc: UwsgiProcess) -> StatsDoc:
    return parse_stats(read_stats(parse_address(proc.stats), timeout=2.0))


def wait_doc(proc: UwsgiProcess, cond: Callable[[StatsDoc], bool], what: str) -> float:
    """Seconds until the stats satisfy `cond`; fails naming `what` past EVENT_TIMEOUT."""
    start = time.monotonic()
    while time.monotonic() - start < EVENT_TIMEOUT:
        try:
            if cond(doc(proc)):
                return time.monotonic() - start
        except Exception:
            pass
        time.sleep(0.1)
    raise AssertionError(f"{what} did not complete within {EVENT_TIMEOUT:g} s")


def start(uwsgi: Start, logger: str | None) -> UwsgiProcess:
    opts: dict[str, object] = {
        "processes": 4,
        "cheaper": 1,
        "cheaper_initial": 2,
        "cheaper_algo": "manual",
    }
    if logger is not None:
        opts |= {"disable_logging": None, "req_logger": logger, "log_format": LOG_TAIL}
    return uwsgi(**opts)


def steady(proc: UwsgiProcess) -> LoadResult:
    return run_closed(url(proc, "/hello"), 4, STEADY, max_requests=40_000)


def events_under_load(
    proc: UwsgiProcess, seconds: float = 12.0
) -> tuple[LoadResult, dict[str, float]]:
    """A bounded load runs while the FIFO `+`, a graceful reload and a worker respawn happen;
    each must complete, and the instance serves on after them. Returns the load's result and
    each event's seconds. The load ends once that is shown (`seconds` at most)."""
    out: list[LoadResult] = []
    run = LoadRun(url(proc, "/hello"), duration=seconds, max_requests=60_000)
    load = threading.Thread(target=lambda: out.append(asyncio.run(run.closed_loop(4))))
    load.start()
    took: dict[str, float] = {}
    try:
        time.sleep(0.5)
        live = len(doc(proc).live_workers)
        proc.fifo_write("+")
        took["+"] = wait_doc(proc, lambda d: len(d.live_workers) == live + 1, "FIFO +")
        # Before `r`, the new worker serves: one that has not yet set its own SIGHUP handler
        # (core/uwsgi.c, `uwsgi_unix_signal(SIGHUP, gracefully_kill)`) runs the master's
        # `grace_them_all` it inherited, lives on, and the reload waits for it until the
        # reload mercy (60 s) ends (seen once in CI: a second "...gracefully killing
        # workers..." in the log, and no "Gracefully killing worker 3").
        wait_doc(proc, lambda d: all(w.requests > 0 for w in d.live_workers), "new worker serving")
        pids = {w.pid for w in doc(proc).live_workers}
        proc.fifo_write("r")
        took["r"] = wait_doc(
            proc,
            lambda d: bool(d.live_workers) and not pids & {w.pid for w in d.live_workers},
            "graceful reload r",
        )
        victim = doc(proc).live_workers[0]
        os.kill(victim.pid, signal.SIGKILL)  # a worker of the instance this test started
        took["respawn"] = wait_doc(
            proc,
            lambda d: any(w.id == victim.id and w.pid not in (0, victim.pid) for w in d.workers),
            "worker respawn",
        )
        served = run.result.ok
        end = time.monotonic() + EVENT_TIMEOUT
        while run.result.ok < served + 100 and load.is_alive() and time.monotonic() < end:
            time.sleep(0.05)
    finally:
        run.stop()
        load.join(30)
    assert not load.is_alive() and out
    return out[0], took


@pytest.fixture(scope="module")
def baseline() -> float:
    """Throughput of the same instance without req-logger (one measurement per module)."""
    from tests.uwsgi_harness import uwsgi_instance

    with uwsgi_instance(processes=4, cheaper=1, cheaper_initial=2, cheaper_algo="manual") as p:
        steady(p)  # warm up
        result = steady(p)
    assert result.errors == 0 and result.ok > 0
    return result.throughput


def udp_drops(inode: int) -> int | None:
    """The kernel's drop count for the UDP socket `inode`, from /proc/net/udp."""
    with open("/proc/net/udp") as f:
        for line in f.readlines()[1:]:
            fields = line.split()
            if int(fields[9]) == inode:
                return int(fields[12])
    return None


def test_a_stalled_receiver_never_harms_the_instance(uwsgi: Start, baseline: float) -> None:
    with Receiver("127.0.0.1:0", rcvbuf=4096) as rx:  # bound, tiny, never drained
        proc = start(uwsgi, f"socket:127.0.0.1:{rx.address[1]}")
        steady(proc)  # warm up, and fill the receiver's buffer
        result = steady(proc)
        assert result.errors == 0
        assert result.throughput > 0.5 * baseline, (result.throughput, baseline)
        load, took = events_under_load(proc)
        assert load.ok > 0 and load.errors <= 0.01 * load.sent, load.error_kinds
        assert proc.alive()
        inode = os.fstat(rx.fileno()).st_ino
        drops = udp_drops(inode)
        assert drops is not None and drops > 1000, drops  # the stall was real
        diag = Diag()
        try:
            (me,) = [s for s in diag.udp_sockets() if s.inode == inode]
        finally:
            diag.close()
        assert me.rx_queue > 0  # still full, never read
        print(f"stalled: {result.throughput:.0f} req/s vs {baseline:.0f}; events {took}")


def test_an_absent_receiver_never_harms_the_instance(uwsgi: Start, baseline: float) -> None:
    with Receiver("127.0.0.1:0") as gone:
        port = gone.address[1]  # a free port, then nobody bound
    proc = start(uwsgi, f"socket:127.0.0.1:{port}")
    steady(proc)
    result = steady(proc)
    assert result.errors == 0
    assert result.throughput > 0.5 * baseline, (result.throughput, baseline)
    load, took = events_under_load(proc)
    assert load.ok > 0 and load.errors <= 0.01 * load.sent, load.error_kinds
    assert proc.alive()
    # and when uwsgitune comes back, the lines flow again
    with Receiver(("127.0.0.1", port)) as back:
        run_closed(url(proc, "/hello"), 2, 2.0, max_requests=20)
        time.sleep(0.5)
        assert back.drain().received == 20
    print(f"absent: {result.throughput:.0f} req/s vs {baseline:.0f}; events {took}")


def test_why_not_unix_a_stalled_unix_datagram_reader_blocks_the_master(
    uwsgi: Start, tmp_path: Path
) -> None:
    """The reason unix addresses are refused: the master's blocking send waits for a unix
    datagram reader that stopped reading, and its FIFO waits with it, until the reader goes."""
    path = str(tmp_path / "log.sock")
    reader = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    try:
        reader.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        reader.bind(path)
        proc = start(uwsgi, f"socket:{path}")
        before = children(proc.pid)
        assert run_closed(url(proc, "/hello"), 4, 3.0, max_requests=2000).ok > 0
        proc.fifo_write("+")
        time.sleep(5)
        assert children(proc.pid) == before  # the master never read its FIFO
    finally:
        reader.close()
    deadline = time.monotonic() + EVENT_TIMEOUT
    while children(proc.pid) == before and time.monotonic() < deadline:
        time.sleep(0.1)
    assert len(children(proc.pid)) == len(before) + 1  # the `+`, done once the reader left


def children(pid: int) -> list[int]:
    with open(f"/proc/{pid}/task/{pid}/children") as f:
        return sorted(int(x) for x in f.read().split())


# -- uwsgitune itself stopped, killed, started again -----------------------------------------

UWSGITUNE = Path(sys.executable).parent / "uwsgitune"


def udp_bound(port: int) -> tuple[int, int] | None:
    """(bytes queued, inode) of the UDP socket bound to 127.0.0.1:`port`; None if none."""
    want = f"0100007F:{port:04X}"
    with open("/proc/net/udp") as f:
        for line in f.readlines()[1:]:
            fields = line.split()
            if fields[1] == want:
                return int(fields[4].split(":")[1], 16), int(fields[9])
    return None


def holds(pid: int, inode: int) -> bool:
    fds = Path(f"/proc/{pid}/fd")
    return any(os.readlink(fd) == f"socket:[{inode}]" for fd in fds.iterdir())


def watch(proc: UwsgiProcess, port: int, metrics: int, out: Path) -> subprocess.Popen[bytes]:
    """`uwsgitune watch --plain --latency --metrics-listen` as a user runs it; its socket
    bound."""
    cmd = [str(UWSGITUNE), "watch", "--plain", "--interval", "0.5"]
    cmd += ["--latency", f"127.0.0.1:{port}", "--metrics-listen", f"127.0.0.1:{metrics}"]
    with out.open("wb") as f:
        child = subprocess.Popen([*cmd, proc.stats], stdout=f, stderr=f)
    end = time.monotonic() + EVENT_TIMEOUT
    while time.monotonic() < end:
        bound = udp_bound(port)
        if bound is not None and holds(child.pid, bound[1]):
            return child
        assert child.poll() is None, out.read_text()
        time.sleep(0.05)
    raise AssertionError("uwsgitune watch --latency never bound its port")


def drained(port: int, timeout: float = EVENT_TIMEOUT) -> bool:
    """Whether the socket on `port` empties (its reader reads) within `timeout`."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        bound = udp_bound(port)
        if bound is not None and bound[0] == 0:
            return True
        time.sleep(0.05)
    return False


def recorded(metrics_port: int) -> int | None:
    """`uwsgitune_latency_lines_total` on uwsgitune's /metrics; None when it does not answer."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=5) as r:
            text = r.read().decode()
    except OSError:
        return None
    rows = [x for x in text.splitlines() if x.startswith("uwsgitune_latency_lines_total")]
    return sum(int(float(x.rsplit(" ", 1)[1])) for x in rows)


def test_uwsgitune_stopped_or_killed_never_harms_the_instance_and_starts_again(
    uwsgi: Start, tmp_path: Path
) -> None:
    """The tests above stall a bare receiver; this one stops uwsgitune itself (`watch
    --latency`, as a user runs it) with SIGSTOP, then SIGKILL: under load the app serves and
    a FIFO `+`, a reload and a respawn complete meanwhile; a new uwsgitune picks the lines
    up (its socket drains, its /metrics counts the lines)."""
    with Receiver("127.0.0.1:0") as probe:
        port = probe.address[1]
    proc = start(uwsgi, f"socket:127.0.0.1:{port}")
    first = watch(proc, port, free_port(), tmp_path / "first.log")
    try:
        assert run_closed(url(proc, "/hello"), 2, 1.0, max_requests=2000).errors == 0
        assert drained(port)  # it reads
        first.send_signal(signal.SIGSTOP)
        try:
            load, took = events_under_load(proc, seconds=5.0)
        except AssertionError as exc:  # say what uWSGI said
            raise AssertionError(
                f"{exc}; uWSGI's log ends: {proc.log.read_text()[-1500:]}"
            ) from exc
        assert load.ok > 0 and load.errors <= 0.01 * load.sent, load.error_kinds
        assert set(took) == {"+", "r", "respawn"}
        queued = udp_bound(port)
        assert queued is not None and queued[0] > 0  # the stop was real: lines wait unread
        first.send_signal(signal.SIGKILL)
        first.wait(5)
        assert udp_bound(port) is None  # killed: nobody on the port
        assert run_closed(url(proc, "/hello"), 2, 1.0, max_requests=2000).errors == 0
    finally:
        first.send_signal(signal.SIGCONT)
        first.kill()
        first.wait(5)
    metrics = free_port()
    again = watch(proc, port, metrics, tmp_path / "again.log")
    try:
        served = run_closed(url(proc, "/hello"), 2, 1.5, max_requests=2000)
        assert served.errors == 0 and served.ok > 0
        assert drained(port)  # the new uwsgitune reads what keeps coming
        end = time.monotonic() + EVENT_TIMEOUT
        while (recorded(metrics) or 0) < served.ok // 2:  # and records it
            assert time.monotonic() < end, (recorded(metrics), served.ok)
            time.sleep(0.2)
        assert proc.alive()
    finally:
        again.kill()
        again.wait(5)
