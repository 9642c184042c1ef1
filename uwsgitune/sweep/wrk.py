"""Drive wrk (`--loadgen wrk`) for a sweep step: a generator in C that keeps up with uWSGI.

Each step runs wrk twice, as our child: once for the warm-up (discarded), once for the
measured window, with `mark()` (the runner's stats poll) between them, so the server's numbers
and wrk's cover the same window. wrk is closed-loop only (no `--rate`); it is bounded by its
own `-d` and killed, by its PID, if it outlives that by `timeout` + 5 s. Ctrl-C stops it with
SIGINT. Its CPU is read from its rusage when it ends. Without `--keepalive` every request asks
`Connection: close`; wrk then counts the server's close after each answer as a socket read
error, so read errors are failures only with keepalive.

The figures come from wrk's Lua `done()` hook (`wrk_report.lua`, run with `-s`), which prints
one line of JSON: the run's duration, its requests, its errors by kind (connect, read, write,
timeout, and `status`: answers other than 2xx or 3xx) and the latency percentiles, in
microseconds as wrk records them, not its report's rounded text ("1.20ms").
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from importlib.resources import as_file, files
from pathlib import Path

from uwsgitune.sweep.generator import LoadSpec, LoadWindow
from uwsgitune.sweep.live import Interrupted, StopFlag, SweepError

REPORT = files("uwsgitune.sweep").joinpath("wrk_report.lua")
MARK = '{"uwsgitune_wrk": 1,'  # how the report's line begins


def find_wrk() -> str | None:
    return shutil.which("wrk")


def command(wrk: str, spec: LoadSpec, seconds: float, threads: int, script: Path) -> list[str]:
    clients = spec.clients or 1
    threads = max(1, min(threads, clients))
    cmd = [wrk, f"-t{threads}", f"-c{clients}", f"-d{max(1, round(seconds))}s", "-s", str(script)]
    cmd += [f"--timeout={max(1, round(spec.timeout))}s"]
    if not spec.keepalive:
        cmd += ["-H", "Connection: close"]
    return [*cmd, spec.url]


@dataclass(frozen=True)
class WrkReport:
    """One wrk run's figures, as a sweep window counts them."""

    seconds: float  # wrk's own duration of the run
    requests: int  # answers read, whatever their status
    ok: int
    errors: int
    p50_ms: float | None  # None: no request completed
    p90_ms: float | None
    p99_ms: float | None


def parse(out: str, keepalive: bool) -> WrkReport:
    """The figures of wrk's output, from the report script's line of JSON."""
    line = next((x for x in out.splitlines() if x.startswith(MARK)), None)
    if line is None:
        raise SweepError(f"wrk gave no result: {out.strip()[-200:] or 'no output'}")
    try:
        data = json.loads(line)
        errors = data["errors"]
        total, bad = int(data["requests"]), int(errors["status"])
        failed = errors["connect"] + errors["write"] + errors["timeout"]
        failed += errors["read"] if keepalive else 0
        latency = data["latency_us"] or {}
        pcts = {q: latency[f"p{q}"] / 1000 if latency else None for q in (50, 90, 99)}
        seconds = data["duration_us"] / 1e6
    except (ValueError, KeyError, TypeError) as exc:
        raise SweepError(f"wrk's report could not be read ({exc!r}): {line[:200]}") from None
    ok = max(0, total - bad - failed)
    return WrkReport(seconds, total, ok, bad + failed, pcts[50], pcts[90], pcts[99])


@dataclass
class Wrk:
    spec: LoadSpec
    stop: StopFlag
    path: str
    threads: int = 1
    mono: Callable[[], float] = time.monotonic
    name: str = "wrk"

    def measure(self, warmup: float, seconds: float, mark: Callable[[], None]) -> LoadWindow:
        self._run(warmup)
        mark()
        out, took, cpu = self._run(seconds)
        mark()
        report = parse(out, self.spec.keepalive)
        return LoadWindow(
            seconds=report.seconds,
            ok=report.ok,
            errors=report.errors,
            p50_ms=report.p50_ms,
            p90_ms=report.p90_ms,
            p99_ms=report.p99_ms,
            gen_cpu_cores=cpu / max(took, 1e-9),
            gen_cores_max=float(max(1, min(self.threads, self.spec.clients or 1))),
        )

    def _run(self, seconds: float) -> tuple[str, float, float]:
        """wrk's output, its wall time, and its CPU seconds."""
        with as_file(REPORT) as script:
            return self._run_script(seconds, script)

    def _run_script(self, seconds: float, script: Path) -> tuple[str, float, float]:
        cmd = command(self.path, self.spec, seconds, self.threads, script)
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
