"""`uwsgitune tune`: the tuner for one instance, in the foreground. Prints every decision.

The instance's driver polls on the schedule; its tuner (actuate/service.py) steps once per
poll, and each fresh note of the step is printed, one line each, with the time. How the
tuner opened on the first good poll decides whether it runs: in apply mode, a FIFO the
master does not hold or a lock another uwsgitune holds end it at once (exit 2), and an
audit log that cannot be read (exit 1), naming the fix.

Ctrl-C (SIGINT), SIGTERM or a closed terminal (SIGHUP) stops it as the daemon stops: a
reload or a restart in flight is verified within its grace or rolled back (actuate/reload.py),
audited, the lock released, then one line and exit 128 + the signal (130 for Ctrl-C, 129 for
a hangup)."""

from __future__ import annotations

import argparse
import signal
import time
from contextlib import AbstractContextManager
from typing import Any

from uwsgitune.actuate.restart import RestartCommand
from uwsgitune.actuate.service import MODES, tuner_factory
from uwsgitune.cli.common import (
    add_latency_flag,
    addresses,
    check_latency,
    latency_stage,
    positive_float,
)
from uwsgitune.cli.progress import WaitLine
from uwsgitune.cli.tuner_flags import (
    add_latency_target_flag,
    add_tuner_flags,
    latency_target_from,
    settings_from,
    tuner_setup,
)
from uwsgitune.core.settings import add_flag, restart_argv
from uwsgitune.core.window import WHOLE_FRAMES
from uwsgitune.errors import UserError
from uwsgitune.pipeline import InstanceDriver, InstanceState, live_driver
from uwsgitune.rules import RuleSettings
from uwsgitune.stopsignals import stop_signals
from uwsgitune.tuner import TunerSettings
from uwsgitune.tuner.result import StepResult


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
    p.add_argument("--mode", choices=MODES, default="observe")
    add_tuner_flags(p)
    add_latency_flag(p)
    add_latency_target_flag(p)
    p.add_argument("--memory-budget", type=int, metavar="MIB", help="MiB all workers may use")
    add_flag(p, TunerSettings, "interval", type=positive_float, metavar="SECONDS")
    p.add_argument("--duration", type=positive_float, metavar="SECONDS", help="stop after this")
    p.add_argument(
        "--restart-command",
        metavar="CMD",
        help="command that restarts the instance (e.g. 'systemctl restart uwsgi@app'): the only "
        "way listen is applied, since a reload keeps the bound socket; needs --override",
    )
    p.add_argument("--resume-apply", action="store_true", help="clear a stop after a failed reload")
    p.set_defaults(func=run)


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


class Printer:
    """The driver's subscriber: the fresh notes of each step, once (a poll made while an
    apply waits carries the same step's result), and the problems of the first poll."""

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.said: StepResult | None = None
        self.problem: tuple[str, int] | None = None  # (the line, the exit status) that ends it

    def __call__(self, state: InstanceState) -> None:
        result = state.tuning
        if state.tuning is None and state.frame is not None and not state.frame.ok:
            if state.counts is not None and state.counts.polls == 1:  # never answered
                self.problem = (f"{state.frame.error}", 1)
            return
        if result is None or result is self.said:
            return
        self.said = result
        if result.opened is not None:
            self._opened(result)
        for note in result.notes:
            if note.fresh:
                _log(note.text)

    def _opened(self, result: StepResult) -> None:
        opened = result.opened
        assert opened is not None
        if opened.audit_problem is not None:  # the history, not the command line: exit 1
            self.problem = (opened.audit_problem, 1)
        elif self.mode != "apply":
            if opened.fifo_problem is not None:
                _log(f"warning: {opened.fifo_problem}")
        elif opened.lock_problem is not None:
            self.problem = (f"{opened.lock_problem}; not applying", 2)
        elif opened.problems:
            self.problem = (opened.problems[0], 2)


def run(args: argparse.Namespace) -> int:
    settings_from(args)  # bad bounds fail before anything is polled
    check_latency(args.latency)
    restart = _restart(args)
    (address,) = addresses([args.addr])
    setup = tuner_setup(address, args, args.mode, "uwsgitune tune", restart)
    driver = live_driver(
        address,
        interval=args.interval,
        whole_frames=WHOLE_FRAMES,  # no TUI: old frames compact
        tuner=tuner_factory(setup),
        mode=args.mode,
        latency=latency_stage(args.latency),
        # the findings judge the target the tuner holds
        rule_settings=RuleSettings(latency_target=latency_target_from(args)),
    )
    printer, wait_line = Printer(args.mode), WaitLine()
    driver.subscribe(printer)
    driver.subscribe(wait_line)  # on a terminal: what a reload or a restart waits for
    got: list[int] = []
    deadline = None if args.duration is None else time.monotonic() + args.duration
    with _stop_signals(driver, got):
        try:
            driver.run(until=lambda _state: printer.problem is not None, deadline=deadline)
        finally:
            wait_line.close()
            driver.close()  # by this thread, the one that applied, after the apply
    if printer.problem is not None:
        raise UserError(*printer.problem)
    return _ended(driver, printer, got)


def _ended(driver: InstanceDriver, printer: Printer, got: list[int]) -> int:
    moves = printer.said.moves if printer.said is not None else {}
    line = ""
    if driver.state.mode == "apply":
        line = (
            f"applied: {moves.get('fifo', 0)} FIFO moves, {moves.get('reload', 0)} reloads, "
            f"{moves.get('restart', 0)} restarts"
        )
    if got:
        name = signal.Signals(got[0]).name
        _log(f"stopped by {name}" + (f"; {line}" if line else ""))
        return 128 + got[0]
    if line:
        _log(line)
    return 0


def _stop_signals(driver: InstanceDriver, got: list[int]) -> AbstractContextManager[None]:
    """SIGINT, SIGTERM and SIGHUP stop the driver (an apply in flight ends in this thread,
    verified within its grace or rolled back) instead of raising in (or killing) the middle
    of it; the handlers before are put back after."""

    def on_signal(signum: int, _frame: object) -> None:
        got.append(signum)
        driver.stop()

    return stop_signals(on_signal)
