"""Synthetic stats documents and instances (`Instance`, fed through the real `Tracker`), fake
stats peers (hostile or broken), and the CLI run as a user runs it: shared by the tests of
every package that reads frames."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

from uwsgitune.core.derive import Tracker
from uwsgitune.core.frame import Frame, RequestView, SocketView
from uwsgitune.core.model import parse_stats
from uwsgitune.core.samples import HostSample, Poll, ProcSample, UnixQueue
from uwsgitune.pipeline import InstanceDriver, run_replay
from uwsgitune.sources.recording import ReplaySource, read_recording

UWSGITUNE = str(Path(sys.executable).parent / "uwsgitune")


def worker(
    wid: int,
    pid: int,
    *,
    status: str = "idle",
    requests: int = 0,
    running_time: int = 0,
    exceptions: int = 0,
    respawn_count: int = 1,
    tx: int = 0,
    harakiri_count: int = 0,
    cores: int = 1,
    **extra: Any,
) -> dict[str, Any]:
    return {
        "id": wid,
        "pid": pid,
        "accepting": 1,
        "requests": requests,
        "delta_requests": requests,
        "exceptions": exceptions,
        "harakiri_count": harakiri_count,
        "signals": 0,
        "signal_queue": 0,
        "status": status,
        "rss": 0,
        "vsz": 0,
        "running_time": running_time,
        "last_spawn": 1000,
        "respawn_count": respawn_count,
        "tx": tx,
        "avg_rt": 0,
        "apps": [],
        "cores": [
            {"id": i, "requests": 0, "in_request": 0, "vars": [], "req_info": {}}
            for i in range(cores)
        ],
        **extra,
    }


def never_spawned() -> dict[str, Any]:
    return worker(0, 0, status="cheap", respawn_count=0) | {"accepting": 0}


def document(pid: int = 100, workers: list[dict[str, Any]] | None = None, **top: Any) -> bytes:
    doc = {
        "version": "2.0.31",
        "listen_queue": 0,
        "listen_queue_errors": 0,
        "signal_queue": 0,
        "load": 0,
        "pid": pid,
        "uid": 0,
        "gid": 0,
        "cwd": "/",
        "locks": [],
        "sockets": [{"name": "127.0.0.1:8000", "proto": "http", "queue": 0, "max_queue": 100}],
        "workers": workers if workers is not None else [],
        **top,
    }
    return json.dumps(doc).encode()


def poll_of(raw: bytes, t: float, *, host: HostSample | None = None, source: str = "s") -> Poll:
    return Poll(source, 1_800_000_000.0 + t, t, doc=parse_stats(raw), host=host)


def error_poll(t: float, error: str = "s: connection refused", source: str = "s") -> Poll:
    return Poll(source, 1_800_000_000.0 + t, t, error=error)


# --- synthetic instances: documents and host samples over time, derived by the Tracker -------

MIB = 1024 * 1024


@dataclass(frozen=True)
class Load:
    """One poll interval of a synthetic instance, per second. `Instance` turns it into the
    counters of a stats document and of a host sample; the real `Tracker` derives the frame,
    so test frames cannot drift from real ones."""

    live: int = 4
    cheap: int = 0  # cheaped slots after the live ones
    threads: int = 1
    busy: int = 0  # live workers in a request at the poll (status)
    rps: float = 0.0
    eps: float = 0.0
    in_service: float = 0.0  # requests in service on average: Δrunning_time/Δt
    static_share: float = 0.0
    worker_cpu: float = 0.0  # cores each live worker uses (the master: none)
    runq: float | None = None  # seconds/s each live worker waits for a CPU; None: unknown
    host_busy: float | None = 0.0  # cores busy on the host; None: the host's CPU unknown
    host_nice: float = 0.0  # of those, cores busy at a positive nice (batch work)
    cpus: int = 4
    effective_cpus: float = 4.0
    somaxconn: int | None = 4096
    rss: int = 50 * MIB  # each live worker
    memory_report: bool = True  # rss in the stats; else only in the host's process samples
    mem_available: int = 4096 * MIB
    mem_total: int = 8192 * MIB
    sockets: tuple[SocketView, ...] = ()
    harakiri: int = 0  # workers killed by harakiri in the interval
    respawns: int = 0  # worker respawns in the interval
    signal_queue: int = 0
    listen_overflows: int = 0  # in the interval
    request: RequestView | None = None  # in service on core 0 of every live worker
    requests: tuple[RequestView, ...] = ()  # else: in service on core 0 of live worker k
    # threads: requests the cores hold at the poll, filling worker 1's cores, then worker 2's
    held: int | None = None
    avg_rt_us: int = 30_000  # uWSGI's running average, every worker
    # each live worker's share of the requests and running time (default: even)
    weights: tuple[float, ...] = ()
    host: bool = True  # a host sample beside the document
    # busy workers asleep (state "S") at the host sample, the other busy ones runnable ("R"),
    # the idle ones asleep; None: no state read ("")
    blocked: int | None = None
    spawned: float = 0.0  # epoch of the last (re)load: the live workers' `last_spawn`


def _spread(total: int, n: int, weights: tuple[float, ...] = ()) -> list[int]:
    if weights:
        w = [Fraction(x) for x in weights[:n]]
        cum = [round(total * sum(w[: k + 1]) / sum(w)) if sum(w) else 0 for k in range(n)]
        return [c - p for c, p in zip(cum, [0, *cum[:-1]], strict=True)]
    q, r = divmod(total, n) if n else (0, 0)
    return [q + (1 if k < r else 0) for k in range(n)]


def _tick(per_second: float) -> Fraction:
    """CPU seconds a second on a 2^-20 s grid: the host sample's running totals stay exact
    floats, so a steady load gives steady frames (no rounding noise between polls)."""
    return Fraction(round(per_second * 2**20), 2**20)


class Instance:
    """A synthetic uWSGI instance: cumulative counters that grow by a `Load` per second,
    read as a stats document and a host sample at each poll, through a real `Tracker`."""

    def __init__(self, source: str = "test", t0: float = 1_700_000_000.0, mono0: float = 1000.0):
        self.source, self.t0, self.mono0 = source, t0, mono0
        self.tracker = Tracker(source)
        self.master_pid = 999
        self.pids: list[int] = []
        self.slots: list[dict[str, int]] = []
        self.sums: dict[str, Fraction] = {}
        self.cpu: dict[int, Fraction] = {}
        self.runq: dict[int, Fraction] = {}
        self.host_cpu = [Fraction(0), Fraction(0), Fraction(0)]  # busy, total, nice
        self.overflows = 0
        self.last: float | None = None

    def frame(self, i: float, load: Load, *, reload: bool = False) -> Frame:
        return self.tracker.update(self.poll(i, load, reload=reload))

    def error(self, i: float, error: str = "connection refused") -> Frame:
        """The poll at `i` failed (`error_poll`): the tracker's error frame."""
        return self.tracker.update(Poll(self.source, self.t0 + i, self.mono0 + i, error=error))

    def poll(self, i: float, load: Load, *, reload: bool = False) -> Poll:
        n = load.live + load.cheap
        if reload or len(self.slots) != n:
            self._respawn(n, load.live)
        dt = Fraction(i - self.last) if self.last is not None else Fraction(1)
        self.last = i
        self._grow(load, dt)
        t = self.t0 + i
        doc = document(
            self.master_pid,
            [self._worker(k, load, t) for k in range(n)],
            sockets=[_stats_socket(s) for s in load.sockets],
            signal_queue=load.signal_queue,
        )
        host = self._host(load) if load.host else None
        return Poll(self.source, t, self.mono0 + i, doc=parse_stats(doc), host=host)

    def _respawn(self, n: int, live: int) -> None:
        """New workers in every slot (a reload: counters from zero), or a first document (the
        live workers have served 100 requests each, the cheap slots none)."""
        base = [100 if not self.slots and k < live else 0 for k in range(n)]
        first = 1000 if not self.pids else max(self.pids) + 1
        self.pids = [first + k for k in range(n)]
        self.slots = [
            dict(
                requests=b, exceptions=0, running_time=30_000 * b, static=0, harakiri=0, respawns=1
            )
            for b in base
        ]
        self.sums = {}

    def _add(
        self, name: str, per_second: float, dt: Fraction, live: int, weights: tuple[float, ...]
    ) -> None:
        """Grow counter `name` of the live slots by `per_second` x dt, whole numbers summing
        to the exact total."""
        before = round(self.sums.get(name, Fraction(0)))
        self.sums[name] = self.sums.get(name, Fraction(0)) + Fraction(per_second) * dt
        extras = _spread(round(self.sums[name]) - before, live, weights)
        for slot, extra in zip(self.slots[:live], extras, strict=True):
            slot[name] += extra

    def _grow(self, load: Load, dt: Fraction) -> None:
        live, w = load.live, load.weights
        self._add("requests", load.rps, dt, live, w)
        self._add("exceptions", load.eps, dt, live, w)
        self._add("running_time", load.in_service * 1_000_000, dt, live, w)
        self._add("static", load.rps * load.static_share, dt, live, w)
        self._add("harakiri", load.harakiri, Fraction(1), live, ())
        self._add("respawns", load.respawns, Fraction(1), live, ())
        self.cpu.setdefault(self.master_pid, Fraction(0))
        self.runq.setdefault(self.master_pid, Fraction(0))
        for pid in self.pids[:live]:
            self.cpu[pid] = self.cpu.get(pid, Fraction(0)) + _tick(load.worker_cpu) * dt
            self.runq[pid] = self.runq.get(pid, Fraction(0)) + _tick(load.runq or 0.0) * dt
        if load.host_busy is not None:
            self.host_cpu[0] += _tick(load.host_busy) * dt
            self.host_cpu[1] += load.cpus * dt
            self.host_cpu[2] += _tick(load.host_nice) * dt
        self.overflows += load.listen_overflows

    def _worker(self, k: int, load: Load, t: float) -> dict[str, Any]:
        c, live = self.slots[k], k < load.live
        w = worker(
            k + 1,
            self.pids[k] if live else 0,
            status=("busy" if k < load.busy else "idle") if live else "cheap",
            requests=c["requests"],
            running_time=c["running_time"],
            exceptions=c["exceptions"],
            respawn_count=c["respawns"],
            harakiri_count=c["harakiri"],
            cores=load.threads,
        )
        w["accepting"] = int(live)
        w["rss"] = load.rss if load.memory_report and live else 0
        w["avg_rt"] = load.avg_rt_us if live else 0
        w["last_spawn"] = load.spawned
        w["cores"][0]["static_requests"] = c["static"]
        w["cores"][0]["requests"] = c["requests"]  # core 0 serves them all
        r = load.request or (load.requests[k] if k < len(load.requests) else None)
        if r is not None and live:
            w["cores"][0] |= {
                "in_request": 1,
                "vars": [f"REQUEST_METHOD={r.method}", f"PATH_INFO={r.path}"],
                "req_info": {"request_start": t - (r.age or 0.0)},
            }
        if load.held is not None and live:
            for core in w["cores"][: max(0, min(load.held - k * load.threads, load.threads))]:
                core |= {"in_request": 1, "req_info": {"request_start": t}}
        return w

    def _state(self, k: int, load: Load) -> str:
        """Worker slot k's scheduler state (`Load.blocked`; the master: asleep)."""
        if load.blocked is None:
            return ""
        return "S" if k < 0 or k >= load.busy or k < load.blocked else "R"

    def _host(self, load: Load) -> HostSample:
        runq = load.runq is not None
        procs = [
            ProcSample(
                pid,
                float(self.cpu[pid]),
                load.rss if pid != self.master_pid else 0,
                runq_seconds=float(self.runq[pid]) if runq else None,
                state=self._state(k, load),
            )
            for k, pid in enumerate([self.master_pid, *self.pids[: load.live]], start=-1)
        ]
        return HostSample(
            cpu_count=load.cpus,
            effective_cpus=load.effective_cpus,
            cpu_busy_seconds=float(self.host_cpu[0]),
            cpu_total_seconds=float(self.host_cpu[1]),
            cpu_nice_seconds=float(self.host_cpu[2]),
            mem_total=load.mem_total,
            mem_available=load.mem_available,
            somaxconn=load.somaxconn,
            listen_overflows=self.overflows,
            procs=tuple(procs),
            unix_queues=tuple(
                UnixQueue(s.name, s.queue or 0, s.backlog or 0)
                for s in load.sockets
                if s.source == "kernel" and s.unix and s.queue is not None
            ),
        )


def _stats_socket(s: SocketView) -> dict[str, Any]:
    """The stats document's entry for `s` (a kernel-read unix socket's queue is the host's)."""
    queue = s.queue if s.source == "stats" else 0
    backlog = s.backlog if s.source == "stats" else 0
    return {"name": s.name, "proto": s.proto, "queue": queue or 0, "max_queue": backlog or 0}


# --- hostile peers -------------------------------------------------------------------------

Behaviour = Callable[[socket.socket], None]


@contextlib.contextmanager
def fake_server(behaviour: Behaviour, *, unix_path: str | None = None) -> Iterator[str]:
    """A one-thread server running `behaviour(conn)` for every connection; yields the
    address to give uwsgitune (`host:port`, or the unix path). Every socket is closed."""
    if unix_path is not None:
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(unix_path)
        address = unix_path
    else:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", 0))
        address = f"127.0.0.1:{listener.getsockname()[1]}"
    listener.listen(16)
    listener.settimeout(0.1)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except (TimeoutError, OSError):
                continue
            with conn:
                conn.settimeout(30)
                with contextlib.suppress(OSError):
                    behaviour(conn)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield address
    finally:
        stop.set()
        thread.join(5)
        listener.close()
        if unix_path is not None:
            with contextlib.suppress(OSError):
                os.unlink(unix_path)


def send(data: bytes) -> Behaviour:
    def behaviour(conn: socket.socket) -> None:
        conn.sendall(data)

    return behaviour


def read_then_send(data: bytes) -> Behaviour:
    """Read the request first (as an HTTP server does), then answer `data` verbatim."""

    def behaviour(conn: socket.socket) -> None:
        conn.settimeout(2)
        with contextlib.suppress(OSError):
            conn.recv(4096)
        conn.sendall(data)

    return behaviour


def silent(seconds: float) -> Behaviour:
    def behaviour(conn: socket.socket) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            conn.settimeout(max(end - time.monotonic(), 0.01))
            try:
                if not conn.recv(4096):
                    return
            except TimeoutError:
                return

    return behaviour


def trickle(data: bytes, every: float) -> Behaviour:
    def behaviour(conn: socket.socket) -> None:
        for i in range(len(data)):
            conn.sendall(data[i : i + 1])
            time.sleep(every)

    return behaviour


def http_answer(body: bytes, status: str = "200 OK") -> Behaviour:
    def behaviour(conn: socket.socket) -> None:
        conn.settimeout(2)
        with contextlib.suppress(OSError):
            conn.recv(4096)
        head = f"HTTP/1.0 {status}\r\nContent-Type: text/html\r\n\r\n".encode()
        conn.sendall(head + body)

    return behaviour


# --- the CLI as a user runs it ---------------------------------------------------------------


def run_cli(*args: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [UWSGITUNE, *args], capture_output=True, text=True, timeout=timeout, check=False
    )


def replayed(path: Path) -> list[Frame]:
    """Every frame of a recording, in recorded order, as the pipeline makes them (each
    instance's driver: the real tracker and window), for tests that read frames."""
    frames: list[Frame] = []

    def make(source: ReplaySource) -> InstanceDriver:
        driver = InstanceDriver(source)
        driver.subscribe(lambda state: frames.append(state.frame) if state.frame else None)
        return driver

    run_replay(read_recording(path), make)
    return frames
