"""`uwsgitune` entry point. Each command lives in its own module with `register(sub)`."""

from __future__ import annotations

import argparse
import importlib
import signal
import sys
from collections.abc import Sequence

from uwsgitune import __version__
from uwsgitune.errors import UwsgituneError

# Commands, in help order. Each module defines `register(subparsers)`, which sets `func`.
COMMANDS = ["watch", "demo", "record", "recommend", "sweep", "daemon", "config", "tune", "doctor"]


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        """One line, naming the argument (bad input never prints a usage block)."""
        self.exit(2, f"uwsgitune: {message}; see `{self.prog} --help`\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="uwsgitune",
        description="Monitor, explain and autotune a live uWSGI through its stats socket.",
    )
    parser.add_argument("--version", action="version", version=f"uwsgitune {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name in COMMANDS:
        importlib.import_module(f"uwsgitune.cli.{name.replace('-', '_')}").register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args))
    except UwsgituneError as exc:  # every user-facing failure: its lines, no traceback
        for line in exc.lines():
            print(f"uwsgitune: {line}", file=sys.stderr)
        return exc.code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # `uwsgitune watch --plain | head`: the reader left; exit quietly.
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
        return 0
