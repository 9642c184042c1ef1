"""Issue 38, never harm the instance: uwsgitune stopped (SIGSTOP) for 60 s, then killed
(SIGKILL) and started again, against a real uWSGI under full load.

    .venv/bin/python bench/latency_harm.py [--window 5] [--windows 5] [--stop 60]

**Setup.** A real uWSGI 2.0 from examples/uwsgi.ini's options plus the doctor's lines
(bench/latency_rig.py: cheaper mode, `cheaper-algo = manual`, 8 slots, 4 live workers;
`req-logger = socket:127.0.0.1:PORT`, `log-format`), the app bench/latency_app.py. wrk loads
`/hello` (the trivial route: the master sends a line for every request, as many as it can)
with 1 thread and 4 kept-alive connections, in windows of `--window` seconds; each window
gives wrk's throughput and p99. **A control instance** (the same ini, its request log sent
to a port nobody binds: the `without` condition, all along) is loaded in a window beside
each window of the instance (the order alternates), and each window is judged by its ratio
to its control's (throughput ÷ the control's, p99 ÷ the control's): the machine is shared
with other work whose load drifts over minutes, and the ratio takes the drift out (a first
run without the control, kept in git history, saw the same condition 92% faster four
minutes later). uwsgitune runs as a user runs it:
`uwsgitune watch --plain --json --interval 1 --latency 127.0.0.1:PORT --metrics-listen
127.0.0.1:MPORT STATS`, our child; what it recorded is read from its /metrics
(`uwsgitune_latency_lines_total`, and `histogram_quantile(0.99)` over
`uwsgi_request_duration_seconds`).

**Phases, in order** (`--windows` windows each unless said):
1. `without`: no uwsgitune (nobody bound on PORT: the master's datagrams are refused by the
   kernel).
2. `running`: uwsgitune started; it must be reading (its socket's queue near empty).
3. `stopped`: uwsgitune SIGSTOPped for at least `--stop` (60) s: first the windows, then, under the
   same load, a FIFO `+` (one more live worker), a graceful reload (FIFO `r`: every worker
   pid new) and a worker respawn (one worker SIGKILLed: a new pid in its slot), each
   verified from the stats socket, each within 20 s; then the rest of the `--stop` seconds;
   then SIGCONT. The stop is real: its socket's queue fills and the kernel counts drops.
4. `killed`: uwsgitune SIGKILLed (its socket gone).
5. `restarted`: uwsgitune started again; it picks up: its new socket is drained while lines
   keep coming, and its /metrics shows lines recorded and a p99 again.
For each phase with uwsgitune running, the kernel's drops on its socket are counted over
the windows alone (after the 3 s it is given to start), and its /metrics read after them.

**Compared (pass/fail).** The noise is the spread of the `without` windows' ratios: a phase
passes when its mean throughput ratio and mean p99 ratio are each within the `without`
mean ± max(2 standard deviations of the `without` ratios, 10%). `stopped` and `killed`
are judged (uwsgitune takes no CPU then, so any loss is harm done to uWSGI); `running` and
`restarted` are reported and judged the same way, but on this 2-core machine a running
uwsgitune takes CPU from wrk and the app on a saturated trivial route (its cost:
bench/results/latency_overhead.md), so a miss there is that cost, not harm. Every event
must complete (a MISS otherwise), wrk must count no errors but the reload's cut kept-alive
connections (at most 1% of requests), and uWSGI must be alive at the end.

Writes bench/results/latency_harm.md (with the commit).
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from latency_rig import ROOT, commit, instance, machine, scrape, udp_socket, url, wrk

from uwsgitune.core.address import parse_address
from uwsgitune.core.model import StatsDoc, parse_stats
from uwsgitune.launch import UwsgiProcess, free_port
from uwsgitune.sources.stats import read_stats

OUT = ROOT / "bench" / "results" / "latency_harm.md"
EVENT_TIMEOUT = 20.0
UWSGITUNE = Path(sys.executable).parent / "uwsgitune"


def doc(proc: UwsgiProcess) -> StatsDoc:
    return parse_stats(read_stats(parse_address(proc.stats), timeout=2.0))


def wait_doc(proc: UwsgiProcess, cond: Callable[[StatsDoc], bool], what: str) -> float | str:
    start = time.monotonic()
    while time.monotonic() - start < EVENT_TIMEOUT:
        try:
            if cond(doc(proc)):
                return time.monotonic() - start
        except Exception:
            pass
        time.sleep(0.1)
    return f"{what}: not done in {EVENT_TIMEOUT:g} s"


class Watcher:
    """`uwsgitune watch --plain --json --latency` as our child; its JSON lines kept."""

    def __init__(self, stats: str, port: int, workdir: Path) -> None:
        self.out = workdir / f"watch-{time.monotonic_ns()}.jsonl"
        self.metrics = free_port()
        cmd = [str(UWSGITUNE), "watch", "--plain", "--json", "--interval", "1"]
        cmd += ["--latency", f"127.0.0.1:{port}", "--metrics-listen"]
        cmd += [f"127.0.0.1:{self.metrics}", stats]
        with self.out.open("wb") as f:
            self.proc = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT)

    def recorded(self) -> str:
        """What its /metrics says it recorded."""
        got = scrape(self.metrics)
        if got is None:
            return "/metrics: no answer"
        p99 = "none" if got["p99_ms"] is None else f"{got['p99_ms']:.2f} ms"
        return f"/metrics: {got['lines']} lines recorded, p99 {p99}"

    def signal(self, sig: int) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, sig)

    def kill(self) -> None:
        self.signal(signal.SIGCONT)
        self.signal(signal.SIGKILL)
        self.proc.wait(5)


def window(proc: UwsgiProcess, seconds: float) -> dict[str, Any]:
    r = wrk(url(proc, "/hello"), seconds, 4)
    return {
        "rps": r["requests"] / (r["duration_us"] / 1e6),
        "p99": r["latency_us"]["p99"] / 1e3,
        "requests": r["requests"],
        "errors": sum(r["errors"].values()),
    }


def windows(
    proc: UwsgiProcess, control: UwsgiProcess, n: int, seconds: float
) -> list[dict[str, Any]]:
    """`n` pairs of windows, the control's and the instance's (the order alternates); each
    window of the instance carries its ratios to its control window."""
    out = []
    for i in range(n):
        if i % 2:
            mine, theirs = window(proc, seconds), window(control, seconds)
        else:
            theirs, mine = window(control, seconds), window(proc, seconds)
        mine["rps_ratio"] = mine["rps"] / theirs["rps"]
        mine["p99_ratio"] = mine["p99"] / theirs["p99"]
        mine["control"] = theirs
        out.append(mine)
    return out


def events(proc: UwsgiProcess) -> tuple[dict[str, float | str], dict[str, Any]]:
    """FIFO +, reload, respawn under a wrk load; each verified from the stats."""
    loaded: list[dict[str, Any]] = []
    load = threading.Thread(target=lambda: loaded.append(wrk(url(proc, "/hello"), 25, 4)))
    load.start()
    took: dict[str, float | str] = {}
    try:
        time.sleep(1.0)
        live = len(doc(proc).live_workers)
        proc.fifo_write("+")
        took["FIFO +"] = wait_doc(proc, lambda d: len(d.live_workers) == live + 1, "FIFO +")
        pids = {w.pid for w in doc(proc).live_workers}
        proc.fifo_write("r")
        took["reload r"] = wait_doc(
            proc,
            lambda d: bool(d.live_workers) and not pids & {w.pid for w in d.live_workers},
            "reload r",
        )
        time.sleep(1.0)
        victim = doc(proc).live_workers[0]
        os.kill(victim.pid, signal.SIGKILL)  # a worker of the instance we started
        took["worker respawn"] = wait_doc(
            proc,
            lambda d: any(w.id == victim.id and w.pid not in (0, victim.pid) for w in d.workers),
            "worker respawn",
        )
    finally:
        load.join(60)
    return took, loaded[0] if loaded else {}


def dropped(port: int) -> int:
    q = udp_socket(port)
    return q[1] if q else 0


def settled(port: int, drops_before: int) -> str:
    """uwsgitune's socket a second after a load: it reads when nothing is left queued."""
    time.sleep(1.0)
    q = udp_socket(port)
    if q is None:
        return "not bound"
    return (
        f"{q[0]} bytes queued 1 s after the load, {q[1] - drops_before} datagrams dropped by "
        f"the kernel during the windows ({drops_before} before them, while it started)"
    )


def judge(phase: list[dict[str, Any]], base: list[dict[str, Any]]) -> tuple[str, str, bool]:
    """Each ratio's phase mean against the `without` mean ± max(2 sd, 10%)."""
    out = []
    ok = True
    for key in ("rps_ratio", "p99_ratio"):
        b = [w[key] for w in base]
        mean, sd = statistics.mean(b), statistics.stdev(b) if len(b) > 1 else 0.0
        band = max(2 * sd, 0.10 * mean)
        got = statistics.mean(w[key] for w in phase)
        inside = abs(got - mean) <= band
        ok &= inside
        out.append(f"{got:.3f} ({(got - mean) / mean:+.1%})")
    return out[0], out[1], ok


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--window", type=float, default=5.0)
    ap.add_argument("--windows", type=int, default=5)
    ap.add_argument("--stop", type=float, default=60.0)
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args()
    head = ["# Never harm the instance: uwsgitune stopped and killed (issue 38)", "", __doc__]
    args.out.write_text("\n".join(head))  # the definitions, before any number
    started = machine()
    workdir = Path(tempfile.mkdtemp(prefix="uwt-harm-", dir="/tmp"))
    port = free_port()
    proc = instance(workdir, logger_port=port)
    control = instance(workdir / "control", logger_port=free_port())  # nobody on its port
    phases: dict[str, list[dict[str, Any]]] = {}
    notes: dict[str, str] = {}
    took: dict[str, float | str] = {}
    during: dict[str, Any] = {}
    watcher: Watcher | None = None
    try:
        wrk(url(proc, "/hello"), 2, 4)  # warm-ups
        wrk(url(control, "/hello"), 2, 4)
        phases["without"] = windows(proc, control, args.windows, args.window)
        watcher = Watcher(proc.stats, port, workdir)
        time.sleep(3.0)
        drops = dropped(port)
        phases["running"] = windows(proc, control, args.windows, args.window)
        notes["running"] = f"{settled(port, drops)}; {watcher.recorded()}"
        lines_before = watcher.recorded()
        watcher.signal(signal.SIGSTOP)
        stop_at = time.monotonic()
        phases["stopped"] = windows(proc, control, args.windows, args.window)
        took, during = events(proc)
        rest = args.stop - (time.monotonic() - stop_at)
        if rest > 0:
            time.sleep(rest)
        q = udp_socket(port)
        stopped_for = time.monotonic() - stop_at
        notes["stopped"] = (
            f"stopped {stopped_for:.0f} s; its socket at the end: "
            f"{q[0] if q else '?'} bytes queued, {q[1] if q else '?'} datagrams dropped by the "
            f"kernel; before the stop: {lines_before}"
        )
        watcher.signal(signal.SIGCONT)
        time.sleep(2.0)
        q = udp_socket(port)
        notes["stopped"] += (
            f"; 2 s after SIGCONT: {q[0] if q else '?'} bytes queued, {watcher.recorded()}"
        )
        watcher.kill()
        watcher = None
        phases["killed"] = windows(proc, control, args.windows, args.window)
        notes["killed"] = f"its socket: {'gone' if udp_socket(port) is None else 'still bound'}"
        watcher = Watcher(proc.stats, port, workdir)
        time.sleep(3.0)
        drops = dropped(port)
        phases["restarted"] = windows(proc, control, args.windows, args.window)
        notes["restarted"] = f"its new socket: {settled(port, drops)}; {watcher.recorded()}"
        alive = proc.alive()
    finally:
        if watcher is not None:
            watcher.kill()
        proc.stop()
        control.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    text = ["", f"## Results (commit {commit()}; {started})", ""]
    text += [
        "| phase | window pairs | requests/s ÷ control's (vs without) | wrk p99 ÷ control's "
        "(vs without) | errors | verdict | notes |",
        "|---|---|---|---|---|---|---|",
    ]
    misses = 0
    for name, ws in phases.items():
        rps, p99, ok = judge(ws, phases["without"])
        errs = sum(w["errors"] for w in ws)
        judged = name in ("stopped", "killed")
        misses += judged and not ok
        verdict = ("pass" if ok else "**MISS**") if judged else ("within" if ok else "outside")
        text.append(
            f"| {name} | {len(ws)} | {rps} | {p99} | {errs} | {verdict} | {notes.get(name, '')} |"
        )
    text += ["", "Windows (requests/s, p99 ms; the control's in brackets):", ""]
    for name, ws in phases.items():
        text.append(
            f"- {name}: "
            + ", ".join(
                f"{w['rps']:.0f} / {w['p99']:.2f} [{w['control']['rps']:.0f} / "
                f"{w['control']['p99']:.2f}]"
                for w in ws
            )
        )
    text += ["", "**Events while uwsgitune was stopped (each verified from the stats):**", ""]
    for what, t in took.items():
        done = isinstance(t, float)
        misses += not done
        text.append(f"- {what}: " + (f"done in {t:.1f} s" if done else f"**MISS**: {t}"))
    if during:
        n, errs = during["requests"], during["errors"]
        bad = sum(errs.values())
        misses += bad > 0.01 * max(n, 1)
        text.append(
            f"- wrk during the events: {n} requests, errors {errs} "
            f"({'pass' if bad <= 0.01 * max(n, 1) else '**MISS**'}: at most 1%)"
        )
    misses += not alive
    text += ["", f"uWSGI alive at the end: {alive}. **{misses} miss(es).**", ""]
    args.out.write_text("\n".join(head + text))
    print("\n".join(text))


if __name__ == "__main__":
    main()
