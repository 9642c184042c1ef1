"""A real uWSGI under bounded load: the numbers must match what the load generator saw.

Every load is bounded by a duration and a request count; every instance is stopped (FIFO `q`)
by the `uwsgi` fixture.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import queue
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support.instances import UWSGITUNE, run_cli
from tests.uwsgi_harness import url
from uwsgitune.core.address import parse_address
from uwsgitune.core.derive import Tracker
from uwsgitune.core.frame import Frame
from uwsgitune.core.model import StatsDoc, parse_stats
from uwsgitune.launch import UwsgiProcess, free_port
from uwsgitune.loadgen import LoadResult, LoadRun, run_closed
from uwsgitune.sources.poller import LiveSource
from uwsgitune.sources.stats import read_stats

pytestmark = pytest.mark.uwsgi

Start = Callable[..., UwsgiProcess]


class Watch:
    """An observer and a tracker on one live instance, as `watch` runs them."""

    def __init__(self, address: str) -> None:
        self.observer = LiveSource(parse_address(address), timeout=2.0)
        self.tracker = Tracker(address)

    def frame(self) -> Frame:
        return self.tracker.update(self.observer.poll())


def raw_doc(address: str) -> StatsDoc:
    return parse_stats(read_stats(parse_address(address), timeout=2.0))


def wait_for(address: str, cond: Callable[[StatsDoc], bool], timeout: float = 30.0) -> StatsDoc:
    """`cond` on the stats, polled until it holds; `timeout` is wide: a respawn or a reload
    of two workers took over 8 s on a 2-core machine running the suite with -n 3."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        with contextlib.suppress(Exception):
            doc = raw_doc(address)
            if cond(doc):
                return doc
        time.sleep(0.05)
    raise AssertionError(f"{address}: condition not met within {timeout}s")


def idle(doc: StatsDoc) -> bool:
    return all(w.status != "busy" for w in doc.live_workers)


def in_thread(coro_factory: Callable[[], object]) -> tuple[threading.Thread, list[LoadResult]]:
    out: list[LoadResult] = []

    def run() -> None:
        out.append(asyncio.run(coro_factory()))  # type: ignore[arg-type]

    thread = threading.Thread(target=run)
    thread.start()
    return thread, out


@contextlib.contextmanager
def short_dir() -> Iterator[Path]:
    d = Path(tempfile.mkdtemp(prefix="uwt-", dir="/tmp"))
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


# --- traffic ---------------------------------------------------------------------------------


def test_tcp_load_requests_rates_latency(uwsgi: Start) -> None:
    stats = f"tcp://127.0.0.1:{free_port()}"
    proc = uwsgi(processes=4, stats=stats.removeprefix("tcp://"))
    watch = Watch(stats)
    f0 = watch.frame()
    assert f0.kind == "first" and f0.rps is None and f0.live == 4
    # Open loop at a fixed rate: the server sees exactly the offered rate.
    rate = 120.0
    run = LoadRun(url(proc, "/io/10"), duration=3.0, max_requests=400)
    thread, out = in_thread(lambda: run.open_loop(rate))
    time.sleep(0.8)
    f1 = watch.frame()
    time.sleep(1.5)
    f2 = watch.frame()
    thread.join(15)
    (result,) = out
    assert result.errors == 0 and result.ok > 300
    wait_for(stats, idle)
    f3 = watch.frame()
    assert (f1.kind, f2.kind, f3.kind) == ("ok", "ok", "ok")
    # every request the load generator completed, and no other
    assert f3.requests_total - f0.requests_total == result.ok
    offered = result.sent / result.elapsed
    assert f2.rps is not None and abs(f2.rps - rate) / rate < 0.06, (f2.rps, offered)
    assert abs(offered - rate) / rate < 0.03
    # the true mean: at least the 10 ms the app sleeps, at most what the client saw
    client_mean = sum(result.latencies) / len(result.latencies) * 1000
    assert f2.mean_rt_ms is not None and 10.0 <= f2.mean_rt_ms <= client_mean
    # Little: L = λ·W
    assert f2.littles_l is not None
    assert abs(f2.littles_l - f2.rps * f2.mean_rt_ms / 1000) < 0.05 * f2.littles_l + 0.01
    assert f2.busy_ratio is not None and 0 < f2.busy_ratio < 1
    assert f2.instance_cpu_cores is not None and f2.host_cpu_pct is not None
    # exceptions
    errors = run_closed(url(proc, "/error"), 2, 5.0, max_requests=20)
    assert errors.sent == errors.errors == 20  # uWSGI answers an exception with no HTTP status
    wait_for(stats, idle)
    f4 = watch.frame()
    assert f4.exceptions_total - f3.exceptions_total == 20
    assert f4.eps is not None and f4.dt is not None and round(f4.eps * f4.dt) == 20

    # the CLI on the same instance, given twice in two spellings: two sections
    res = run_cli("watch", stats, stats.removeprefix("tcp://"), "--once", "--interval", "0.3")
    assert res.returncode == 0, res.stderr
    for needle in (
        "uWSGI 2.0.31",
        f"master {f0.master_pid}",
        "since last (re)load",
        "4 live / 4 max",
        "req/s",
        "exceptions/s",
        "Δrunning_time/Δrequests",
        "half-life average",
        "Little's L",
        "queue 0/100",
        "ListenOverflows",
        "effective",
        "/worker",
        "available",
        "harakiri 0",
        "signal queue 0",
    ):
        assert needle in res.stdout, needle
    assert res.stdout.count("uWSGI 2.0.31") == 2
    res = run_cli("watch", stats, "--json", "--interval", "0.3")
    doc = json.loads(res.stdout)
    assert doc["schema_version"] == 1
    (inst,) = doc["instances"]
    assert inst["kind"] == "ok" and inst["rps"] is not None and inst["mem_source"] == "stats"


def test_unix_http_socket_load(uwsgi: Start) -> None:
    with short_dir() as d:
        sock = str(d / "h.sock")
        proc = uwsgi(processes=2, http_socket=sock)
        watch = Watch(proc.stats)
        f0 = watch.frame()
        run = LoadRun("http://localhost/io/2", duration=5.0, max_requests=300, unix_socket=sock)
        result = asyncio.run(run.closed_loop(6))
        assert result.ok == 300 and result.errors == 0
        wait_for(proc.stats, idle)
        f1 = watch.frame()
        assert f1.kind == "ok"
        assert f1.requests_total - f0.requests_total == 300
        assert f1.rps is not None and f1.dt is not None and round(f1.rps * f1.dt) == 300
        (view,) = f1.sockets
        assert (view.name, view.unix, view.source, view.backlog) == (sock, True, "kernel", 100)
        assert raw_doc(proc.stats).sockets[0].max_queue == 0  # uWSGI itself says 0/0


def _hold(sock: socket.socket, path: str) -> None:
    sock.sendall(f"GET {path} HTTP/1.0\r\nHost: x\r\n\r\n".encode())


def _flood(family: int, target: object, count: int) -> list[socket.socket]:
    out = []
    for _ in range(count):
        s = socket.socket(family, socket.SOCK_STREAM)
        s.setblocking(False)
        out.append(s)
        with contextlib.suppress(BlockingIOError, InterruptedError):
            s.connect(target)  # type: ignore[arg-type]
    return out


def test_unix_socket_full_backlog(uwsgi: Start) -> None:
    with short_dir() as d:
        path = str(d / "h.sock")
        proc = uwsgi(processes=1, http_socket=path, listen=4, harakiri=None)
        held = socket.socket(socket.AF_UNIX)
        clients: list[socket.socket] = []
        try:
            held.connect(path)
            _hold(held, "/sleep/2000")
            wait_for(proc.stats, lambda doc: doc.workers[0].status == "busy", 3)
            clients = _flood(socket.AF_UNIX, path, 12)
            time.sleep(0.1)
            frame = Watch(proc.stats).frame()
            (view,) = frame.sockets
            assert view.unix and view.source == "kernel"
            assert view.backlog == 4
            assert view.queue is not None and view.queue >= view.backlog  # peaks at backlog+1
            assert view.full and frame.queue_full
            doc = raw_doc(proc.stats)
            assert (doc.sockets[0].queue, doc.sockets[0].max_queue) == (0, 0)  # uWSGI: blind
            res = run_cli("watch", proc.stats, "--once", "--interval", "0.2")
            assert f"queue {view.queue}/4  FULL" in res.stdout, res.stdout
        finally:
            for c in clients:
                c.close()
            held.close()


def test_tcp_full_backlog_and_listen_overflows(uwsgi: Start) -> None:
    proc = uwsgi(processes=1, listen=4)
    port = int(str(proc.options["http-socket"]).rsplit(":", 1)[1])
    watch = Watch(proc.stats)
    watch.frame()
    held = socket.create_connection(("127.0.0.1", port))
    clients: list[socket.socket] = []
    try:
        _hold(held, "/sleep/2500")
        wait_for(proc.stats, lambda doc: doc.workers[0].status == "busy", 3)
        clients = _flood(socket.AF_INET, ("127.0.0.1", port), 24)
        # uWSGI samples TCP_INFO once per master cycle (~1 s); the kernel (inet_diag) is read
        # at the poll itself, so the full queue shows at once.
        frame = watch.frame()
        (view,) = frame.sockets
        assert (view.unix, view.source, view.backlog) == (False, "kernel", 4)
        assert view.queue == 5  # backlog + 1
        assert view.full
        assert frame.listen_overflows_delta is not None and frame.listen_overflows_delta > 0
        assert "TCP backlogs overflowed" in "\n".join(
            __import__("uwsgitune.render.text", fromlist=["summary"]).summary(frame)
        )
    finally:
        for c in clients:
            c.close()
        held.close()


# --- resets ----------------------------------------------------------------------------------


def test_respawn_w_is_not_a_reset_and_reload_r_is_a_reload(uwsgi: Start) -> None:
    stats = f"@uwt-{os.getpid()}-{free_port()}"
    proc = uwsgi(processes=2, stats=stats)
    assert run_closed(url(proc, "/"), 2, 5.0, max_requests=100).ok == 100
    watch = Watch(stats)
    a = watch.frame()
    assert a.requests_total == 100
    pids = {w.pid for w in a.workers}

    proc.fifo_write("w")
    wait_for(
        stats,
        lambda d: len({w.pid for w in d.live_workers} & pids) == 0 and len(d.live_workers) == 2,
    )
    b = watch.frame()
    assert b.kind == "ok" and b.rps == 0.0 and b.requests_total == 100
    assert b.respawns_delta == 2 and b.reloads_seen == 0

    pids = {w.pid for w in b.workers}
    proc.fifo_write("r")
    wait_for(
        stats,
        lambda d: len({w.pid for w in d.live_workers} & pids) == 0 and len(d.live_workers) == 2,
    )
    c = watch.frame()
    assert c.kind == "reload" and c.rps is None and c.reloads_seen == 1
    assert c.master_pid == a.master_pid and c.requests_total == 0
    assert run_closed(url(proc, "/"), 2, 5.0, max_requests=30).ok == 30
    wait_for(stats, idle)
    d = watch.frame()
    assert d.kind == "ok" and d.rps is not None and d.dt is not None
    assert round(d.rps * d.dt) == 30 and d.requests_total == 30


def test_stats_http_real(uwsgi: Start) -> None:
    port = free_port()
    proc = uwsgi(processes=2, stats=f"127.0.0.1:{port}", stats_http=True)
    assert proc.stats == f"http://127.0.0.1:{port}"
    raw = run_cli("watch", f"127.0.0.1:{port}", "--once")
    assert raw.returncode == 1 and "Traceback" not in raw.stderr
    assert raw.stderr.strip() == (
        f"uwsgitune: 127.0.0.1:{port}: the peer sent nothing; if uWSGI runs with --stats-http, "
        f"use http://127.0.0.1:{port}"
    )
    res = run_cli("watch", f"http://127.0.0.1:{port}", "--once", "--interval", "0.3")
    assert res.returncode == 0, res.stderr
    assert "2 live / 2 max" in res.stdout


def test_raw_stats_addressed_as_http(uwsgi: Start) -> None:
    port = free_port()
    uwsgi(processes=1, stats=f"127.0.0.1:{port}")
    res = run_cli("watch", f"http://127.0.0.1:{port}", "--once")
    assert res.returncode == 1 and "Traceback" not in res.stderr
    assert f"use 127.0.0.1:{port}" in res.stderr and len(res.stderr.strip().splitlines()) == 1


# --- keep running: --plain across a restart -----------------------------------------------


class Lines:
    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.q: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        assert proc.stdout is not None
        stream = proc.stdout
        self.thread = threading.Thread(
            target=lambda: [self.q.put(line) for line in stream], daemon=True
        )
        self.thread.start()

    def until(self, pred: Callable[[str], bool], timeout: float) -> str:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            try:
                line = self.q.get(timeout=max(end - time.monotonic(), 0.01))
            except queue.Empty:
                break
            self.seen.append(line)
            if pred(line):
                return line
        raise AssertionError(f"no matching line within {timeout}s; saw {self.seen[-5:]}")


def test_plain_reports_disconnect_and_reconnects(uwsgi: Start) -> None:
    proc = uwsgi(processes=1)
    first_master = raw_doc(proc.stats).pid
    watcher = subprocess.Popen(
        [UWSGITUNE, "watch", proc.stats, "--plain", "--interval", "0.3"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        lines = Lines(watcher)
        lines.until(lambda s: "rps=" in s and "event=" not in s, 5)
        proc.stop()
        down = lines.until(lambda s: "disconnected since" in s, 5)
        assert down.count(proc.stats) == 1  # refused, or no answer while the master stops
        proc.start()
        assert raw_doc(proc.stats).pid != first_master
        lines.until(lambda s: "event=restart" in s, 15)
        lines.until(lambda s: "rps=0.0" in s and "event=" not in s, 5)
        assert watcher.poll() is None  # still running
    finally:
        watcher.send_signal(signal.SIGINT)
        _, err = watcher.communicate(timeout=10)
    assert watcher.returncode == 0
    assert "Traceback" not in err


# --- record, then replay offline -------------------------------------------------------------


def test_record_then_replay(uwsgi: Start, tmp_path: Path) -> None:
    proc = uwsgi(processes=2, threads=2)
    out = tmp_path / "run.jsonl"
    recorder = subprocess.Popen(
        [UWSGITUNE, "record", proc.stats, "-o", str(out), "--duration", "2.2", "--interval", "0.4"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    load = run_closed(url(proc, "/sleep/40"), 4, 1.5, max_requests=400)
    _, err = recorder.communicate(timeout=15)
    assert recorder.returncode == 0, err
    lines = out.read_text().splitlines()
    header, polls = json.loads(lines[0]), [json.loads(x) for x in lines[1:]]
    assert header["uwsgitune_recording"] == 1 and header["request_vars"] is False
    assert len(polls) >= 5 and all("doc" in p and "host" in p for p in polls)
    assert "REQUEST_METHOD" not in out.read_text()  # request vars dropped
    counted = polls[-1]["doc"]["workers"]
    total = sum(w["requests"] for w in counted)
    assert total <= load.ok and total >= load.ok - 8  # the last poll may miss in-flight ones

    res = run_cli("watch", "--replay", str(out), "--plain")
    assert res.returncode == 0, res.stderr
    assert len(res.stdout.splitlines()) == len(polls)
    assert "event=first" in res.stdout.splitlines()[0]
    res = run_cli("watch", "--replay", str(out), "--json")
    (inst,) = json.loads(res.stdout)["instances"]
    assert inst["requests_total"] == total and inst["kind"] == "ok"
    res = run_cli("watch", "--replay", str(out), "--once")
    assert res.returncode == 0 and "2 live / 2 max" in res.stdout


def test_uncheaps_are_not_respawns_but_a_killed_worker_is(uwsgi: Start) -> None:
    """A cheap slot brought back by `+` gets a new pid and respawn_count + 1 (uWSGI 2.0),
    but nothing died: a cheaper algorithm cycling must not read as a respawn storm."""
    proc = uwsgi(processes=4, cheaper=1, cheaper_initial=1, cheaper_algo="manual")
    watch = Watch(proc.stats)
    a = watch.frame()
    assert a.live == 1
    proc.fifo_write("+++")  # first spawns of never-used slots: respawn_count 1
    wait_for(proc.stats, lambda d: len(d.live_workers) == 4)
    proc.fifo_write("---")  # cheaped: same id and pid, status cheap
    wait_for(proc.stats, lambda d: len(d.live_workers) == 1)
    watch.frame()
    proc.fifo_write("+++")  # uncheaped: new pids, respawn_count 2
    wait_for(proc.stats, lambda d: len(d.live_workers) == 4)
    b = watch.frame()
    assert b.kind == "ok" and b.live == 4 and b.respawns_total == 3  # uWSGI counts them
    assert b.respawns_delta == 0  # uwsgitune does not
    victim = next(w.pid for w in b.workers if w.live and w.id == 2)
    os.kill(victim, signal.SIGKILL)
    wait_for(
        proc.stats, lambda d: victim not in {w.pid for w in d.workers} and len(d.live_workers) == 4
    )
    c = watch.frame()
    assert c.respawns_delta == 1
