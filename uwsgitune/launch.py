"""Start and stop a uWSGI instance that we own (the demo, sweeps, tests).

Only processes started here are ever signalled, by PID. uWSGI 2.0 treats SIGTERM as a brutal
reload, so a stop is FIFO `q` (graceful), then SIGINT, then SIGKILL as the last resort.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from uwsgitune.errors import UwsgituneError

IniValue = str | int | bool | Sequence[str]


class LaunchError(UwsgituneError):
    """uWSGI could not be started; the message names the cause and the log file."""


def find_uwsgi() -> str:
    """The uwsgi binary next to this Python first (a venv), then on PATH."""
    here = Path(sys.executable).parent / "uwsgi"
    if here.exists():
        return str(here)
    found = shutil.which("uwsgi")
    if not found:
        raise LaunchError("uwsgi is not installed; run: pip install 'uwsgitune[demo]'")
    return found


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def render_ini(options: Mapping[str, IniValue]) -> str:
    lines = ["[uwsgi]"]
    for key, value in options.items():
        values = value if isinstance(value, list | tuple) else [value]
        for v in values:
            if isinstance(v, bool):
                v = "true" if v else "false"
            lines.append(f"{key} = {v}")
    return "\n".join(lines) + "\n"


def _interrupt_when_parent_dies() -> None:
    """In the child before exec: the kernel sends SIGINT (uWSGI's graceful stop) when the
    thread that started it dies, even by SIGKILL. Only for a master started by the main
    thread of a short-lived command (the demo): the signal follows that thread."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGINT, 0, 0, 0)


PR_SET_PDEATHSIG = 1


class UwsgiProcess:
    """One uWSGI master started from an ini we write into `workdir`.

    Its files (the ini, the log) are written by path: `workdir` must be a directory only we
    write (the demo's is a new `mkdtemp`, 0700), never one another user controls
    (uwsgitune/nofollow.py is for those)."""

    def __init__(
        self,
        workdir: Path,
        options: Mapping[str, IniValue],
        name: str = "app",
        *,
        die_with_parent: bool = False,
    ) -> None:
        self.die_with_parent = die_with_parent
        self.workdir = Path(workdir)
        self.name = name
        self.ini = self.workdir / f"{name}.ini"
        self.log = self.workdir / f"{name}.log"
        self.stats = str(options.get("stats", ""))
        # `--stats-http` serves the same socket as HTTP: address it as such, never raw (a raw
        # client that sends nothing stalls the master loop).
        http = options.get("stats-http", False)
        if self.stats and http and http != "false" and not self.stats.startswith(("/", "@")):
            self.stats = f"http://{self.stats}"
        fifo = options.get("master-fifo", "")
        self.fifo = str(fifo) if fifo else ""
        self.options = dict(options)
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int:
        return self.proc.pid if self.proc else 0

    def start(self, timeout: float = 15.0) -> UwsgiProcess:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.ini.write_text(render_ini(self.options))
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(
                [find_uwsgi(), "--ini", str(self.ini)],
                cwd=self.workdir,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=_interrupt_when_parent_dies if self.die_with_parent else None,
            )
        self.wait_ready(timeout)
        return self

    def wait_ready(self, timeout: float) -> None:
        """Wait until the stats socket answers and at least one worker is live."""
        from uwsgitune.core.address import parse_address
        from uwsgitune.core.model import parse_stats
        from uwsgitune.sources.stats import StatsError, read_stats

        deadline = time.monotonic() + timeout
        addr = parse_address(self.stats) if self.stats else None
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                raise LaunchError(f"uWSGI exited with {self.proc.returncode}; see {self.log}")
            if addr is None:
                time.sleep(0.5)
                return
            try:
                doc = parse_stats(read_stats(addr, timeout=1.0))
                if doc.live_workers:
                    return
            except (StatsError, ValueError):
                pass
            time.sleep(0.05)
        self.stop()
        raise LaunchError(f"uWSGI did not come up within {timeout:g}s; see {self.log}")

    def fifo_write(self, data: str) -> None:
        fd = os.open(self.fifo, os.O_WRONLY | os.O_NONBLOCK)
        try:
            os.write(fd, data.encode())
        finally:
            os.close(fd)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout: float = 10.0) -> None:
        """Graceful stop (FIFO q, else SIGINT); SIGKILL the group only past the timeout."""
        if self.proc is None or self.proc.poll() is not None:
            return
        try:
            if self.fifo:
                self.fifo_write("q")
            else:
                self.proc.send_signal(signal.SIGINT)
        except OSError:
            self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(timeout / 2)
        except subprocess.TimeoutExpired:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout / 2)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(5)
        self._reap_group()

    def _reap_group(self) -> None:
        """Workers left behind by a killed master share its session: make sure they are gone."""
        if self.proc is None:
            return
        try:
            os.killpg(self.proc.pid, 0)
        except OSError:
            return
        time.sleep(0.2)
        with contextlib.suppress(OSError):
            os.killpg(self.proc.pid, signal.SIGKILL)

    def __enter__(self) -> UwsgiProcess:
        return self.start() if self.proc is None else self

    def __exit__(self, *exc: object) -> None:
        self.stop()
