"""`uwsgitune tune`: the tuner for one instance, in the foreground. Prints every decision.

Each poll goes through the instance's pipeline (rules once, then the loop); the step's
fresh notes are printed, one line each, with the time.

Ctrl-C (SIGINT), SIGTERM or a closed terminal (SIGHUP) stops it as the daemon stops: a
reload or a restart in flight is verified within its grace or rolled back (actuate/halt.py),
audited, the lock released, then one line and exit 128 + the signal (130 for Ctrl-C, 129 for
a hangup)."""

from __future__ import annotations

import argparse
import os
import signal
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from uwsgitune.actuate.audit import AuditLog
from uwsgitune.actuate.build import Built, build_loop
from uwsgitune.actuate.fifo import fifo_inode
from uwsgitune.actuate.listen import RestartCommand
from uwsgitune.actuate.loop import MODES, Mode, TuneLoop
from uwsgitune.actuate.peer import PeerCheck, PeerSettings
from uwsgitune.cli.common import addresses, positive_float
from uwsgitune.cli.errors import UserError
from uwsgitune.cli.watch import MAX_WORKERS_HELP
from uwsgitune.core.settings import add_flag, flag_problem, restart_argv
from uwsgitune.core.window import WHOLE_FRAMES
from uwsgitune.pipeline import pipeline_for
from uwsgitune.sources.watcher import InstanceWatch
from uwsgitune.stopsignals import stop_signals
from uwsgitune.tuner import TunerSettings


def state_dir() -> Path:
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "uwsgitune"


def register(sub: Any) -> None:
    p = sub.add_parser(
        "tune",
        help="tune one instance's worker count (observe, recommend or apply)",
        description="Run the tuner for one instance in the foreground. observe (default) logs "
        "decisions, recommend also prints the commands, apply acts through the FIFO and the "
        "override ini.",
    )
    p.add_argument("addr", metavar="ADDR", help="stats address of the instance")
    p.add_argument("--fifo", metavar="PATH", required=True, help="the instance's master FIFO")
    p.add_argument("--override", metavar="PATH", help="override ini uwsgitune owns (reloads)")
    p.add_argument("--ini", metavar="PATH", help="the instance's ini (default: from /proc)")
    p.add_argument("--mode", choices=MODES, default="observe")
    add_flag(p, TunerSettings, "min_workers")
    add_flag(p, TunerSettings, "max_workers", default=None, help=MAX_WORKERS_HELP)
    p.add_argument("--memory-budget", type=int, metavar="MIB", help="MiB all workers may use")
    add_flag(p, TunerSettings, "interval", type=positive_float, metavar="SECONDS")
    p.add_argument("--duration", type=positive_float, metavar="SECONDS", help="stop after this")
    p.add_argument("--audit", metavar="PATH", help="audit log (JSON lines)")
    p.add_argument(
        "--restart-command",
        metavar="CMD",
        help="command that restarts the instance (e.g. 'systemctl restart uwsgi@app'): the only "
        "way listen is applied, since a reload keeps the bound socket; needs --override",
    )
    p.add_argument("--resume-apply", action="store_true", help="clear a stop after a failed reload")
    add_flag(p, PeerSettings, "trust_tcp_stats")
    p.set_defaults(func=run)


def settings_from(args: argparse.Namespace, workers_max: int | None = None) -> TunerSettings:
    """The tuner's settings from the flags; without --max-workers the ceiling is the
    instance's `processes` (`workers_max`), or the floor when that is not known yet."""
    top = args.max_workers or max(workers_max or 0, args.min_workers)
    budget = args.memory_budget * 2**20 if getattr(args, "memory_budget", None) else None
    try:
        return TunerSettings(
            min_workers=args.min_workers,
            max_workers=top,
            interval=args.interval,
            memory_budget=budget,
        )
    except ValidationError as exc:  # min <= max is checked there, once
        raise UserError(flag_problem(exc), 2) from None


def open_tuner(
    watch: InstanceWatch,
    args: argparse.Namespace,
    mode: Mode,
    log: Callable[[str], None],
    role: str,
    restart: RestartCommand | None = None,
) -> Built:
    """The TuneLoop for `args` (--fifo, --override, --ini, --audit, --trust-tcp-stats) on a
    first poll of `watch`; a FIFO that is not one, or stats that do not answer, end in one
    line. What the loop says on start (a stop resumed from the audit log) goes to `log`."""
    fifo_inode(Path(args.fifo))  # FifoError: exit 2
    first = watch.step()
    if first.kind == "error":
        raise UserError(f"{first.error}", 1)
    built = build_loop(
        watch,
        first,
        fifo=Path(args.fifo),
        override=Path(args.override) if args.override else None,
        ini=Path(args.ini) if args.ini else None,
        settings=settings_from(args, first.workers_max),
        mode=mode,
        audit=AuditLog(args.audit or state_dir() / "audit.jsonl"),
        role=role,
        restart=restart,
        peer=PeerCheck(trust_tcp=args.trust_tcp_stats),
    )
    for line in built.loop.take_notes():
        log(line)
    return built


def _restart(args: argparse.Namespace) -> RestartCommand | None:
    if args.restart_command is None:
        return None
    try:
        argv = restart_argv(args.restart_command, "--restart-command")
    except ValueError as exc:
        msg = str(exc)
        raise UserError(msg if msg.startswith("--") else f"--restart-command: {msg}", 2) from None
    if args.override is None:
        raise UserError("--restart-command needs --override (listen is written there)", 2)
    return RestartCommand(argv)


def _log(line: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} {line}", flush=True)


def run(args: argparse.Namespace) -> int:
    settings_from(args)  # bad bounds fail before anything is polled
    restart = _restart(args)
    (address,) = addresses([args.addr])
    watch = InstanceWatch(address, interval=args.interval, whole_frames=WHOLE_FRAMES)  # no TUI
    built = open_tuner(watch, args, args.mode, _log, "uwsgitune tune", restart)
    if built.lock_problem is not None:
        raise UserError(f"{built.lock_problem}; not applying", 2)
    if built.fifo_problem is not None:
        if args.mode == "apply":
            raise UserError(built.fifo_problem, 2)
        _log(f"warning: {built.fifo_problem}")
    loop = built.loop
    if args.resume_apply:
        loop.resume_apply()
    try:
        return _run_loop(watch, loop, args.duration)
    finally:
        if built.lock is not None:
            built.lock.release()  # by this thread, the one that applied, after the apply


def _run_loop(watch: InstanceWatch, loop: TuneLoop, duration: float | None) -> int:
    end = None if duration is None else time.monotonic() + duration
    pipeline = pipeline_for(watch, mode=loop.mode, tuner=loop.step)
    loop.poll = pipeline.poll
    got: list[int] = []
    with _stop_signals(loop, got):
        while not loop.halt.is_set() and (end is None or time.monotonic() < end):
            loop.halt.pause(max(0.0, watch.next_due - time.monotonic()), time.sleep)
            if loop.halt.is_set():
                break
            result = pipeline.step().tuning
            for note in result.notes if result is not None else ():
                if note.fresh:
                    _log(note.text)
    line = ""
    if loop.mode == "apply":
        m = loop.moves
        line = f"applied: {m['fifo']} FIFO moves, {m['reload']} reloads, {m['restart']} restarts"
    if got:
        name = signal.Signals(got[0]).name
        _log(f"stopped by {name}" + (f"; {line}" if line else ""))
        return 128 + got[0]
    if line:
        _log(line)
    return 0


def _stop_signals(loop: TuneLoop, got: list[int]) -> AbstractContextManager[None]:
    """SIGINT, SIGTERM and SIGHUP halt the loop (an apply in flight ends in this thread)
    instead of raising in (or killing) the middle of it; the handlers before are put back
    after."""

    def on_signal(signum: int, _frame: object) -> None:
        got.append(signum)
        loop.halt.set()

    return stop_signals(on_signal)
