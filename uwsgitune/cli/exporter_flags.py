"""uwsgi_exporter 1.3's flags on `uwsgitune daemon`, as aliases of uwsgitune's settings.

`uwsgi_exporter --stats.uri=unix:///run/uwsgi/stats.sock --web.listen-address=:9117` keeps
working with the binary's name changed. Same defaults and meaning, with these differences:
`--stats.uri` and `--web.listen-address` may be repeated (several instances, several
addresses); `--stats.timeout`, which 1.3 accepts and ignores, sets the poll deadline; a
host-less `:PORT` means every IPv4 interface. With `--stats.uri` and no listen address, the
endpoint listens on uwsgi_exporter's `:9117`; otherwise uwsgitune's 127.0.0.1:9117.
Exporter flags uwsgitune does not implement are refused by name, never ignored.
"""

from __future__ import annotations

import argparse
import re
from typing import Any

EXPORTER_LISTEN = "0.0.0.0:9117"  # uwsgi_exporter's default, ":9117"
_UNIT = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")
UNSUPPORTED = {
    "--web.systemd-socket": "listen with --web.listen-address (systemd socket activation "
    "is not implemented)",
    "--no-web.systemd-socket": "drop it: uwsgitune always binds --web.listen-address",
    "--version": "use `uwsgitune --version`",
    "--help-long": "use `uwsgitune daemon --help`",
    "--help-man": "use `uwsgitune daemon --help`",
}


def go_duration(text: str) -> str:
    """`5s`, `1m30s`, `250ms` (Go's time.ParseDuration) or plain seconds -> seconds."""
    text = text.strip()
    try:
        return str(float(text))
    except ValueError:
        pass
    pos, total = 0, 0.0
    for m in _PART.finditer(text):
        if m.start() != pos:
            break
        total += float(m.group(1)) * _UNIT[m.group(2)]
        pos = m.end()
    if pos != len(text) or not text:
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration; write e.g. 5s or 500ms")
    return str(total)


def listen_address(text: str) -> str:
    """uwsgi_exporter's `:9117` (every interface) as uwsgitune spells it."""
    return f"0.0.0.0{text}" if text.startswith(":") else text


class _Refuse(argparse.Action):
    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        flag = option_string or self.option_strings[0]
        parser.error(
            f"{flag}: a uwsgi_exporter flag uwsgitune does not support; {UNSUPPORTED[flag]}"
        )


# (flag, argparse keywords): the aliases, each onto the dest uwsgitune's own option uses.
FLAGS: tuple[tuple[str, dict[str, Any]], ...] = (
    (
        "--stats.uri",
        dict(
            dest="stats_uri",
            action="append",
            metavar="URI",
            help="a stats address (repeatable): unix:///path, tcp://host:port, http://...",
        ),
    ),
    (
        "--stats.timeout",
        dict(
            dest="timeout", type=go_duration, metavar="DURATION", help="the poll deadline (e.g. 5s)"
        ),
    ),
    (
        "--timeout-offset",
        dict(
            dest="scrape_timeout_offset",
            type=float,
            metavar="SECONDS",
            help="subtracted from the scrape timeout (default 0.25)",
        ),
    ),
    (
        "--web.listen-address",
        dict(
            dest="listen_addresses",
            action="append",
            type=listen_address,
            metavar="[HOST]:PORT",
            help="metrics address (repeatable; default :9117 with --stats.uri)",
        ),
    ),
    (
        "--web.telemetry-path",
        dict(dest="telemetry_path", metavar="PATH", help="path of the metrics (default /metrics)"),
    ),
    (
        "--web.config.file",
        dict(
            dest="web_config_file",
            metavar="FILE.yml",
            help="exporter-toolkit web config: TLS and basic auth",
        ),
    ),
    (
        "--collect.cores",
        dict(
            dest="collect_cores",
            action="store_true",
            default=None,
            help="per-core series (off by default)",
        ),
    ),
    ("--no-collect.cores", dict(dest="collect_cores", action="store_false")),
    ("--log.level", dict(dest="log_level", choices=["debug", "info", "warn", "error"])),
    ("--log.format", dict(dest="log_format", choices=["logfmt", "json"])),
)


def register(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("uwsgi_exporter 1.3 flags (aliases; see the migration page)")
    for flag, kwargs in FLAGS:
        g.add_argument(flag, **kwargs)
    for flag in UNSUPPORTED:
        g.add_argument(flag, nargs=0, action=_Refuse, help=argparse.SUPPRESS)


def daemon_overrides(args: argparse.Namespace) -> dict[str, Any]:
    """The [daemon] keys these flags (and --metrics-listen, --log-format, --latency-routes)
    set."""
    listens = list(args.listen_addresses or [])
    if args.metrics_listen is not None:
        listens.insert(0, args.metrics_listen)
    if not listens and args.stats_uri and args.config is None:
        listens = [EXPORTER_LISTEN]
    values = {
        "metrics_listen": (listens[0] if len(listens) == 1 else listens) if listens else None,
        "log_format": args.log_format,
        "log_level": args.log_level,
        "telemetry_path": args.telemetry_path,
        "web_config_file": args.web_config_file,
        "collect_cores": args.collect_cores,
        "scrape_timeout_offset": args.scrape_timeout_offset,
        "latency_routes": args.latency_routes,
    }
    return {k: v for k, v in values.items() if v is not None}
