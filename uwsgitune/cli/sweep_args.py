"""`uwsgitune sweep`'s flags, and the checks on its target before anything changes."""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import sys
from pathlib import Path
from urllib.parse import urlsplit

from uwsgitune.actuate.peer import PeerSettings
from uwsgitune.cli.common import positive_float
from uwsgitune.core.address import StatsAddress
from uwsgitune.core.settings import add_flag
from uwsgitune.errors import UserError
from uwsgitune.loadgen import LoadRun, one_request

OTHER_TRAFFIC_RPS = 1.0  # before the sweep: more than this is someone else's traffic


def _positive_int(text: str) -> int:
    if not text.isdigit() or not 0 < int(text) <= 4096:
        raise argparse.ArgumentTypeError(f"{text!r}: use a whole number from 1 to 4096")
    return int(text)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--url", required=True, help="loopback URL to load, e.g. http://127.0.0.1:8000/")
    p.add_argument("--stats", required=True, metavar="ADDR", help="the instance's stats address")
    p.add_argument("--fifo", required=True, metavar="PATH", help="the instance's master FIFO")
    p.add_argument("--workers", required=True, metavar="RANGE", help="1..32 or 1,2,4,8")
    add_flag(p, PeerSettings, "trust_tcp_stats")
    _load_flags(p)
    _grid_flags(p)
    _outcome_flags(p)


def _grid_flags(p: argparse.ArgumentParser) -> None:
    """The threads axis: reloads, so it needs the override ini and explicit consent."""
    p.add_argument(
        "--threads",
        metavar="LIST",
        default=None,
        help="thread counts per worker, e.g. 1,2,4,8: a processes x threads grid (reloads)",
    )
    p.add_argument("--ini", type=Path, default=None, help="the instance's ini (to validate)")
    p.add_argument("--override", type=Path, default=None, help="the override ini uwsgitune owns")
    p.add_argument(
        "--allow-reload",
        action="store_true",
        help="allow the reloads --threads needs (each one restarts the workers)",
    )
    p.add_argument(
        "--yes", action="store_true", help="sweep a target that looks like production anyway"
    )


def _load_flags(p: argparse.ArgumentParser) -> None:
    """The load each step runs under, and how long."""
    load = p.add_mutually_exclusive_group()
    load.add_argument("--concurrency", type=_positive_int, metavar="N", help="closed-loop clients")
    load.add_argument("--rate", type=positive_float, metavar="R", help="open loop, requests/s")
    p.add_argument(
        "--step-seconds",
        type=positive_float,
        default=10.0,
        metavar="S",
        help="measured seconds per step (10)",
    )
    p.add_argument(
        "--warmup",
        type=positive_float,
        default=3.0,
        metavar="S",
        help="unmeasured seconds first (3)",
    )
    p.add_argument(
        "--repeat", type=_positive_int, default=2, metavar="K", help="passes, for the noise (2)"
    )
    p.add_argument(
        "--loadgen",
        choices=("auto", "builtin", "wrk"),
        default="auto",
        help="the load generator: wrk (closed loop, keeps up with fast routes), builtin "
        "(asyncio, one core; open loop too), auto: wrk when installed and no --rate",
    )
    p.add_argument(
        "--keepalive",
        action="store_true",
        help="keep each client's connection open (as a proxy with upstream keepalive does)",
    )


def _outcome_flags(p: argparse.ArgumentParser) -> None:
    """What counts as good enough, the limits, and where the results go."""
    p.add_argument(
        "--within",
        type=positive_float,
        default=10.0,
        metavar="PCT",
        help="of the best throughput (10; widened to the noise)",
    )
    p.add_argument(
        "--p99-ms",
        type=positive_float,
        default=None,
        metavar="MS",
        help="p99 target for the recommendation",
    )
    p.add_argument("--timeout", type=positive_float, default=10.0, metavar="S", help="per request")
    p.add_argument(
        "--max-minutes",
        type=positive_float,
        default=30.0,
        metavar="M",
        help="refuse longer sweeps (30)",
    )
    p.add_argument(
        "--out",
        type=Path,
        default=None,
        metavar="DIR",
        help="for sweep.json and sweep.svg: a new directory (made 0700) or an empty one of "
        "yours nobody else can write (default: a new ./uwsgitune-sweep-TIME)",
    )


def _loopback(host: str) -> bool:
    try:
        return host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def production_looking(url: str, stats: StatsAddress, rps: float | None) -> str | None:
    """Why the target looks like production, or None: a remote URL or stats address, or
    traffic that is not ours (a staging instance is idle before its sweep)."""
    host = urlsplit(url).hostname or ""
    if not _loopback(host):
        return f"{host} is not a loopback address"
    if stats.kind in ("tcp", "http") and not _loopback(stats.host):
        return f"the stats address {stats.host} is not on this host"
    if rps is not None and rps >= OTHER_TRAFFIC_RPS:
        return f"it is already serving {rps:.0f} req/s of other traffic"
    return None


def check_target(url: str, stats: StatsAddress, rps: float | None, yes: bool) -> None:
    why = production_looking(url, stats, rps)
    if why and not yes:
        raise UserError(
            f"{url}: {why}; sweep drives load and moves workers, so point it at staging "
            "(or pass --yes if this is one)",
            code=2,
        )


def check_url(url: str) -> None:
    parts = urlsplit(url)
    if parts.scheme != "http" or not parts.hostname:
        raise UserError(f"--url {url}: give an http://HOST:PORT/PATH URL", code=2)
    try:
        probe = LoadRun(url, duration=1.0)
        status = asyncio.run(one_request(probe.host, probe.port, probe.request, 5.0))
    except (OSError, asyncio.TimeoutError, ConnectionError) as exc:
        raise UserError(f"--url {url}: {exc or type(exc).__name__}; is uWSGI serving it?") from None
    if status >= 400:
        print(f"uwsgitune: warning: {url} answers {status}; errors will count", file=sys.stderr)
