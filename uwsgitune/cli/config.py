"""`uwsgitune config check FILE`: validate a daemon config and exit (0 ok, 2 errors).

Environment overrides (`UWSGITUNE_...`) are applied as the daemon would apply them, so a
check run in the service's environment checks what the service will run.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from uwsgitune.daemon.config import load_config


def register(sub: Any) -> None:
    p = sub.add_parser(
        "config",
        help="check a daemon config file",
        description="Work with the daemon's TOML config.",
    )
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True, parser_class=type(p))
    check = actions.add_parser("check", help="validate FILE and exit: 0 ok, 2 errors")
    check.add_argument("file", type=Path, metavar="FILE")
    check.add_argument("--no-env", action="store_true", help="ignore UWSGITUNE_* variables")
    check.set_defaults(func=run_check)


def run_check(args: argparse.Namespace) -> int:
    config = load_config(args.file, {} if args.no_env else os.environ)  # ConfigError: exit 2
    n = len(config.instance)
    print(f"ok: {n} instance{'s' if n != 1 else ''}")
    return 0
