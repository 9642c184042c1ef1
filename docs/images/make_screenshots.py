"""Remake the README's pictures of the TUI from a live run: docs/images/watch.svg and tune.svg.

    .venv/bin/python docs/images/make_screenshots.py [--size 120x36] [--out docs/images]

What it runs: the bundled demo (uwsgitune/demo/session.py `DemoSession`): the demo app under a
real uWSGI in a temporary directory under /tmp, on loopback only, 4 live workers of 8 in
cheaper mode with `listen = 16`, and the demo's own load, which cycles through its phases
(idle 5 s, steady 25 s, burst 20 s, overload 25 s: uwsgitune/demo/phases.py) and stops after
`--duration` seconds whatever happens.

What it shows: the real `WatchApp` (the app `uwsgitune watch` opens), run headless by
Textual's `run_test` at `--size`, on a driver polling that uWSGI once a second, and saved
with Textual's own `App.save_screenshot` (an SVG of the screen):

- `watch.svg`: `uwsgitune watch STATS` in the overload phase (the listen queue full, every
  worker busy, the findings that explain it), after a whole cycle of history;
- `tune.svg`: `uwsgitune watch STATS --fifo FIFO` (the tuner beside the TUI, in recommend
  mode: it advises and never writes to the FIFO) in the next burst phase, its advice heading
  the annotations pane.

Everything it started is stopped at the end, on Ctrl-C and on error (`DemoSession.cleanup`:
the load, then uWSGI by FIFO `q`, SIGINT, SIGKILL last, by its PID; the temporary directory
removed). A run takes about two minutes. The pictures are of that run: numbers move from run
to run.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import Callable
from pathlib import Path

from uwsgitune.actuate.audit import AuditLog
from uwsgitune.actuate.service import TunerSetup, tuner_factory
from uwsgitune.core.address import parse_address
from uwsgitune.demo.phases import PHASES, cycle_seconds
from uwsgitune.demo.session import DemoSession
from uwsgitune.pipeline import InstanceDriver, live_driver
from uwsgitune.tui.app import WatchApp
from uwsgitune.tuner import TunerSettings

HERE = Path(__file__).resolve().parent
NAME = "/tmp/uwsgi-stats.sock"  # the tab's name: the README's address, not the temp dir's


def phase_start(name: str, cycle: int = 0) -> float:
    """Seconds from the load's start to the start of phase `name` in cycle `cycle`."""
    start = cycle * cycle_seconds()
    for p in PHASES:
        if p.name == name:
            return start
        start += p.seconds
    raise ValueError(f"no demo phase {name!r}")


async def shoot(
    app: WatchApp, size: tuple[int, int], at: float, path: Path, mono: Callable[[], float]
) -> None:
    """Run `app` headless until the monotonic clock reads `at`, then save its screen."""
    async with app.run_test(size=size) as pilot:
        while mono() < at:
            await pilot.pause(0.5)
        await pilot.pause()
        app.save_screenshot(path.name, str(path.parent))
        app.stop_and_exit()
    print(f"wrote {path}")


def tuned(session: DemoSession, workdir: Path) -> InstanceDriver:
    """The driver `watch --fifo` builds: the tuner beside the TUI, in recommend mode."""
    assert session.uwsgi is not None
    address = parse_address(session.uwsgi.stats)
    setup = TunerSetup(
        stats=address,
        fifo=workdir / "fifo",
        settings=lambda slots: TunerSettings(max_workers=slots or session.processes),
        mode="recommend",
        audit=AuditLog(workdir / "audit.jsonl"),
        role="docs/images/make_screenshots.py",
    )
    return live_driver(address, tuner=tuner_factory(setup), mode="recommend")


async def main(args: argparse.Namespace) -> None:
    session = DemoSession(duration=args.duration, load=True)
    try:
        session.start()
        t0 = time.monotonic()
        assert session.workdir is not None
        # watch: the overload phase of the first cycle, 15 s in (the queue has filled)
        watch = WatchApp([session.driver(1.0)], names=[NAME], status=session.status)
        at = t0 + phase_start("overload") + 15
        await shoot(watch, args.size, at, args.out / "watch.svg", time.monotonic)
        # tune: the burst phase of the next cycle, 12 s in (every worker busy, a queue)
        tune = WatchApp([tuned(session, session.workdir)], names=[NAME], status=session.status)
        at = t0 + phase_start("burst", cycle=1) + 12
        await shoot(tune, args.size, at, args.out / "tune.svg", time.monotonic)
    finally:
        session.cleanup()


def size(text: str) -> tuple[int, int]:
    w, _, h = text.partition("x")
    return int(w), int(h)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size", type=size, default=(120, 36), help="columns x rows (120x36)")
    ap.add_argument("--out", type=Path, default=HERE, help="where the SVGs go")
    ap.add_argument("--duration", type=float, default=180.0, help="the load stops after it")
    try:
        asyncio.run(main(ap.parse_args()))
    except KeyboardInterrupt:
        sys.exit(130)
