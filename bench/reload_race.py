"""How many requests a graceful reload (`r` on the master FIFO) fails under load.

uWSGI 2.0's SIGHUP handler in a worker (`gracefully_kill`) exits at once unless the worker's
core is `in_request`, and a worker sets that only after `accept()` has returned and the
first read begins. A reload that lands between the two closes an accepted connection with
the request unread: the client gets a reset (unbit/uwsgi#1375, open). This measures it: a
closed loop of non-keepalive clients on a real uWSGI, a reload every `--every` seconds,
`--reloads` times, and the same length of load with no reload as the control. Then the
same with the workers paused first (`p`, then `r` once every worker reads `pause`), as
uwsgitune's reload does it (uwsgitune/actuate/reload.py). `--burn N` runs N busy loops
beside the pool: the CPU contention of a busy host, which widens the window, and `--nice`
puts uWSGI behind them. Each error is reported with its time after the reload before it.

    .venv/bin/python bench/reload_race.py [--reloads 150] [--every 2] [--processes 16]
        [--clients 16] [--path /cpu/1] [--burn 0] [--nice 0] [--no-control]
        [--out bench/results/reload_race.md]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.support.tuned import doc  # noqa: E402
from tests.uwsgi_harness import url, uwsgi_instance  # noqa: E402
from uwsgitune.actuate.fifo import MasterFifo  # noqa: E402
from uwsgitune.actuate.reload import quiesce, statuses_at  # noqa: E402
from uwsgitune.core.address import parse_address  # noqa: E402
from uwsgitune.launch import UwsgiProcess  # noqa: E402
from uwsgitune.loadgen import LoadRun  # noqa: E402
from uwsgitune.pipeline import live_source, poll_once  # noqa: E402

APP = ROOT / "bench" / "scenario_app.py"
LOADGEN_NICE = -10  # ahead of the workers on the shared CPUs (needs root, as here)


@dataclass(frozen=True)
class Plan:
    reloads: int
    every: float
    pause_first: bool = False


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


def _pause(proc: UwsgiProcess, stop: threading.Event) -> None:
    """`p` and the wait for every worker to pause, as uwsgitune's reload does it."""
    address = parse_address(proc.stats)
    frame = poll_once(live_source(address)).frame
    assert frame is not None
    quiesce(MasterFifo(proc.fifo), frame, statuses_at(address), stop.wait)


def _reloader(proc: UwsgiProcess, plan: Plan, stop: threading.Event, out: list[float]) -> None:
    for _ in range(plan.reloads):
        if stop.wait(plan.every):
            return
        if plan.pause_first:
            _pause(proc, stop)
        if not _send(proc.fifo, stop):
            return
        out.append(time.monotonic())


@contextmanager
def burners(n: int, seconds: float) -> Iterator[None]:
    """`n` busy loops beside the pool, each ended by its own timeout and by us: the CPU
    contention a busy host (a test suite, a batch job) puts on the workers."""
    loop = f"import time; t = time.monotonic() + {seconds:.0f}\nwhile time.monotonic() < t: pass"
    procs = [subprocess.Popen([sys.executable, "-c", loop]) for _ in range(n)]
    try:
        yield
    finally:
        for pr in procs:
            pr.kill()
            pr.wait()


def sitting(args: argparse.Namespace, plan: Plan) -> Sitting:
    opts = {"listen": 128, "wsgi-file": str(APP), "processes": args.processes}
    seconds = args.reloads * args.every + 3
    with uwsgi_instance(**opts) as proc, burners(args.burn, seconds + 10):
        for pid in [proc.pid, *(w.pid for w in doc(proc).live_workers)]:
            os.setpriority(os.PRIO_PROCESS, pid, args.nice)  # workers forked later inherit it
        time.sleep(2)  # past the first requests' warm-up
        stamps: list[float] = []
        stop = threading.Event()
        th = threading.Thread(target=_reloader, args=(proc, plan, stop, stamps))
        th.start()
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
    ap.add_argument("--nice", type=int, default=0, help="the master's and workers' nice")
    ap.add_argument("--burn", type=int, default=0, help="busy loops beside the pool")
    ap.add_argument("--no-control", action="store_true", help="skip the sitting with no reload")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "reload_race.md")
    args = ap.parse_args()
    every = f"every {args.every:g} s"
    rows = [] if args.no_control else [("control, no reload", sitting(args, Plan(0, args.every)))]
    rows += [
        (f"`r` {every}", sitting(args, Plan(args.reloads, args.every))),
        (f"`p`, all paused, `r` {every}", sitting(args, Plan(args.reloads, args.every, True))),
    ]
    lines = [
        "## Sitting\n",
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; real uWSGI, `processes "
        f"{args.processes}`, {args.clients} closed-loop non-keepalive clients on `{args.path}`"
        f", {args.reloads * args.every + 3:.0f} s each; `r` every {args.every:g} s"
        f"{f'; {args.burn} busy loops beside it' if args.burn else ''}"
        f"{f'; uWSGI at nice {args.nice}' if args.nice else ''}.\n",
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
