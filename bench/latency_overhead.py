"""Issue 38, cost: what the request log costs uwsgitune, uWSGI's master and the app.

    .venv/bin/python bench/latency_overhead.py [--part stage|load|all] [--rounds 6]

**A. uwsgitune's CPU per ingested line, end to end** (target: <= 5 µs at 10k requests/s).
A `LatencyStage` (pipeline/latencystage.py) runs as `watch --latency` runs it: its reader
thread waits on the socket, drains it, proves the sender (sources/logsender.py), parses and
records every line (core/logline.py, core/latency.py); this process's main thread reads
`view()` once a second, as a poll does. A separate process sends uWSGI-shaped lines (those
of bench/latency_cost.py: the default request line with the tail, an nginx stamp on every
line, 8 workers, 40 routes) over UDP on loopback at `--rate` (10,000/s) in bursts every
millisecond, for `--seconds` per round. Measured: the reader thread's CPU (its own CPU
clock, `pthread_getcpuclockid`, ns resolution) ÷ lines recorded; the main thread's CPU in
`view()` ÷ the same lines; their sum is the cost per line. Rounds: `--rounds`; verdict on
the median round's sum: **<= 5 µs** (pass) or a MISS. Lines lost (kernel drops) are
reported.

**B. uWSGI's master: added CPU per request with the logger on vs off.** Instances of the
same ini (examples/uwsgi.ini's options, bench/latency_rig.py; 4 workers, the trivial route
`/hello` of bench/latency_app.py on the kept-alive `http11-socket`), loaded in turn by wrk
(1 thread, 4 kept-alive connections, `--wrk-seconds` each), in interleaved rounds (each
round visits every instance, in an order that rotates; `--rounds` rounds):
- `off`: `disable-logging = true` (the example's default);
- `on`: the doctor's lines (`req-logger = socket:...`, `log-format` = uWSGI's default line
  then the tail) and a `LatencyStage` reading them in this process, as a user runs it;
- `on, tail only`: the same with `log-format` = the tail alone (what a user who keeps no
  request log of their own could set);
- `on, nobody reading`: the doctor's lines, no receiver on the port (uwsgitune stopped);
- `on, sampled 1 in 20` (added 2026-11-28, before its first run): the doctor's lines for
  `--sample 20` (`disable-logging = true`, `uwsgitune-sample = 20`, `import` of
  uwsgitune/uwsgi_sample.py, the sampled tail) and a `LatencyStage` reading them.
Per round: the master's CPU (utime + stime of /proc/<master>/stat, clock ticks of 10 ms)
and the workers' (the sum over the master's children) ÷ wrk's requests. Reported: each
instance's mean and its difference from `off` (µs per request): measured, no threshold
(the issue asks for it to be measured).

**C. The app's throughput on the trivial route, logger on vs off**, from the same rounds:
wrk's requests/s. The loss = 1 − mean(on) / mean(off), with a 95% confidence interval of
the difference of the means (Welch's t). A verdict on each of the doctor's two setups with
uwsgitune reading, `on` (every request logged) and `on, sampled 1 in 20`: pass when the
interval holds 0 or the loss is below 5%; else a MISS. The other variants are reported to
say where a loss comes from. The machine has 2 cores:
wrk, the workers, the master and uwsgitune share them, so any CPU the logging adds is
throughput taken from the app on this trivial route (the worst case: the app does nothing).

Writes bench/results/latency_overhead.md (with the commit).
"""

from __future__ import annotations

import argparse
import math
import multiprocessing
import os
import shutil
import socket
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from latency_cost import datagrams
from latency_rig import ROOT, commit, instance, machine, url, wrk

from uwsgitune.core.logline import TAIL_FORMAT
from uwsgitune.launch import free_port
from uwsgitune.pipeline.latencystage import BATCH_EVERY, LatencyStage

OUT = ROOT / "bench" / "results" / "latency_overhead.md"
TARGET_US = 5.0
TICK = os.sysconf("SC_CLK_TCK")


# -- A. the stage -------------------------------------------------------------------------


def send(address: tuple[str, int], rate: float, seconds: float, ready: Any) -> None:
    lines = datagrams(20_000)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as tx:
        tx.sendto(lines[0], address)  # the first line: the stage proves this socket
        ready.wait()
        start = time.monotonic()
        sent = 0
        while (now := time.monotonic() - start) < seconds:
            due = int(now * rate)
            while sent < due:
                tx.sendto(lines[sent % len(lines)], address)
                sent += 1
            time.sleep(0.001)


def thread_cpu(thread: threading.Thread) -> float:
    assert thread.ident is not None
    return time.clock_gettime(time.pthread_getcpuclockid(thread.ident))


def stage_round(rate: float, seconds: float, batch_every: float) -> dict[str, float]:
    port = free_port()
    ready = multiprocessing.Event()
    sender = multiprocessing.Process(target=send, args=(("127.0.0.1", port), rate, seconds, ready))
    stage = LatencyStage(("127.0.0.1", port), batch_every=batch_every)
    try:
        sender.start()
        stage.set_master(sender.pid or 0)  # the sender is the "master": its lines are proven
        stage.start()
        reader = stage._thread
        assert reader is not None
        while stage.recorder.recorded < 1:
            time.sleep(0.01)
        cpu0, lines0 = thread_cpu(reader), stage.recorder.recorded
        view_cpu = 0.0
        ready.set()
        next_view = time.monotonic() + 1.0
        while sender.is_alive():
            time.sleep(0.05)
            if time.monotonic() >= next_view:
                c0 = time.thread_time()
                stage.view(None)
                view_cpu += time.thread_time() - c0
                next_view += 1.0
        time.sleep(0.3)  # the last lines drained
        cpu = thread_cpu(reader) - cpu0
        lines = stage.recorder.recorded - lines0
        drops = stage.receiver.totals.kernel_drops
    finally:
        stage.close()
        sender.join(5)
    return {
        "lines": lines,
        "reader_us": cpu / lines * 1e6,
        "view_us": view_cpu / lines * 1e6,
        "total_us": (cpu + view_cpu) / lines * 1e6,
        "drops": drops,
    }


def part_stage(args: Any) -> list[str]:
    rows = []
    for i in range(args.rounds):
        r = stage_round(args.rate, args.seconds, args.batch_every)
        rows.append(r)
        print(f"stage round {i + 1}: {r}", flush=True)
    med = statistics.median(r["total_us"] for r in rows)
    ok = med <= TARGET_US
    return [
        f"## A. uwsgitune's CPU per line, end to end, at {args.rate:.0f} lines/s",
        "",
        f"**Median of {len(rows)} rounds: {med:.2f} µs per line (reader thread + view). "
        f"Target <= {TARGET_US:g} µs: {'pass' if ok else 'MISS'}.**",
        "",
        "| round | lines | reader thread µs/line | view() µs/line | total µs/line | kernel drops |",
        "|---|---|---|---|---|---|",
        *(
            f"| {i} | {r['lines']:.0f} | {r['reader_us']:.2f} | {r['view_us']:.2f} | "
            f"{r['total_us']:.2f} | {r['drops']:.0f} |"
            for i, r in enumerate(rows, 1)
        ),
        "",
    ]


# -- B and C. the master and the app -----------------------------------------------------


def cpu_ticks(pid: int) -> tuple[int, int]:
    """(the master's utime + stime, its children's) in clock ticks."""

    def ticks(p: int) -> int:
        with open(f"/proc/{p}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return int(fields[11]) + int(fields[12])

    with open(f"/proc/{pid}/task/{pid}/children") as f:
        kids = [int(x) for x in f.read().split()]
    return ticks(pid), sum(ticks(k) for k in kids)


def load_round(proc: Any, seconds: float) -> dict[str, float]:
    m0, w0 = cpu_ticks(proc.pid)
    r = wrk(url(proc, "/hello"), seconds, 4)
    m1, w1 = cpu_ticks(proc.pid)
    n = r["requests"]
    return {
        "rps": n / (r["duration_us"] / 1e6),
        "master_us": (m1 - m0) / TICK / n * 1e6,
        "workers_us": (w1 - w0) / TICK / n * 1e6,
        "errors": sum(r["errors"].values()),
    }


def welch(a: list[float], b: list[float]) -> tuple[float, float]:
    """The difference of the means (a − b) and the half-width of its 95% interval."""
    va, vb = statistics.variance(a) / len(a), statistics.variance(b) / len(b)
    se = math.sqrt(va + vb)
    df = (va + vb) ** 2 / (va**2 / (len(a) - 1) + vb**2 / (len(b) - 1)) if se else 1.0
    return statistics.mean(a) - statistics.mean(b), t95(df) * se


def t95(df: float) -> float:
    """Student's t, two-sided 95%, for `df` degrees of freedom (table, interpolated)."""
    table = {1: 12.71, 2: 4.30, 3: 3.18, 4: 2.78, 5: 2.57, 6: 2.45, 7: 2.36, 8: 2.31, 9: 2.26}
    table |= {10: 2.23, 12: 2.18, 15: 2.13, 20: 2.09, 30: 2.04}
    keys = sorted(table)
    if df >= keys[-1]:
        return 1.96 if df > 120 else 2.0
    lo = max(k for k in keys if k <= max(df, 1))
    hi = min(k for k in keys if k >= max(df, 1))
    if lo == hi:
        return table[lo]
    return table[lo] + (table[hi] - table[lo]) * (df - lo) / (hi - lo)


SAMPLED = "on, sampled 1 in 20"
VARIANTS = ("off", "on", "on, tail only", "on, nobody reading", SAMPLED)
JUDGED = ("on", SAMPLED)


def part_load(args: Any) -> list[str]:
    base = Path(tempfile.mkdtemp(prefix="uwt-ovh-", dir="/tmp"))
    port, tail_port, sampled_port = free_port(), free_port(), free_port()
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.bind(("127.0.0.1", 0))
        nobody = probe.getsockname()[1]  # free once closed: nobody binds it afterwards
    procs = {
        "off": instance(base / "off", logger_port=None),
        "on": instance(base / "on", logger_port=port),
        "on, tail only": instance(base / "tail", logger_port=tail_port, fmt=TAIL_FORMAT),
        "on, nobody reading": instance(base / "nobody", logger_port=nobody),
        SAMPLED: instance(base / "sampled", logger_port=sampled_port, sample=20),
    }
    stages = [LatencyStage(("127.0.0.1", p)) for p in (port, tail_port, sampled_port)]
    for stage, name in zip(stages, ("on", "on, tail only", SAMPLED), strict=True):
        stage.set_master(procs[name].pid)
        stage.start()
    rows: dict[str, list[dict[str, float]]] = {k: [] for k in VARIANTS}
    try:
        for proc in procs.values():
            wrk(url(proc, "/hello"), 2, 4)  # warm-up
        for i in range(args.rounds):
            order = VARIANTS[i % len(VARIANTS) :] + VARIANTS[: i % len(VARIANTS)]
            for name in order:
                r = load_round(procs[name], args.wrk_seconds)
                rows[name].append(r)
                print(f"{name} {i + 1}: {r}", flush=True)
        lines = stages[0].recorder.recorded
        sampled_lines = stages[2].recorder.recorded
        every = stages[2].recorder.sample_every
    finally:
        for stage in stages:
            stage.close()
        for proc in procs.values():
            proc.stop()
        shutil.rmtree(base, ignore_errors=True)
    mean = {k: {f: statistics.mean(r[f] for r in v) for f in v[0]} for k, v in rows.items()}
    off = mean["off"]
    out = [
        f"## B. uWSGI's master: CPU per request, logger on vs off ({args.rounds} interleaved "
        f"rounds, wrk {args.wrk_seconds:g} s each, /hello)",
        "",
        "| instance | master µs/request | − off | workers µs/request | − off | requests/s "
        "| errors |",
        "|---|---|---|---|---|---|---|",
        *(
            f"| {k} | {m['master_us']:.2f} | {m['master_us'] - off['master_us']:+.2f} | "
            f"{m['workers_us']:.2f} | {m['workers_us'] - off['workers_us']:+.2f} | "
            f"{m['rps']:.0f} | {m['errors']:.0f} |"
            for k, m in mean.items()
        ),
        "",
        f"uwsgitune recorded {lines} lines from `on` (wrk counted about "
        f"{sum(r['rps'] for r in rows['on']) * args.wrk_seconds:.0f} requests there); "
        f"{sampled_lines} lines from `{SAMPLED}`, which said 1 in {every} (wrk counted about "
        f"{sum(r['rps'] for r in rows[SAMPLED]) * args.wrk_seconds:.0f} requests there).",
        "",
        "## C. The app's throughput on the trivial route, logger on vs off",
        "",
        "| instance | requests/s (mean) | loss vs off | difference, 95% interval | verdict |",
        "|---|---|---|---|---|",
    ]
    for name in VARIANTS[1:]:
        diff, half = welch([r["rps"] for r in rows[name]], [r["rps"] for r in rows["off"]])
        loss = 1 - mean[name]["rps"] / off["rps"]
        ok = abs(diff) <= half or loss < 0.05
        judged = "pass" if ok else "**MISS**"
        out.append(
            f"| {name} | {mean[name]['rps']:.0f} | {loss:.1%} | {diff:+.0f} ± {half:.0f} | "
            + (judged if name in JUDGED else f"({judged}: not the verdict)")
            + " |"
        )
    out += [
        "",
        "| round | " + " | ".join(f"{k}: requests/s" for k in VARIANTS) + " |",
        "|---|" + "---|" * len(VARIANTS),
        *(
            f"| {i + 1} | " + " | ".join(f"{rows[k][i]['rps']:.0f}" for k in VARIANTS) + " |"
            for i in range(args.rounds)
        ),
        "",
    ]
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--part", choices=("stage", "load", "all"), default="all")
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--rate", type=float, default=10_000)
    ap.add_argument("--seconds", type=float, default=5.0, help="per stage round")
    ap.add_argument("--batch-every", type=float, default=BATCH_EVERY)
    ap.add_argument("--wrk-seconds", type=float, default=5.0)
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args()
    head = ["# The request log's cost (issue 38)", "", __doc__ or ""]
    args.out.write_text("\n".join(head))  # the definitions, before any number
    text = ["", f"## Run: commit {commit()}; {machine()}", ""]
    if args.part in ("stage", "all"):
        text += part_stage(args)
    if args.part in ("load", "all"):
        text += part_load(args)
    text += [f"Load average after: {machine()}", ""]
    args.out.write_text("\n".join(head + text))
    print("\n".join(text))


if __name__ == "__main__":
    main()
