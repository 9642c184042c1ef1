"""`uwsgitune watch`: the TUI, or `--once` / `--plain` / `--json` for scripts and logs.

Every form reads the states of one driver per instance (pipeline/driver.py): `--once` runs
each until its frame has rates, `--plain` prints a line per published state, the TUI shows
them, and `--replay` drives the same stages over a recording.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from uwsgitune.cli.common import (
    add_latency_flag,
    add_latency_routes_flag,
    addresses,
    latency_stage,
    positive_float,
)
from uwsgitune.cli.tuner_flags import add_tuner_flags
from uwsgitune.core.address import StatsAddress
from uwsgitune.core.frame import Frame
from uwsgitune.core.settings import add_flag
from uwsgitune.errors import UserError
from uwsgitune.pipeline import InstanceDriver, InstanceState, live_driver, run_replay
from uwsgitune.render import jsonview
from uwsgitune.render.text import error_line, plain_line, summary
from uwsgitune.sources.recording import ReplaySource, read_recording
from uwsgitune.tuner.tunersettings import TunerSettings

if TYPE_CHECKING:  # the exporter is imported only when --metrics-listen asks for it
    from uwsgitune.exporter.server import ThreadedMetricsServer

RATED = ("first", "reload", "restart")  # frames of these kinds have no rates yet
ONCE_POLLS = 3  # `--once`: a first poll, one for the rates, one more after a reload


def register(sub: Any) -> None:
    p = sub.add_parser(
        "watch",
        help="watch live instances (TUI, or --once/--plain/--json)",
        description="Watch one or more uWSGI instances through their stats sockets.",
    )
    p.add_argument(
        "addrs",
        nargs="*",
        metavar="ADDR",
        help="stats address: /path.sock, @abstract, HOST:PORT, http://HOST:PORT, unix://, tcp://",
    )
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--once", action="store_true", help="two polls one interval apart, print")
    mode.add_argument("--plain", action="store_true", help="one line per interval until Ctrl-C")
    p.add_argument("--json", action="store_true", help="JSON (with --plain: one per interval)")
    add_flag(p, TunerSettings, "interval", type=positive_float, metavar="SECONDS")
    p.add_argument("--timeout", type=positive_float, default=None, metavar="SECONDS")
    p.add_argument("--replay", type=Path, metavar="FILE.jsonl", help="run on a recording")
    add_latency_flag(p)
    p.add_argument(
        "--metrics-listen",
        metavar="HOST:PORT",
        help="also serve Prometheus /metrics here (with --plain or the TUI)",
    )
    add_latency_routes_flag(p)
    t = p.add_argument_group(
        "tuner (TUI, one ADDR)",
        "With --fifo the TUI shows the tuner's advice on every poll (a dry run) and `a` applies "
        "it after a confirmation, through the same guards as `uwsgitune tune --mode apply`.",
    )
    t.add_argument("--fifo", metavar="PATH", help="the instance's master FIFO")
    add_tuner_flags(t)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.replay is not None:
        if args.addrs:
            raise UserError("give either ADDR or --replay FILE, not both", code=2)
        if args.latency is not None:
            raise UserError("--latency is for a live instance; a recording holds its own", 2)
        return _replay(args)
    if not args.addrs:
        raise UserError("no stats address; e.g. uwsgitune watch /tmp/uwsgi-stats.sock", code=2)
    if args.latency is not None and len(args.addrs) != 1:
        raise UserError("--latency receives one instance's request log: give exactly one ADDR", 2)
    if args.latency_routes and not args.metrics_listen:
        raise UserError("--latency-routes is for /metrics: add --metrics-listen HOST:PORT", 2)
    if args.fifo is not None and (args.once or args.plain or args.json):
        raise UserError("--fifo is for the TUI; for a tuner without it: uwsgitune tune", code=2)
    _check_tuner_flags(args)
    addrs = addresses(args.addrs)
    if args.once or (args.json and not args.plain):
        return _once(addrs, args)
    drivers = [_tuned(a, args) if args.fifo else _driver(a, args) for a in addrs]
    if args.metrics_listen:
        _serve_metrics(drivers, args.metrics_listen, bool(args.latency_routes))
    if args.plain:
        return _plain(drivers, args)
    return _tui(drivers, args)


def _check_tuner_flags(args: argparse.Namespace) -> None:
    tuning = (args.override, args.ini, args.audit, args.trust_tcp_stats or None)
    if args.fifo is None and any(v is not None for v in tuning):
        raise UserError(
            "--override, --ini, --audit and --trust-tcp-stats need --fifo (the tuner's FIFO)", 2
        )
    if args.fifo is not None and len(args.addrs) != 1:
        raise UserError("--fifo tunes one instance: give exactly one ADDR", 2)


def _serve_metrics(
    drivers: Sequence[InstanceDriver], listen: str, routes: bool
) -> ThreadedMetricsServer:
    """Serve /metrics from a daemon thread; it ends with the process (returned for a test)."""
    from uwsgitune.exporter.metrics import ExportOptions
    from uwsgitune.exporter.serve import serve_drivers

    try:
        return serve_drivers(drivers, listen, ExportOptions(latency_routes=routes))
    except (OSError, ValueError) as exc:
        reason = getattr(exc, "strerror", None) or str(exc)
        raise UserError(f"cannot serve metrics on {listen}: {reason}", code=2) from None


def rated(state: InstanceState) -> bool:
    """`--once` has what it needs: a frame with rates, an error, or `ONCE_POLLS` polls."""
    polls = state.counts.polls if state.counts is not None else 0
    frame = state.frame
    return frame is None or frame.kind not in RATED or polls >= ONCE_POLLS


def _once(addrs: Sequence[StatsAddress], args: argparse.Namespace) -> int:
    """Each instance polled until its frame has rates (two polls one interval apart; a
    reload in between takes one more), all at once."""
    drivers = [
        live_driver(
            a,
            interval=args.interval,
            timeout=args.timeout,
            rules=False,
            latency=latency_stage(args.latency),
        )
        for a in addrs
    ]
    for d in drivers:
        d.start(until=rated)
    longest = ONCE_POLLS * (args.interval + (args.timeout or 5.0)) + 5.0  # every poll timed out
    for d in drivers:
        d.join(longest)
    frames = [d.state.frame for d in drivers if d.state.frame is not None]
    _print_frames(frames, json_out=args.json, states=[d.state for d in drivers])
    failed = [f for f in frames if f.kind == "error"]
    for f in failed:
        print(f"uwsgitune: {error_line(f)}", file=sys.stderr)
    return 1 if failed or len(frames) < len(drivers) else 0


def _print_frames(
    frames: list[Frame], *, json_out: bool, states: Sequence[InstanceState] = ()
) -> None:
    """The frames' summaries or their JSON document (each frame's latency from the state
    that holds it, with `--latency`)."""
    if json_out:
        views = {id(s.frame): s.latency for s in states if s.frame is not None}
        print(jsonview.dumps(frames, [views.get(id(f)) for f in frames]))
        return
    # An instance that never answered has nothing to show: its line goes to stderr only.
    latency = {id(s.frame): s.latency for s in states if s.frame is not None}
    shown = [f for f in frames if not (f.kind == "error" and not f.master_pid)]
    for i, f in enumerate(shown):
        if i:
            print()
        print("\n".join(summary(f, latency.get(id(f)))))


def _printer(json_out: bool, gone: threading.Event) -> Callable[[InstanceState], None]:
    """A subscriber printing one line per published state (under a lock: several drivers
    print from their own threads). When the reader leaves (`| head`), `gone` is set and
    nothing more is printed: the command ends quietly."""
    guard = threading.Lock()

    def emit(state: InstanceState) -> None:
        frame = state.frame
        if frame is None or gone.is_set():
            return
        if json_out:
            line = jsonview.dumps([frame], [state.latency], indent=None)
        else:
            line = plain_line(frame, state.latency)
        with guard:
            try:
                print(line, flush=True)
            except BrokenPipeError:
                gone.set()
                os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no error at exit

    return emit


def _plain(drivers: list[InstanceDriver], args: argparse.Namespace) -> int:
    gone = threading.Event()
    emit = _printer(args.json, gone)
    for d in drivers:
        d.subscribe(emit)
        d.start()
    try:
        while not gone.wait(0.5) and any(not d.join(0) for d in drivers):
            pass
    except KeyboardInterrupt:
        pass
    for d in drivers:
        d.stop()
    return 0


def _tui(drivers: list[InstanceDriver], args: argparse.Namespace) -> int:
    if not sys.stdout.isatty():
        raise UserError("the TUI needs a terminal; use --plain, --once or --json", code=2)
    try:
        # Imported by name: the TUI is optional and `watch --plain` must not pay for textual.
        tui = importlib.import_module("uwsgitune.tui.app")
    except ImportError:
        raise UserError("the TUI is not available in this build; use --plain", code=2) from None
    return int(tui.run_tui(drivers, args))


def _driver(address: StatsAddress, args: argparse.Namespace) -> InstanceDriver:
    return live_driver(
        address,
        interval=args.interval,
        timeout=args.timeout,
        latency=latency_stage(args.latency),
    )


def _tuned(address: StatsAddress, args: argparse.Namespace) -> InstanceDriver:
    """With --fifo: the instance's driver with the tuner beside the TUI (recommend mode:
    it advises at every poll; `a` applies, confirmed)."""
    from uwsgitune.actuate.service import tuner_factory
    from uwsgitune.cli.tuner_flags import tuner_setup

    setup = tuner_setup(address, args, "recommend", "uwsgitune watch")
    return live_driver(
        address,
        interval=args.interval,
        timeout=args.timeout,
        tuner=tuner_factory(setup),
        mode="recommend",
        latency=latency_stage(args.latency),
    )


def _replay(args: argparse.Namespace) -> int:
    gone = threading.Event()
    emit = _printer(args.json, gone) if args.plain else None

    def make(source: ReplaySource) -> InstanceDriver:
        driver = InstanceDriver(source)  # frames only: `watch` shows no findings
        if emit is not None:
            driver.subscribe(emit)
        return driver

    drivers = run_replay(read_recording(args.replay), make, gone)  # RecordingError: exit 2
    if not drivers:
        raise UserError(f"{args.replay}: the recording holds no polls", code=2)
    if not args.plain:
        _print_frames(
            [d.state.frame for d in drivers if d.state.frame is not None],
            json_out=args.json,
            states=[d.state for d in drivers],
        )
    return 0
