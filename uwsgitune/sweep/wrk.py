"""Drive wrk (`--loadgen wrk`) for a sweep step: a generator in C that keeps up with uWSGI.

Each step runs wrk twice, as our child: once for the warm-up (discarded), once for the
measured window, with `mark()` (the runner's stats poll) between them, so the server's numbers
and wrk's cover the same window. wrk is closed-loop only (no `--rate`); it is bounded by its
own `-d` and killed, by its PID, if it outlives that by `timeout` + 5 s. Ctrl-C stops it with
SIGINT. Its CPU is read from its rusage when it ends. Without `--keepalive` every request asks
`Connection: close`; wrk then counts the server's close after each answer as a socket read
error, so read errors are failures only with keepalive.
"""

from __future__ import annotations

import os
import re
import resource
import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass

from uwsgitune.sweep.generator import LoadSpec, Window
from uwsgitune.sweep.live import Interrupted, StopFlag, SweepError

UNITS = {"us": 1e-3, "ms": 1.0, "s": 1000.0, "m": 60_000.0}


def find_wrk() -> str | None:
    return shutil.which("wrk")


def command(wrk: str, spec: LoadSpec, seconds: float, threads: int) -> list[str]:
    clients = spec.clients or 1
    threads = max(1, min(threads, clients))
    cmd = [wrk, f"-t{threads}", f"-c{clients}", f"-d{max(1, round(seconds))}s", "--latency"]
    cmd += [f"--timeout={max(1, round(spec.timeout))}s"]
    if not spec.keepalive:
        cmd += ["-H", "Connection: close"]
    return [*cmd, spec.url]


def _ms(text: str) -> float | None:
    m = re.fullmatch(r"([\d.]+)(us|ms|s|m)", text)
    return float(m.group(1)) * UNITS[m.group(2)] if m else None


def parse(out: str, keepalive: bool) -> tuple[int, int, dict[int, float | None]]:
    """(answered ok, failed, {50: p50_ms, 90: ..., 99: ...}) from wrk's report."""
    done = re.search(r"(\d+) requests in", out)
    if done is None:
        raise SweepError(f"wrk gave no result: {out.strip()[-200:] or 'no output'}")
    total = int(done.group(1))
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    bad = int(non2xx.group(1)) if non2xx else 0
    sock = re.search(r"connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    failed = 0
    if sock:
        connect, read, write, timeout = (int(x) for x in sock.groups())
        failed = connect + write + timeout + (read if keepalive else 0)
    pcts = {
        q: _ms(m.group(1))
        for q in (50, 90, 99)
        if (m := re.search(rf"^\s*{q}%[ \t]+(\S+)", out, re.M))
    }
    return max(0, total - bad - failed), bad + failed, dict(pcts)


@dataclass
class Wrk:
    spec: LoadSpec
    stop: StopFlag
    path: str
    threads: int = 1
    mono: Callable[[], float] = time.monotonic
    name: str = "wrk"

    def measure(self, warmup: float, seconds: float, mark: Callable[[], None]) -> Window:
        self._run(warmup)
        mark()
        out, took, cpu = self._run(seconds)
        mark()
        ok, errors, pct = parse(out, self.spec.keepalive)
        return Window(
            seconds=took,
            ok=ok,
            errors=errors,
            p50_ms=pct.get(50),
            p90_ms=pct.get(90),
            p99_ms=pct.get(99),
            gen_cpu_cores=cpu / max(took, 1e-9),
            gen_cores_max=float(max(1, min(self.threads, self.spec.clients or 1))),
        )

    def _run(self, seconds: float) -> tuple[str, float, float]:
        """wrk's report, its wall time, and its CPU seconds."""
        cmd = command(self.path, self.spec, seconds, self.threads)
        start = self.mono()
        deadline = start + max(1, round(seconds)) + self.spec.timeout + 5
        proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
        )
        try:
            usage = self._reap(proc, deadline)
        except BaseException:
            proc.kill()
            proc.wait()
            raise
        finally:
            out = proc.stdout.read().decode(errors="replace") if proc.stdout else ""
            if proc.stdout:
                proc.stdout.close()
        return out, self.mono() - start, usage.ru_utime + usage.ru_stime

    def _reap(self, proc: subprocess.Popen[bytes], deadline: float) -> resource.struct_rusage:
        """Wait for wrk (its report fits the pipe); SIGINT on Ctrl-C, an error past the
        deadline. Reaped here, with its rusage; `proc.returncode` is set from the status."""
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                proc.returncode = os.waitstatus_to_exitcode(status)
                return usage
            if self.stop.is_set:
                proc.send_signal(signal.SIGINT)
                raise Interrupted
            if self.mono() > deadline:
                raise SweepError("wrk did not finish in time; it was stopped")
            time.sleep(0.05)
