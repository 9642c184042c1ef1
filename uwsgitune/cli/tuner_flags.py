"""The tuner's flags, shared by `tune` and the TUI's `watch --fifo`, and the `TunerSetup`
they make: the one place the command line becomes a tuner."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from uwsgitune.actuate.audit import AuditLog
from uwsgitune.actuate.fifo import fifo_inode
from uwsgitune.actuate.peer import PeerCheck, PeerSettings
from uwsgitune.actuate.restart import RestartCommand
from uwsgitune.actuate.service import Mode, TunerSetup
from uwsgitune.core.address import StatsAddress
from uwsgitune.core.latencytarget import LatencyTarget, parse_latency_target
from uwsgitune.core.settings import add_flag, flag_problem
from uwsgitune.errors import UserError
from uwsgitune.tuner import TunerSettings

MAX_WORKERS_HELP = "the ceiling (default: the instance's `processes`)"


def state_dir() -> Path:
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "uwsgitune"


def add_tuner_flags(p: Any) -> None:
    """--fifo's companions: the override, the ini, the bounds, the audit log, the opt-in."""
    p.add_argument("--override", metavar="PATH", help="override ini uwsgitune owns (reloads)")
    p.add_argument("--ini", metavar="PATH", help="the instance's ini (default: from /proc)")
    add_flag(p, TunerSettings, "min_workers")
    add_flag(p, TunerSettings, "max_workers", default=None, help=MAX_WORKERS_HELP)
    p.add_argument("--audit", metavar="PATH", help="audit log (JSON lines)")
    add_flag(p, PeerSettings, "trust_tcp_stats")


def add_latency_target_flag(p: Any) -> None:
    """`--latency-target p99=250ms`: the target the tuner holds and the findings judge."""
    p.add_argument(
        "--latency-target",
        metavar="pNN=TIME",
        default=None,
        help="hold p99 (or p95) of real traffic under this, with the fewest workers: "
        "p99=250ms, p95=0.25s (needs --latency; docs/tuner.md)",
    )


def latency_target_from(args: argparse.Namespace) -> LatencyTarget | None:
    """The target `--latency-target` gives (None without it); a bad one, or one without the
    request log to judge it on, is one line naming the fix (exit status 2)."""
    text = getattr(args, "latency_target", None)
    if text is None:
        return None
    try:
        target = parse_latency_target(text)
    except ValueError as exc:
        raise UserError(f"--latency-target: {exc}", 2) from None
    if getattr(args, "latency", None) is None:
        raise UserError(
            "--latency-target needs --latency HOST:PORT, the request log it is judged on "
            "(`uwsgitune doctor --latency HOST:PORT` prints the uWSGI lines)",
            2,
        )
    return target


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
            latency_target=latency_target_from(args),
        )
    except ValidationError as exc:  # min <= max is checked there, once
        raise UserError(flag_problem(exc), 2) from None


def tuner_setup(
    address: StatsAddress,
    args: argparse.Namespace,
    mode: Mode,
    role: str,
    restart: RestartCommand | None = None,
) -> TunerSetup:
    """The tuner the flags describe. A FIFO path that is not one, or bounds that do not
    hold, end here in one line (exit 2), before anything is polled."""
    settings_from(args)
    fifo = Path(args.fifo)
    fifo_inode(fifo)  # FifoError: exit 2
    return TunerSetup(
        stats=address,
        fifo=fifo,
        settings=lambda slots: settings_from(args, slots),
        mode=mode,
        override=Path(args.override) if args.override else None,
        ini=Path(args.ini) if args.ini else None,
        audit=AuditLog(args.audit or state_dir() / "audit.jsonl"),
        restart=restart,
        role=role,
        peer=PeerCheck(trust_tcp=args.trust_tcp_stats),
        resume_apply=bool(getattr(args, "resume_apply", False)),
    )
