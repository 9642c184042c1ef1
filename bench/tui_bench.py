"""TUI cost at 64 and 1,000 workers: CPU per refresh, % of a core at 1 Hz, RSS.

    .venv/bin/python bench/tui_bench.py [--workers 64,1000] [--refreshes 20] [--history 300]
                                        [--profile N] [--tmux SECONDS]

Every stats document comes from a real 64-worker one (tests/data/stats/64-workers.json):
its workers are replicated to N with new ids and pids, and every poll moves their counters
on (requests, busy time, bytes, status, requests in service), so each refresh changes what a
real one does. The documents go through the real parse, derive and rules (an `InstanceDriver`).

Each worker count runs in a child process of its own (a clean RSS): `history` polls fill the
window, then each refresh is one poll (timed apart: the poll thread's cost) and the state
posted to the real app as the poll thread posts it (`FrameArrived`), handled and painted
headless at 120x40 (Textual's `run_test`, no Pilot round-trips in the timing). CPU is
process CPU time (`time.process_time`), so a busy machine slows the numbers little:

- display: CPU of one refresh (state in, screen painted), idle cost taken out;
- idle: CPU per second of the app doing nothing (timers);
- % of a core at 1 Hz = (display + idle per second) / 10; with the poll = (+ poll) / 10.

`--profile N` prints a cProfile of N refreshes instead; `--tmux S` also measures the TUI in a
real terminal (tmux 120x40, the poll thread included) for S seconds.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import cProfile
import json
import os
import pstats
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from uwsgitune.core.model import parse_stats  # noqa: E402
from uwsgitune.core.samples import Poll  # noqa: E402
from uwsgitune.pipeline import InstanceDriver, RulesRunner  # noqa: E402
from uwsgitune.rules.facts import Facts  # noqa: E402
from uwsgitune.tui.app import FrameArrived, WatchApp  # noqa: E402

REAL_DOC = ROOT / "tests" / "data" / "stats" / "64-workers.json"
SIZE = (120, 40)
CYCLE = 0.25  # seconds between refreshes in the headless run (the idle cost is taken out)


def replicate(doc: dict[str, Any], workers: int) -> dict[str, Any]:
    """The real document with its workers copied round-robin to `workers`, each copy with a
    new id (1..N) and a pid no other worker has."""
    base = doc["workers"]
    top = max(w["pid"] for w in base)
    out = []
    for k in range(workers):
        w = copy.deepcopy(base[k % len(base)])
        w["id"] = k + 1
        if k >= len(base):
            w["pid"] = top + k - len(base) + 1
        out.append(w)
    return {**doc, "workers": out}


def evolve(doc: dict[str, Any], step: int, t: float) -> bytes:
    """The document at poll `step` (wall clock `t`): every counter moved on, a third busy."""
    workers = []
    for k, base in enumerate(doc["workers"]):
        rate = 1 + k % 5
        n = base["requests"] + step * rate
        busy = (k + step) % 3 == 0
        w = dict(base, requests=n, delta_requests=rate, status="busy" if busy else "idle")
        w["running_time"] = base["running_time"] + step * rate * (2_000 + 300 * (k % 7))
        w["tx"] = base["tx"] + step * rate * 780
        w["avg_rt"] = 2_000 + 37 * ((k * step) % 500)
        w["rss"] = base["rss"] + ((k + step) % 5) * 4096
        core = dict(base["cores"][0], requests=n, in_request=int(busy))
        core["req_info"] = {"request_start": t - 0.2 - (k % 4)} if busy else {}
        w["cores"] = [core, *base["cores"][1:]]
        workers.append(w)
    queue = step % 17
    sockets = [dict(s, queue=queue) for s in doc["sockets"]]
    return json.dumps(dict(doc, workers=workers, sockets=sockets, listen_queue=queue)).encode()


class DocSource:
    """A poll source (`pipeline.driver.Source`) over evolving real documents: the real parse
    and derive follow. Not paced while measured (each refresh polls once, by hand); paced
    at 1 s for the tmux run."""

    name = uri = "bench"
    kind = "unix"
    exhausted = False

    def __init__(self, workers: int, paced: bool = False) -> None:
        self.base = replicate(json.loads(REAL_DOC.read_text()), workers)
        self.t0 = max(w["last_spawn"] for w in self.base["workers"]) + 600.0
        self.paced = paced
        self.steps = 0
        self.ready: list[bytes] = []
        self.next_raw = b""

    def prepare(self) -> None:
        """The next document's bytes (outside any timing: uWSGI writes them, not us)."""
        step = self.steps + 1
        self.next_raw = self.ready.pop(0) if self.ready else evolve(self.base, step, self.t0 + step)

    def pregenerate(self, n: int) -> None:
        """The next `n` documents now, so that a poll in the measured time only parses."""
        self.ready = [evolve(self.base, s, self.t0 + s) for s in range(1, n + 1)]

    def poll(self) -> Poll:
        if not self.next_raw:
            self.prepare()
        self.steps += 1
        t = self.t0 + self.steps
        poll = Poll("bench", t, 1000.0 + self.steps, doc=parse_stats(self.next_raw))
        self.next_raw = b""
        return poll

    def raw(self) -> bytes | None:
        return None


def rss_mib() -> float:
    return float(psutil.Process().memory_info().rss) / 2**20


async def measure(workers: int, history: int, refreshes: int, prof: bool) -> dict[str, Any]:
    """One worker count in this process: see the module's docstring."""
    source = DocSource(workers)
    driver = InstanceDriver(source, rules=RulesRunner(Facts()))
    driver.run(until=lambda s: s.counts is not None and s.counts.polls >= history)
    app = WatchApp([driver], names=[f"bench {workers} workers"], autopoll=False)
    profile = cProfile.Profile(time.process_time) if prof else None
    display, polls = [], []
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        idle = await idle_ms_per_s()
        for _ in range(refreshes + 2):  # two to warm up
            source.prepare()
            c = time.process_time()
            state = driver.run(until=lambda _s: True)  # one poll
            polls.append((time.process_time() - c) * 1000)
            c = time.process_time()
            if profile is not None:
                profile.enable()
            app.post_message(FrameArrived(0, state))  # as the poll thread hands it over
            await asyncio.sleep(CYCLE)  # handled, painted on the app's timer, then idle
            if profile is not None:
                profile.disable()
            display.append((time.process_time() - c) * 1000 - idle * CYCLE)
        if profile is not None:
            for order in ("cumulative", "tottime"):
                pstats.Stats(profile).sort_stats(order).print_stats(45)
    return {"workers": workers, "display": display[2:], "poll": polls[2:], "idle": idle,
            "rss": rss_mib()}  # fmt: skip


async def idle_ms_per_s(slices: int = 5, seconds: float = 0.5) -> float:
    """CPU per second of the app doing nothing: the median of a few slices (a garbage
    collection of the window in one slice is not the idle cost)."""
    out = []
    for _ in range(slices):
        c, t = time.process_time(), time.perf_counter()
        await asyncio.sleep(seconds)
        out.append((time.process_time() - c) * 1000 / (time.perf_counter() - t))
    return statistics.median(out)


def child(args: argparse.Namespace) -> None:
    result = asyncio.run(measure(args.child, args.history, args.refreshes, args.profile > 0))
    if not args.profile:
        print(json.dumps(result))


def run_child(workers: int, args: argparse.Namespace) -> dict[str, Any]:
    cmd = [sys.executable, __file__, "--child", str(workers), "--history", str(args.history),
           "--refreshes", str(args.refreshes)]  # fmt: skip
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    return dict(json.loads(out.splitlines()[-1]))


def report(r: dict[str, Any]) -> str:
    display, poll = statistics.median(r["display"]), statistics.median(r["poll"])
    tui = (display + r["idle"]) / 10
    return (
        f"| {r['workers']} | {display:.1f} | {max(r['display']):.1f} | {r['idle']:.2f} | "
        f"{tui:.2f}% | {poll:.1f} | {tui + poll / 10:.2f}% | {r['rss']:.0f} |"
    )


def serve(workers: int, docs: int) -> None:
    """The TUI on an evolving real document at 1 s, for the tmux measurement."""
    source = DocSource(workers, paced=True)
    source.pregenerate(docs)
    driver = InstanceDriver(source, rules=RulesRunner(Facts()))
    WatchApp([driver], names=[f"bench {workers} workers"]).run()


def tmux_cpu(workers: int, seconds: float) -> float:
    """% of one core used by the real TUI in a real terminal (tmux 120x40), poll included."""
    name = f"uwt-bench-{os.getpid()}-{workers}"
    docs = int(seconds) + 30  # the documents of the whole run, made before the app starts
    me = Path(__file__).resolve()
    cmd = f"exec nice -n 19 {sys.executable} {me} --serve {workers} --docs {docs}"
    subprocess.run(["tmux", "new-session", "-d", "-s", name, "-x", str(SIZE[0]),
                    "-y", str(SIZE[1]), cmd], check=True)  # fmt: skip
    try:
        out = subprocess.run(["tmux", "display-message", "-p", "-t", name, "#{pane_pid}"],
                             capture_output=True, text=True).stdout  # fmt: skip
        proc = psutil.Process(int(out))
        time.sleep(20)  # documents made, start-up, the first polls: not the steady state
        c0, t0 = sum(proc.cpu_times()[:2]), time.monotonic()
        time.sleep(seconds)
        c1, t1 = sum(proc.cpu_times()[:2]), time.monotonic()
        return (c1 - c0) / (t1 - t0) * 100
    finally:
        subprocess.run(["tmux", "kill-session", "-t", name], capture_output=True)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workers", default="64,1000", help="worker counts, comma-separated")
    ap.add_argument("--history", type=int, default=300, help="polls in the window first")
    ap.add_argument("--refreshes", type=int, default=20)
    ap.add_argument("--profile", type=int, default=0, help="cProfile this many refreshes")
    ap.add_argument("--tmux", type=float, default=0.0, help="seconds in a real terminal")
    ap.add_argument("--child", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--serve", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--docs", type=int, default=0, help=argparse.SUPPRESS)
    args = ap.parse_args()
    counts = [int(n) for n in args.workers.split(",")]
    if args.serve:
        serve(args.serve, args.docs)
    elif args.child:
        child(args)
    elif args.profile:
        for n in counts:
            asyncio.run(measure(n, args.history, args.profile, True))
    else:
        print(f"headless {SIZE[0]}x{SIZE[1]}, {args.history} polls of history, "
              f"{args.refreshes} refreshes; CPU in ms of process time per refresh")  # fmt: skip
        print(
            "| workers | display ms (median) | max | idle ms/s | TUI % of a core at 1 Hz"
            " | poll ms | with poll | RSS MiB |\n|---|---|---|---|---|---|---|---|"
        )
        for n in counts:
            print(report(run_child(n, args)), flush=True)
        for n in counts if args.tmux else ():
            print(f"real terminal, {n} workers, 1 s: {tmux_cpu(n, args.tmux):.2f}% of a core")
    return 0


if __name__ == "__main__":
    sys.exit(main())
