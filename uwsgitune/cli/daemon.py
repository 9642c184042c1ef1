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

from uwsgitune.actuate.peer import PeerSettings
from uwsgitune.cli import exporter_flags
from uwsgitune.cli.common import add_latency_flag, add_latency_routes_flag
from uwsgitune.cli.tuner_flags import add_latency_target_flag, latency_target_from
from uwsgitune.core.settings import add_flag
from uwsgitune.daemon.config import DEFAULT_LISTEN, DaemonConfig, load_config, validate
from uwsgitune.errors import ConfigError, UserError
from uwsgitune.tuner.tunersettings import TunerSettings


def register(sub: Any) -> None:
    p = sub.add_parser(
        "daemon",
        help="run as a service: watch instances, log changes, serve Prometheus /metrics",
        description="Watch uWSGI instances as a service (systemd Type=notify) and serve "
        "their metrics at /metrics. SIGHUP re-reads the config; SIGTERM/SIGINT stop.",
    )
    p.add_argument("--config", type=Path, metavar="FILE.toml", help="instances and settings")
    one = p.add_argument_group("one instance without a file")
    one.add_argument("--stats", metavar="ADDR", action="append", help="the stats address")
    one.add_argument("--name", default="uwsgi", help="instance name in logs (default uwsgi)")
    one.add_argument("--fifo", metavar="PATH", help="the master FIFO")
    one.add_argument("--override", metavar="PATH", help="the override ini uwsgitune owns")
    one.add_argument("--mode", choices=["observe", "recommend", "apply"], default=None)
    # checked by the config's validation, which names the flag: `--interval: must be >= 0.1`
    add_flag(one, TunerSettings, "min_workers", default=None)
    add_flag(one, TunerSettings, "max_workers", default=None)
    add_flag(one, TunerSettings, "interval", type=str, default=None, metavar="SECONDS")
    one.add_argument("--timeout", default=None, metavar="SECONDS")
    add_flag(one, PeerSettings, "trust_tcp_stats", default=None)
    add_latency_flag(one)
    add_latency_target_flag(one)
    p.add_argument(
        "--metrics-listen",
        default=None,
        metavar="HOST:PORT",
        help=f"metrics endpoint (default {DEFAULT_LISTEN})",
    )
    p.add_argument("--log-format", choices=["text", "json"], default=None)
    add_latency_routes_flag(p)
    exporter_flags.register(p)
    p.set_defaults(func=run)


def _stats(args: argparse.Namespace) -> list[str]:
    return [*(args.stats or []), *(args.stats_uri or [])]


def _from_flags(args: argparse.Namespace) -> DaemonConfig:
    keys = (
        "fifo",
        "override",
        "mode",
        "min_workers",
        "max_workers",
        "interval",
        "timeout",
        "trust_tcp_stats",
        "latency",
        "latency_target",
    )
    stats = _stats(args)
    latency_target_from(args)  # a bad target, or one without --latency: one line, exit 2
    common = {k: getattr(args, k) for k in keys if getattr(args, k) is not None}
    if len(stats) > 1 and {"fifo", "override", "latency"} & set(common):
        raise UserError(
            "--fifo, --override and --latency need a single --stats; use --config", code=2
        )
    names = [args.name] if len(stats) == 1 else [f"{args.name}-{i + 1}" for i in range(len(stats))]
    data: dict[str, Any] = {
        "daemon": exporter_flags.daemon_overrides(args),
        "instance": [{"name": n, "stats": s, **common} for n, s in zip(names, stats, strict=True)],
    }
    try:
        return validate(data, "command line", os.environ)
    except ConfigError as exc:  # name the flag: `--interval: must be >= 0.1 (got '0')`
        flags = [re.sub(r"^(instance\[\d+\]|daemon)\.(\w+)", _flag, p) for p in exc.problems]
        raise ConfigError(
            flags, source="" if exc.source == "command line" else exc.source
        ) from None


def _flag(m: re.Match[str]) -> str:
    return "--" + m.group(2).replace("_", "-")


def _overrides(config: DaemonConfig, args: argparse.Namespace) -> DaemonConfig:
    """--metrics-listen, --log-format and the exporter's flags beside --config win."""
    update = exporter_flags.daemon_overrides(args)
    if not update:
        return config
    data = config.model_dump(mode="json")
    data["daemon"].update(update)
    return validate(data, "command line")


def load(args: argparse.Namespace) -> DaemonConfig:
    if args.config is not None:
        if _stats(args):
            raise UserError("give either --config FILE or --stats ADDR, not both", code=2)
        return _overrides(load_config(args.config, os.environ), args)
    if not _stats(args):
        raise UserError(
            "no instances: give --config /etc/uwsgitune/uwsgitune.toml or --stats ADDR", code=2
        )
    return _from_flags(args)


def run(args: argparse.Namespace) -> int:
    from uwsgitune.daemon import logs
    from uwsgitune.daemon.runtime import Daemon

    config = load(args)
    logs.setup(config.daemon.log_format, level=config.daemon.log_level)
    daemon = Daemon(config, config_path=args.config)
    return asyncio.run(daemon.serve())
