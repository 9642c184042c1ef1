"""`uwsgitune daemon`: run under systemd (or a container), watch instances, serve /metrics.

From a file: `uwsgitune daemon --config /etc/uwsgitune/uwsgitune.toml`.
One instance from flags: `uwsgitune daemon --stats ADDR [--fifo PATH] [--mode MODE]
[--metrics-listen HOST:PORT]`. Either way the settings go through the same validation.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
from pathlib import Path
from typing import Any

from uwsgitune.cli.config import config_error
from uwsgitune.cli.errors import UserError
from uwsgitune.daemon.config import DEFAULT_LISTEN, DaemonConfig, load_config, validate
from uwsgitune.daemon.errors import ConfigError


def register(sub: Any) -> None:
    p = sub.add_parser(
        "daemon",
        help="run as a service: watch instances, log changes, serve Prometheus /metrics",
        description="Watch uWSGI instances as a service (systemd Type=notify) and serve "
        "their metrics at /metrics. SIGHUP re-reads the config; SIGTERM/SIGINT stop.",
    )
    p.add_argument("--config", type=Path, metavar="FILE.toml", help="instances and settings")
    one = p.add_argument_group("one instance without a file")
    one.add_argument("--stats", metavar="ADDR", help="the stats address")
    one.add_argument("--name", default="uwsgi", help="instance name in logs (default uwsgi)")
    one.add_argument("--fifo", metavar="PATH", help="the master FIFO")
    one.add_argument("--override", metavar="PATH", help="the override ini uwsgitune owns")
    one.add_argument("--mode", choices=["observe", "recommend", "apply"], default=None)
    one.add_argument("--min-workers", type=int, default=None, metavar="N")
    one.add_argument("--max-workers", type=int, default=None, metavar="N")
    one.add_argument("--interval", default=None, metavar="SECONDS")
    one.add_argument("--timeout", default=None, metavar="SECONDS")
    p.add_argument("--metrics-listen", default=None, metavar="HOST:PORT",
                   help=f"metrics endpoint (default {DEFAULT_LISTEN})")  # fmt: skip
    p.add_argument("--log-format", choices=["text", "json"], default=None)
    p.set_defaults(func=run)


def _from_flags(args: argparse.Namespace) -> DaemonConfig:
    keys = ("name", "stats", "fifo", "override", "mode", "min_workers", "max_workers")
    inst = {k: getattr(args, k) for k in (*keys, "interval", "timeout")}
    daemon = {"metrics_listen": args.metrics_listen, "log_format": args.log_format}
    data: dict[str, Any] = {
        "daemon": {k: v for k, v in daemon.items() if v is not None},
        "instance": [{k: v for k, v in inst.items() if v is not None}],
    }
    try:
        return validate(data, "command line", os.environ)
    except ConfigError as exc:  # name the flag: `--interval: must be >= 0.1 (got '0')`
        flags = [re.sub(r"^(instance\[0\]|daemon)\.(\w+)", _flag, p) for p in exc.problems]
        raise ConfigError(flags) from None


def _flag(m: re.Match[str]) -> str:
    return "--" + m.group(2).replace("_", "-")


def _overrides(config: DaemonConfig, args: argparse.Namespace) -> DaemonConfig:
    """--metrics-listen / --log-format beside --config win over the file."""
    update = {"metrics_listen": args.metrics_listen, "log_format": args.log_format}
    update = {k: v for k, v in update.items() if v is not None}
    if not update:
        return config
    data = config.model_dump(mode="json")
    data["daemon"].update(update)
    return validate(data, "command line")


def load(args: argparse.Namespace) -> DaemonConfig:
    if args.config is not None:
        if args.stats is not None:
            raise UserError("give either --config FILE or --stats ADDR, not both", code=2)
        return _overrides(load_config(args.config, os.environ), args)
    if args.stats is None:
        raise UserError(
            "no instances: give --config /etc/uwsgitune/uwsgitune.toml or --stats ADDR", code=2
        )
    return _from_flags(args)


def run(args: argparse.Namespace) -> int:
    from uwsgitune.daemon import logs
    from uwsgitune.daemon.runtime import Daemon, StartupError

    try:
        config = load(args)
    except ConfigError as exc:
        raise config_error(exc) from None
    logs.setup(config.daemon.log_format)
    daemon = Daemon(config, config_path=args.config)
    try:
        return asyncio.run(daemon.serve())
    except StartupError as exc:
        raise UserError(str(exc), code=1) from None
