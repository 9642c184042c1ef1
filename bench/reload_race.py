"""How many requests a graceful reload (`r` on the master FIFO) fails under load.

uWSGI 2.0's SIGHUP handler in a worker (`gracefully_kill`) exits at once unless the worker's
core is `in_request`, and a worker sets that only after `accept()` has returned and the
first read begins. A reload that lands between the two closes an accepted connection with
the request unread: the client gets a reset (unbit/uwsgi#1375, open). This measures it: a
closed loop of non-keepalive clients on a real uWSGI, a reload every `--every` seconds,
`--reloads` times, and the same length of load with no reload as the control. Each error
is reported with its time after the reload before it.

    .venv/bin/python bench/reload_race.py [--reloads 150] [--every 2] [--processes 16]
        [--clients 16] [--path /cpu/1] [--out bench/results/reload_race.md]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.uwsgi_harness import url, uwsgi_instance  # noqa: E402
from uwsgitune.loadgen import LoadRun  # noqa: E402

APP = ROOT / "bench" / "scenario_app.py"
LOADGEN_NICE = -10  # ahead of the workers on the shared CPUs (needs root, as here)


@dataclass
class Sitting:
    reloads: int
    ok: int
    rps: float
    errors: int
    kinds: dict[str, int]
    after_reload_s: list[float | None]


def _send(fifo: str, stop: threading.Event) -> bool:
    """`r` to the master, once it reads its FIFO again (ENXIO: a reload of many busy
    workers is still under way); False if it never does within 30 s."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not stop.is_set():
        try:
            fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        except OSError:
            stop.wait(0.2)
            continue
        try:
            os.write(fd, b"r")
        finally:
            os.close(fd)
        return True
    return False


def _reloader(fifo: str, n: int, every: float, stop: threading.Event, out: list[float]) -> None:
    for _ in range(n):
        if stop.wait(every) or not _send(fifo, stop):
            return
        out.append(time.monotonic())


def sitting(args: argparse.Namespace, reloads: int) -> Sitting:
    opts = {"listen": 128, "wsgi-file": str(APP), "processes": args.processes}
    with uwsgi_instance(**opts) as proc:
        time.sleep(2)  # past the first requests' warm-up
        stamps: list[float] = []
        stop = threading.Event()
        th = threading.Thread(target=_reloader, args=(proc.fifo, reloads, args.every, stop, stamps))
        th.start()
        seconds = args.reloads * args.every + 3
        run = LoadRun(url(proc, args.path), duration=seconds, max_requests=5_000_000, timeout=30)
        os.setpriority(os.PRIO_PROCESS, 0, LOADGEN_NICE)
        try:
            res = asyncio.run(run.closed_loop(args.clients))
        finally:
            os.setpriority(os.PRIO_PROCESS, 0, 0)
            stop.set()
            th.join()
    after = [min((t - s for s in stamps if s <= t), default=None) for t in res.failed_at]
    return Sitting(
        reloads=len(stamps),
        ok=res.ok,
        rps=res.throughput,
        errors=res.errors,
        kinds=dict(res.error_kinds),
        after_reload_s=[None if a is None else round(a, 3) for a in after],
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reloads", type=int, default=150)
    ap.add_argument("--every", type=float, default=2.0)
    ap.add_argument("--processes", type=int, default=16)
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--path", default="/cpu/1")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "reload_race.md")
    args = ap.parse_args()
    rows = [
        ("control, no reload", sitting(args, 0)),
        (f"`r` every {args.every:g} s", sitting(args, args.reloads)),
    ]
    lines = [
        "## Sitting\n",
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; real uWSGI, `processes "
        f"{args.processes}`, {args.clients} closed-loop non-keepalive clients on `{args.path}`"
        f", {args.reloads * args.every + 3:.0f} s each; `r` every {args.every:g} s.\n",
        "| sitting | reloads | requests ok | req/s | failed | kinds | s after the reload |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, s in rows:
        lines.append(
            f"| {name} | {s.reloads} | {s.ok} | {s.rps:.0f} | {s.errors} | "
            f"{json.dumps(s.kinds)} | {s.after_reload_s} |"
        )
    text = "\n".join(lines) + "\n"
    print(text)
    with args.out.open("a") as fh:
        fh.write(text + "\n")


if __name__ == "__main__":
    main()
