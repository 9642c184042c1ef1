"""TUI cost: view building and rendering for 256 workers, CPU use at a 1 s refresh for 64.

    .venv/bin/python bench/tui_bench.py [--seconds 30] [--no-tmux]

Targets: a frame for 256 workers builds in < 50 ms; at a 1 s refresh with 64 workers the
TUI uses < 5% of one core. Stats documents are synthetic raw JSON (every field uwsgitop
shows, changing every poll) parsed and derived by the real code, so a poll costs what a
real one does minus the socket read.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from uwsgitune.core.derive import Tracker
from uwsgitune.core.frame import Frame
from uwsgitune.core.model import parse_stats
from uwsgitune.core.samples import Poll
from uwsgitune.core.window import Window
from uwsgitune.pipeline import InstancePipeline, InstanceState
from uwsgitune.tui.app import WatchApp
from uwsgitune.tui.history import series
from uwsgitune.tui.summary import summary_lines
from uwsgitune.tui.warnings import builtin_warnings
from uwsgitune.tui.workers import core_rows, worker_rows

T0 = 1_700_000_000.0


def raw_doc(workers: int, step: int) -> bytes:
    def worker(i: int) -> dict[str, object]:
        busy = (i + step) % 3 == 0
        core = {
            "id": 0,
            "requests": step * (i + 1),
            "in_request": int(busy),
            "vars": [],
            "req_info": {"request_start": T0 + step - 0.5 if busy else 0},
        }
        return {
            "id": i + 1,
            "pid": 10_000 + i,
            "status": "busy" if busy else "idle",
            "requests": step * (i + 1),
            "exceptions": step // 50,
            "running_time": step * 40_000 * (i % 7 + 1),
            "avg_rt": 12_000 + 37 * ((i * step) % 500),
            "rss": (40 + i % 9) << 20,
            "vsz": 300 << 20,
            "tx": step * 1000 * (i + 1),
            "last_spawn": T0 - 100,
            "respawn_count": 1,
            "cores": [core],
        }

    return json.dumps(
        {
            "version": "2.0.31",
            "pid": 9999,
            "listen_queue": step % 17,
            "sockets": [
                {"name": "127.0.0.1:8000", "proto": "http", "queue": step % 17, "max_queue": 100}
            ],
            "workers": [worker(i) for i in range(workers)],
        }
    ).encode()


class SynthWatch:
    """InstanceWatch's surface, fed synthetic documents through the real parse and derive."""

    def __init__(self, workers: int, interval: float = 1.0) -> None:
        self.workers, self.interval, self.next_due = workers, interval, 0.0
        self.window = Window()
        self.tracker = Tracker("bench")
        self.steps = 0
        self.last_poll: Poll | None = None

    def step(self) -> Frame:
        self.steps += 1
        t = T0 + self.steps
        poll = Poll(
            "bench", t, 1000.0 + self.steps, doc=parse_stats(raw_doc(self.workers, self.steps))
        )
        self.last_poll = poll
        frame = self.tracker.update(poll)
        self.window.add(frame)
        self.next_due = time.monotonic() + self.interval
        return frame

    def due(self) -> bool:
        return time.monotonic() >= self.next_due


def history(workers: int, n: int) -> tuple[Frame, ...]:
    w = SynthWatch(workers)
    for _ in range(n):
        w.step()
    return w.window.frames()


def bench_views(workers: int = 256, reps: int = 30) -> list[float]:
    """Pure view building of one frame, with 5 minutes of history (ms)."""
    frames = history(workers, 300)
    out = []
    for _ in range(reps):
        t = time.perf_counter()
        f = frames[-1]
        worker_rows(f), core_rows(f), summary_lines(f, frames), series(frames)
        builtin_warnings(frames)
        out.append((time.perf_counter() - t) * 1000)
    return out


async def bench_render(workers: int = 256, reps: int = 20) -> tuple[list[float], list[float]]:
    """Headless app: assign a snapshot, wait until it is processed and painted.

    Returns (wall ms, CPU ms): the wall time includes Textual's paint timer (up to 1/60 s)
    and the machine's other load; the CPU time is what a frame costs this process."""
    frames = history(workers, 300 + reps)
    app = WatchApp(
        [InstancePipeline(SynthWatch(workers), "bench")], names=["bench"], autopoll=False
    )
    wall, cpu = [], []
    async with app.run_test(size=(200, 50)) as pilot:
        for i in range(reps):
            window = frames[: 300 + i]
            state = InstanceState("bench", frame=window[-1], frames=window)
            t, c = time.perf_counter(), time.process_time()
            app.show(0, state)
            await pilot.pause()
            wall.append((time.perf_counter() - t) * 1000)
            cpu.append((time.process_time() - c) * 1000)
    return wall, cpu


def serve(workers: int) -> None:
    """The TUI on a synthetic 64-worker instance at 1 s, for the tmux CPU measurement."""
    pipeline = InstancePipeline(SynthWatch(workers), "synthetic")
    WatchApp([pipeline], names=[f"synthetic {workers} workers"]).run()


def bench_cpu_tmux(workers: int, seconds: float) -> float:
    """% of one core used by the real TUI in a real terminal (tmux 120x40)."""
    name = f"uwt-bench-{int(time.time())}"
    cmd = f"exec {sys.executable} {Path(__file__).resolve()} --serve {workers}"
    subprocess.run(
        ["tmux", "new-session", "-d", "-s", name, "-x", "120", "-y", "40", cmd], check=True
    )
    try:
        pid = int(
            subprocess.run(
                ["tmux", "display-message", "-p", "-t", name, "#{pane_pid}"],
                capture_output=True,
                text=True,
            ).stdout
        )
        proc = psutil.Process(pid)
        time.sleep(5)  # start-up and the first polls are not the steady state
        c0, t0 = sum(proc.cpu_times()[:2]), time.monotonic()
        time.sleep(seconds)
        c1, t1 = sum(proc.cpu_times()[:2]), time.monotonic()
        print(
            subprocess.run(
                ["tmux", "capture-pane", "-p", "-t", name], capture_output=True, text=True
            ).stdout.splitlines()[1][:100]
        )
        return (c1 - c0) / (t1 - t0) * 100
    finally:
        subprocess.run(["tmux", "kill-session", "-t", name], capture_output=True)


def stats(name: str, values: list[float], unit: str = "ms") -> None:
    print(
        f"{name}: median {statistics.median(values):.2f} {unit}, "
        f"p90 {sorted(values)[int(len(values) * 0.9)]:.2f}, max {max(values):.2f} {unit}"
    )


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=30)
    ap.add_argument("--no-tmux", action="store_true")
    ap.add_argument("--serve", type=int, default=0, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.serve:
        serve(args.serve)
        return 0
    t = time.perf_counter()
    raw = raw_doc(64, 10)
    n = 200
    for _i in range(n):
        parse_stats(raw)
    per = (time.perf_counter() - t) / n * 1000
    print(f"64-worker document {len(raw) / 1024:.0f} KiB, parse {per:.2f} ms")
    stats("views, 256 workers (rows+cores+summary+history+warnings)", bench_views(256))
    for n in (256, 64):
        wall, cpu = asyncio.run(bench_render(n))
        stats(f"frame, {n} workers, snapshot -> painted (headless 200x50), wall", wall)
        stats(f"frame, {n} workers, snapshot -> painted (headless 200x50), CPU", cpu)
    if not args.no_tmux:
        pct = bench_cpu_tmux(64, args.seconds)
        print(
            f"CPU, 64 workers, 1 s refresh, real terminal 120x40, {args.seconds:g}s: "
            f"{pct:.2f}% of one core (target < 5%)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
