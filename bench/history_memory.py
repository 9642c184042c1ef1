"""Memory of one instance's history: tracemalloc on the daemon's pipeline, no sockets.

    .venv/bin/python bench/history_memory.py [--minutes 30] [--hz 10] [--workers 64]
        [--window SECONDS] [--all-whole]

A synthetic 64-worker instance (tests/observe/helpers.py's `Instance`: real stats documents
and host samples, derived by the real `Tracker`) is polled through the daemon's own window
(`WINDOW_SECONDS`, compacted as the daemon compacts it) and rules, at `--hz` for a simulated
`--minutes`. Prints the traced memory held at the end and tracemalloc's top allocations by
line. The load changes every poll, so every value is a fresh object as in a real poll.
`--window` sets the window's length (default the daemon's); `--all-whole` keeps every frame
whole, as the window did before it kept old frames compact (the same run, before and after).
"""

from __future__ import annotations

import argparse
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.observe.helpers import Instance, Load
from uwsgitune.core.frame import Frame
from uwsgitune.core.window import WHOLE_FRAMES, Window
from uwsgitune.daemon.instance import WINDOW_SECONDS
from uwsgitune.pipeline import InstancePipeline, RulesRunner


class SynthWatch:
    """InstanceWatch's surface over a synthetic instance, polled every `1/hz` s."""

    def __init__(
        self, workers: int, hz: float, threads: int, seconds: float, whole: int | None
    ) -> None:
        self.interval, self.next_due, self.last_poll = 1 / hz, 0.0, None
        self.window = Window(seconds, whole=whole)  # the daemon's: WINDOW_SECONDS, WHOLE_FRAMES
        self.instance, self.workers, self.threads, self.i = Instance("bench"), workers, threads, 0

    def load(self) -> Load:
        k = self.i % 37
        return Load(
            live=self.workers, threads=self.threads, busy=k % self.workers, rps=200.0 + k * 3,
            in_service=k / 4, worker_cpu=0.01 * (k % 5), runq=0.001 * k, host_busy=0.5 + k / 50,
            rss=(50 << 20) + self.i * 64,
        )  # fmt: skip

    def step(self) -> Frame:
        self.i += 1
        frame = self.instance.frame(self.i * self.interval, self.load())
        self.window.add(frame)
        return frame

    def due(self) -> bool:
        return True


def run(minutes: float, hz: float, workers: int, threads: int, top: int, opts: Any) -> None:
    whole = None if opts.all_whole else WHOLE_FRAMES
    watch = SynthWatch(workers, hz, threads, opts.window, whole)
    pipe = InstancePipeline(watch, "bench", rules=RulesRunner())  # type: ignore[arg-type]
    polls = int(minutes * 60 * hz)
    tracemalloc.start(1)
    cpu = time.process_time()
    for n in range(polls):
        pipe.step()
        if n and n % (polls // 10 or 1) == 0:
            cur, peak = tracemalloc.get_traced_memory()
            print(f"  {n / hz / 60:5.1f} min  traced {cur / 2**20:6.1f} MiB", flush=True)
    cpu = time.process_time() - cpu
    snap = tracemalloc.take_snapshot()
    cur, peak = tracemalloc.get_traced_memory()
    print(
        f"{polls} polls ({minutes:g} simulated min at {hz:g} Hz, {workers} workers x {threads} "
        f"threads, window {opts.window:g} s, {len(watch.window)} frames, "
        f"{'all whole' if whole is None else f'{whole} whole'}): traced "
        f"{cur / 2**20:.1f} MiB held, peak {peak / 2**20:.1f} MiB; "
        f"CPU {cpu / polls * 1000:.2f} ms a poll (with tracemalloc)"
    )
    for stat in snap.statistics("lineno")[:top]:
        frame = stat.traceback[0]
        name = str(Path(frame.filename).relative_to(Path.cwd())) if Path.cwd() in Path(
            frame.filename).parents else Path(frame.filename).name  # fmt: skip
        print(f"{stat.size / 2**20:8.2f} MiB {stat.count:8d} blocks  {name}:{frame.lineno}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=float, default=30)
    ap.add_argument("--hz", type=float, default=10)
    ap.add_argument("--workers", type=int, default=64)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--top", type=int, default=12)
    ap.add_argument("--window", type=float, default=WINDOW_SECONDS, help="seconds of frames")
    ap.add_argument("--all-whole", action="store_true", help="no compact frames (as before)")
    args = ap.parse_args()
    run(args.minutes, args.hz, args.workers, args.threads, args.top, args)


if __name__ == "__main__":
    main()
