"""How close sweep's load generators come to wrk's throughput, same instance, same run.

    .venv/bin/python bench/sweep_vs_wrk.py [--seconds 5] [--workers 4] [--clients 16]

One uWSGI at a fixed worker count (`http11-socket`, so keepalive connections stay open when
asked for). For each route and each of non-keepalive and keepalive, three generators run back
to back, in an order that rotates by row:
- wrk itself as a person would run it (`-t2`; `-H 'Connection: close'` without keepalive);
- sweep's `--loadgen wrk` (the default where wrk is installed): `uwsgitune.sweep.wrk.Wrk`
  measuring one window after a 1 s warm-up, exactly as a sweep step does;
- sweep's `--loadgen builtin` (`uwsgitune.sweep.generator.Builtin`, asyncio, one core).
Each sweep generator's ratio is its req/s over wrk's; its own CPU (cores) is shown.
Writes bench/results/sweep_vs_wrk.md. Needs wrk (`apt-get install -y wrk`).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from importlib.resources import as_file
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.uwsgi_harness import uwsgi_instance
from uwsgitune.launch import free_port
from uwsgitune.sweep.generator import Builtin, Generator, LoadSpec, LoadWindow
from uwsgitune.sweep.live import StopFlag
from uwsgitune.sweep.wrk import REPORT, Wrk, parse

ROUTES = {
    "/io/20": "server-bound: 20 ms waits, workers / 0.02 s is the ceiling",
    "/cpu/5": "server-bound: 5 ms of CPU, client and server share the 2 cores",
    "/hello": "trivial: the generator's own ceiling",
}
RESULTS = Path(__file__).resolve().parent / "results" / "sweep_vs_wrk.md"
WRK_THREADS = 2


def plain_wrk(wrk: str, target: str, clients: int, seconds: float, keepalive: bool) -> float:
    """wrk's requests a second (its "Requests/sec"), from its report script's JSON."""
    with as_file(REPORT) as script:
        cmd = [wrk, f"-t{WRK_THREADS}", f"-c{clients}", f"-d{seconds:g}s", "-s", str(script)]
        if not keepalive:
            cmd += ["-H", "Connection: close"]
        out = subprocess.run([*cmd, target], capture_output=True, text=True, timeout=seconds + 30)
    report = parse(out.stdout, keepalive)
    return report.requests / report.seconds


def ours(gen: Generator, seconds: float) -> LoadWindow:
    return gen.measure(1.0, seconds, lambda: None)


def row(
    wrk: str, target: str, args: argparse.Namespace, keepalive: bool, i: int
) -> tuple[float, LoadWindow, LoadWindow]:
    """Each generator `--repeat` times, the order rotating every round; the median of each."""
    spec = LoadSpec(target, clients=args.clients, keepalive=keepalive, timeout=10.0)
    runs = [
        lambda: plain_wrk(wrk, target, args.clients, args.seconds, keepalive),
        lambda: ours(Wrk(spec, StopFlag(), wrk, threads=WRK_THREADS), args.seconds),
        lambda: ours(Builtin(spec, StopFlag()), args.seconds),
    ]
    got: dict[int, list[Any]] = {0: [], 1: [], 2: []}
    for r in range(args.repeat):
        for k in [(i + r + k) % 3 for k in range(3)]:
            got[k].append(runs[k]())
            time.sleep(0.5)
    ref = statistics.median(got[0])
    drv = sorted(got[1], key=lambda w: w.ok / w.seconds)[len(got[1]) // 2]
    builtin = sorted(got[2], key=lambda w: w.ok / w.seconds)[len(got[2]) // 2]
    return ref, drv, builtin


def cell(w: LoadWindow, ref: float) -> str:
    tput = w.ok / w.seconds
    flag = ", generator-bound" if w.generator_bound else ""
    cpu = f"{w.gen_cpu_cores:.2f}" if w.gen_cpu_cores is not None else "-"
    return f"{tput:.0f} (gen {cpu} cores{flag}) | {tput / ref:.2f}" if ref else f"{tput:.0f} | -"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--repeat", type=int, default=3, help="runs per generator; the median")
    ap.add_argument("--note", default="", help="what else was running")
    args = ap.parse_args()
    wrk = shutil.which("wrk")
    if wrk is None:
        print("wrk is not installed: apt-get install -y wrk", file=sys.stderr)
        return 1
    port = free_port()
    rows = []
    opts = {"http_socket": None, "http11_socket": f"127.0.0.1:{port}", "processes": args.workers}
    with uwsgi_instance(**opts):  # type: ignore[arg-type]
        for i, (route, what) in enumerate(ROUTES.items()):
            for j, keepalive in enumerate((False, True)):
                target = f"http://127.0.0.1:{port}{route}"
                ref, drv, builtin = row(wrk, target, args, keepalive, 2 * i + j)
                ka = "keepalive" if keepalive else "close"
                line = f"| `{route}` | {ka} | {what} | {ref:.0f} | {cell(drv, ref)} | "
                rows.append(line + f"{cell(builtin, ref)} |")
                print(rows[-1], flush=True)
    write(rows, args)
    return 0


def write(rows: list[str], args: argparse.Namespace) -> None:
    load = os.getloadavg()
    head = [
        "# sweep's load generators against wrk",
        "",
        f"uWSGI {args.workers} workers (fixed, `http11-socket`), {args.clients} clients, "
        f"{args.seconds:g} s per run, the median of {args.repeat} runs each (order rotating), "
        f"loopback. Reference: wrk `-t{WRK_THREADS}` "
        "(`-H 'Connection: close'` for the close rows). `--loadgen wrk` is sweep's wrk driver "
        "measuring one step window; `--loadgen builtin` is the asyncio generator. Ratio = "
        f"sweep / wrk. Machine: {os.cpu_count()} CPUs; run {time.strftime('%Y-%m-%d %H:%M')} "
        f"UTC, load average {load[0]:.1f} at the end. {args.note}",
        "",
        "| route | connections | shape | wrk req/s | `--loadgen wrk` req/s | ratio "
        "| `--loadgen builtin` req/s | ratio |",
        "|---|---|---|---|---|---|---|---|",
    ]
    notes = [
        "",
        "`gen` is the generator's own CPU over the window (wrk's from its rusage, builtin's",
        "from this process); a generator at 85% or more of the cores it can use is",
        "generator-bound, and a sweep flags such a step and never takes it as the app's",
        "throughput. The builtin generator is one Python thread: on a trivial route it is the",
        "bottleneck, which is why `--loadgen auto` drives wrk wherever it is installed; the",
        "builtin remains for hosts without wrk and for the open loop (`--rate`), which wrk",
        "does not do.",
        "",
        "On `/hello` wrk and uWSGI share the 2 cores, so any one run moves by ±20% with the",
        "scheduler; a ratio above 1 there is that spread, not a faster generator.",
    ]
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text("\n".join(head + rows + notes) + "\n")
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    sys.exit(main())
