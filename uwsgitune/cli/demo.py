"""`uwsgitune demo`: the README's first command. Bundled app + real uWSGI + load + TUI."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from uwsgitune.cli.common import positive_float
from uwsgitune.demo.phases import PHASES
from uwsgitune.errors import UserError

DESCRIPTION = """\
Start the bundled example app under uWSGI (in a temporary directory under /tmp, with a stats
socket, a master FIFO and memory-report; 4 live workers of 8 in cheaper mode, listen 16),
run a built-in load that cycles through its phases, and open the `uwsgitune watch` TUI on it.
Quit with q or Ctrl-C: everything the demo started is stopped and its files removed.

Phases, in a loop:
""" + "\n".join(f"  {p.name:<9} {p.seconds:>3g}s  {p.what}" for p in PHASES)


def register(sub: Any) -> None:
    p = sub.add_parser(
        "demo",
        help="run the bundled app under uWSGI with a changing load, in the TUI",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--duration",
        type=positive_float,
        default=600.0,
        metavar="SECONDS",
        help="stop the load after this long (default 600; the TUI stays until q)",
    )
    p.add_argument("--no-load", action="store_true", help="start uWSGI and the TUI, no load")
    p.add_argument(
        "--interval",
        type=positive_float,
        default=1.0,
        metavar="SECONDS",
        help="TUI refresh interval (default 1)",
    )
    p.set_defaults(func=run)


def _show(interval: float) -> Any:
    def show(session: Any) -> int:
        from uwsgitune.tui.app import WatchApp

        app = WatchApp([session.driver(interval)], status=session.status, handle_signals=True)
        return int(app.run() or 0)

    return show


def run(args: argparse.Namespace) -> int:
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise UserError("the demo opens a TUI and needs a terminal; run it in one", code=2)
    from uwsgitune.demo.session import DemoSession, run_session
    from uwsgitune.launch import LaunchError

    session = DemoSession(duration=args.duration, load=not args.no_load)
    try:
        return run_session(session, _show(args.interval))
    except LaunchError as exc:  # the same failure, named as the demo's
        raise LaunchError(f"demo: {exc}") from None
