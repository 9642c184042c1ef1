"""`uwsgitune watch`: the TUI, or `--once` / `--plain` / `--json` for scripts and logs."""

from __future__ import annotations

import argparse
import importlib
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from uwsgitune.actuate.peer import PeerSettings
from uwsgitune.cli.common import addresses, positive_float
from uwsgitune.cli.errors import UserError
from uwsgitune.core.derive import Tracker
from uwsgitune.core.frame import Frame
from uwsgitune.core.samples import Poll
from uwsgitune.core.settings import add_flag
from uwsgitune.pipeline import InstancePipeline, pipeline_for
from uwsgitune.render import jsonview
from uwsgitune.render.text import error_line, plain_line, summary
from uwsgitune.sources.recording import read_recording
from uwsgitune.sources.watcher import InstanceWatch
from uwsgitune.tuner.settings import TunerSettings

MAX_WORKERS_HELP = "the ceiling (default: the instance's `processes`)"


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
    p.add_argument(
        "--metrics-listen",
        metavar="HOST:PORT",
        help="also serve Prometheus /metrics here (with --plain or the TUI)",
    )
    t = p.add_argument_group(
        "tuner (TUI, one ADDR)",
        "With --fifo the TUI shows the tuner's advice on every poll (a dry run) and `a` applies "
        "it after a confirmation, through the same guards as `uwsgitune tune --mode apply`.",
    )
    t.add_argument("--fifo", metavar="PATH", help="the instance's master FIFO")
    t.add_argument("--override", metavar="PATH", help="override ini uwsgitune owns (reloads)")
    t.add_argument("--ini", metavar="PATH", help="the instance's ini (default: from /proc)")
    add_flag(t, TunerSettings, "min_workers")
    add_flag(t, TunerSettings, "max_workers", default=None, help=MAX_WORKERS_HELP)
    t.add_argument("--audit", metavar="PATH", help="audit log (JSON lines)")
    add_flag(t, PeerSettings, "trust_tcp_stats")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.replay is not None:
        if args.addrs:
            raise UserError("give either ADDR or --replay FILE, not both", code=2)
        return _replay(args)
    if not args.addrs:
        raise UserError("no stats address; e.g. uwsgitune watch /tmp/uwsgi-stats.sock", code=2)
    if args.fifo is not None and (args.once or args.plain or args.json):
        raise UserError("--fifo is for the TUI; for a tuner without it: uwsgitune tune", code=2)
    watches = [
        InstanceWatch(a, interval=args.interval, timeout=args.timeout)
        for a in addresses(args.addrs)
    ]
    if args.once or (args.json and not args.plain):
        return _once(watches, args)
    pipelines = [pipeline_for(w) for w in watches]
    if args.metrics_listen:
        _serve_metrics(pipelines, args.metrics_listen)
    if args.plain:
        return _plain(pipelines, args)
    return _tui(pipelines, args)


def _serve_metrics(pipelines: list[InstancePipeline], listen: str) -> None:
    """Serve /metrics from a daemon thread; it ends with the process."""
    from uwsgitune.exporter.serve import serve_pipelines

    try:
        serve_pipelines(pipelines, listen)
    except (OSError, ValueError) as exc:
        reason = getattr(exc, "strerror", None) or str(exc)
        raise UserError(f"cannot serve metrics on {listen}: {reason}", code=2) from None


def _once(watches: list[InstanceWatch], args: argparse.Namespace) -> int:
    frames = [w.step() for w in watches]
    # A second poll one interval later gives the rates; a reload in between takes one more.
    for _ in range(2):
        pending = [i for i, f in enumerate(frames) if f.kind in ("first", "reload", "restart")]
        if not pending:
            break
        time.sleep(args.interval)
        for i in pending:
            frames[i] = watches[i].step()
    _print_frames(frames, json_out=args.json)
    failed = [f for f in frames if f.kind == "error"]
    for f in failed:
        print(f"uwsgitune: {error_line(f)}", file=sys.stderr)
    return 1 if failed else 0


def _print_frames(frames: list[Frame], *, json_out: bool) -> None:
    if json_out:
        print(jsonview.dumps(frames))
        return
    # An instance that never answered has nothing to show: its line goes to stderr only.
    shown = [f for f in frames if not (f.kind == "error" and not f.master_pid)]
    for i, f in enumerate(shown):
        if i:
            print()
        print("\n".join(summary(f)))


def _emit_plain(frame: Frame, json_out: bool) -> None:
    if json_out:
        print(jsonview.dumps([frame], indent=None), flush=True)
    else:
        print(plain_line(frame), flush=True)


def _plain(pipelines: list[InstancePipeline], args: argparse.Namespace) -> int:
    try:
        while True:
            for p in pipelines:
                if p.watch.due():
                    frame = p.step().frame
                    assert frame is not None
                    _emit_plain(frame, args.json)
            wake = min(p.watch.next_due for p in pipelines)
            time.sleep(max(0.0, wake - time.monotonic()))
    except KeyboardInterrupt:
        return 0


def _tui(pipelines: list[InstancePipeline], args: argparse.Namespace) -> int:
    if not sys.stdout.isatty():
        raise UserError("the TUI needs a terminal; use --plain, --once or --json", code=2)
    try:
        # Imported by name: the TUI is optional and `watch --plain` must not pay for textual.
        tui = importlib.import_module("uwsgitune.tui.app")
    except ImportError:
        raise UserError("the TUI is not available in this build; use --plain", code=2) from None
    tuners = _tuners(pipelines, args)
    return int(tui.run_tui(pipelines, args, tuners))


def _tuners(pipelines: list[InstancePipeline], args: argparse.Namespace) -> dict[int, Any]:
    """With --fifo: the tuner beside the TUI (recommend mode; `a` applies, confirmed)."""
    tuning = (args.override, args.ini, args.audit, args.trust_tcp_stats or None)
    if args.fifo is None:
        if any(v is not None for v in tuning):
            raise UserError(
                "--override, --ini, --audit and --trust-tcp-stats need --fifo (the tuner's FIFO)",
                2,
            )
        return {}
    if len(pipelines) != 1:
        raise UserError("--fifo tunes one instance: give exactly one ADDR", 2)
    from uwsgitune.actuate.lock import ApplyLock
    from uwsgitune.cli.tune import open_tuner, settings_from
    from uwsgitune.tui.tuning import TuiTuner

    settings_from(args)  # bad bounds fail before anything is polled
    watch = pipelines[0].watch
    assert isinstance(watch, InstanceWatch)
    built = open_tuner(watch, args, "recommend", lambda _line: None, "uwsgitune watch")
    if built.fifo_problem is not None:
        raise UserError(built.fifo_problem, 2)
    tuner = TuiTuner(built.loop, ApplyLock(Path(args.fifo), "uwsgitune watch"))
    pipelines[0].tuner = tuner.advise
    return {0: tuner}


def replay_frames(polls: Iterable[Poll]) -> Iterable[Frame]:
    trackers: dict[str, Tracker] = {}
    for poll in polls:
        tracker = trackers.setdefault(poll.source, Tracker(poll.source))
        yield tracker.update(poll)


def _replay(args: argparse.Namespace) -> int:
    last: dict[str, Frame] = {}
    for frame in replay_frames(read_recording(args.replay)):  # RecordingError: exit 2
        last[frame.source] = frame
        if args.plain:
            _emit_plain(frame, args.json)
    if not last:
        raise UserError(f"{args.replay}: the recording holds no polls", code=2)
    if not args.plain:
        _print_frames(list(last.values()), json_out=args.json)
    return 0
