"""Run the real `uwsgitune daemon` as a subprocess, with a notify socket we read."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from uwsgitune.launch import free_port

UWSGITUNE = str(Path(sys.executable).parent / "uwsgitune")


@dataclass
class DaemonProc:
    proc: subprocess.Popen[bytes]
    port: int
    log: Path
    notify: socket.socket
    config: Path | None

    def log_lines(self) -> list[str]:
        return self.log.read_text().splitlines()

    def events(self, name: str) -> list[str]:
        return [line for line in self.log_lines() if f"event={name} " in line + " "]

    def notifications(self, timeout: float = 0.0) -> list[bytes]:
        out = []
        self.notify.settimeout(timeout or None)
        self.notify.setblocking(timeout > 0)
        try:
            while True:
                out.append(self.notify.recv(4096))
                self.notify.setblocking(False)
        except (BlockingIOError, TimeoutError):
            pass
        return out

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 5.0) -> int:
        self.proc.send_signal(sig)
        return self.proc.wait(timeout)


@pytest.fixture
def start_daemon() -> Iterator[Callable[..., DaemonProc]]:
    started: list[DaemonProc] = []
    workdir = Path(tempfile.mkdtemp(prefix="uwtd-", dir="/tmp"))

    def start(
        *args: str,
        config: str | None = None,
        env: dict[str, str] | None = None,
        watchdog_usec: int = 1_000_000,
    ) -> DaemonProc:
        port = free_port()
        path = None
        argv = [UWSGITUNE, "daemon", *args]
        if config is not None:
            path = workdir / f"config-{len(started)}.toml"
            path.write_text(config.replace("@PORT@", str(port)))
            argv += ["--config", str(path)]
        elif "--metrics-listen" not in args:
            argv += ["--metrics-listen", f"127.0.0.1:{port}"]
        notify_path = workdir / f"notify-{len(started)}"
        notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        notify.bind(str(notify_path))
        log = workdir / f"daemon-{len(started)}.log"
        full_env = {
            **os.environ,
            "NOTIFY_SOCKET": str(notify_path),
            "WATCHDOG_USEC": str(watchdog_usec),
            **(env or {}),
        }
        with log.open("wb") as out:
            proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=full_env)
        d = DaemonProc(proc, port, log, notify, path)
        started.append(d)
        return d

    yield start
    for d in started:
        if d.proc.poll() is None:
            d.proc.send_signal(signal.SIGINT)
            try:
                d.proc.wait(5)
            except subprocess.TimeoutExpired:
                d.proc.kill()
                d.proc.wait(5)
        d.notify.close()
    for f in workdir.iterdir():
        f.unlink()
    workdir.rmdir()
