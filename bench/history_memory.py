"""Memory of one instance's history: tracemalloc on the daemon's driver, no sockets.

    .venv/bin/python bench/history_memory.py [--minutes 30] [--hz 10] [--workers 64]
        [--window SECONDS] [--all-whole]

A synthetic 64-worker instance (tests/support/instances.py's `Instance`: real stats documents
and host samples) is the source of a driver (pipeline/driver.py) built as the daemon builds
its own: the real `Tracker`, the daemon's window (`WINDOW_SECONDS`, compacted as the daemon
compacts it) and rules, at `--hz` for a simulated `--minutes`, its polls read back to
back. Prints the traced memory held at the end and tracemalloc's top allocations by line.
The load changes every poll, so every value is a fresh object as in a real poll.
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

from tests.support.instances import Instance, Load
from uwsgitune.core.samples import Poll
from uwsgitune.core.window import WHOLE_FRAMES
from uwsgitune.daemon.instance import WINDOW_SECONDS
from uwsgitune.pipeline import InstanceDriver, InstanceState, RulesRunner


class SynthSource:
    """A driver's source over a synthetic instance: `polls` polls, `1/hz` s apart on its
    clocks, read as fast as they come (not paced)."""

    name = uri = "bench"
    kind = "unix"
    paced = False

    def __init__(self, workers: int, hz: float, threads: int, polls: int) -> None:
        self.interval, self.polls = 1 / hz, polls
        self.instance, self.workers, self.threads, self.i = Instance("bench"), workers, threads, 0

    @property
    def exhausted(self) -> bool:
        return self.i >= self.polls

    def load(self) -> Load:
        k = self.i % 37
        return Load(
            live=self.workers,
            threads=self.threads,
            busy=k % self.workers,
            rps=200.0 + k * 3,
            in_service=k / 4,
            worker_cpu=0.01 * (k % 5),
            runq=0.001 * k,
            host_busy=0.5 + k / 50,
            rss=(50 << 20) + self.i * 64,
        )

    def poll(self) -> Poll:
        self.i += 1
        return self.instance.poll(self.i * self.interval, self.load())

    def raw(self) -> bytes | None:
        return None


def run(minutes: float, hz: float, workers: int, threads: int, top: int, opts: Any) -> None:
    whole = None if opts.all_whole else WHOLE_FRAMES
    polls = int(minutes * 60 * hz)
    source = SynthSource(workers, hz, threads, polls)
    driver = InstanceDriver(
        source, window_seconds=opts.window, whole_frames=whole, rules=RulesRunner()
    )

    def progress(_state: InstanceState) -> None:
        n = source.i
        if n and n % (polls // 10 or 1) == 0:
            cur, _peak = tracemalloc.get_traced_memory()
            print(f"  {n / hz / 60:5.1f} min  traced {cur / 2**20:6.1f} MiB", flush=True)

    driver.subscribe(progress)
    tracemalloc.start(1)
    cpu = time.process_time()
    driver.run()  # to the source's end
    cpu = time.process_time() - cpu
    snap = tracemalloc.take_snapshot()
    cur, peak = tracemalloc.get_traced_memory()
    print(
        f"{polls} polls ({minutes:g} simulated min at {hz:g} Hz, {workers} workers x {threads} "
        f"threads, window {opts.window:g} s, {len(driver.window)} frames, "
        f"{'all whole' if whole is None else f'{whole} whole'}): traced "
        f"{cur / 2**20:.1f} MiB held, peak {peak / 2**20:.1f} MiB; "
        f"CPU {cpu / max(polls, 1) * 1000:.2f} ms a poll (with tracemalloc)"
    )
    here = Path.cwd()
    for stat in snap.statistics("lineno")[:top]:
        frame = stat.traceback[0]
        path = Path(frame.filename)
        name = str(path.relative_to(here)) if here in path.parents else path.name
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
