"""Shared helpers of the observation tests: synthetic documents, hostile peers, the CLI."""

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
from pathlib import Path
from typing import Any

from uwsgitune.core.model import parse_stats
from uwsgitune.core.samples import HostSample, Poll

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
