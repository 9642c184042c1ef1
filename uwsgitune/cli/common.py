"""Argument helpers shared by commands."""

from __future__ import annotations

import argparse

from uwsgitune.core.address import StatsAddress, parse_address
from uwsgitune.errors import UserError
from uwsgitune.pipeline import LatencyStage
from uwsgitune.sources.reqlog import DEFAULT_ADDRESS, ReqlogAddressError, parse_reqlog_address


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not 0.05 <= value <= 3600:
        raise argparse.ArgumentTypeError(f"{text} is out of range; use 0.05 to 3600 seconds")
    return value


def duration_seconds(text: str) -> float:
    """A run length: at least 0.05 s, at most a week."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not 0.05 <= value <= 7 * 86400:
        raise argparse.ArgumentTypeError(f"{text} is out of range; use 0.05 to 604800 seconds")
    return value


def addresses(texts: list[str]) -> list[StatsAddress]:
    """Each text parsed; a bad one raises AddressError (exit status 2)."""
    return [parse_address(text) for text in texts]


LATENCY_HELP = (
    "receive the instance's request log here (UDP, loopback, e.g. "
    f"{DEFAULT_ADDRESS}) for live latency percentiles; `uwsgitune doctor --latency ADDR` "
    "prints the uWSGI lines to add"
)


def add_latency_flag(parser: argparse._ActionsContainer) -> None:
    parser.add_argument("--latency", metavar="HOST:PORT", default=None, help=LATENCY_HELP)


LATENCY_ROUTES_HELP = (
    "also export latency per route on /metrics (uwsgi_request_route_duration_seconds{route}: "
    "at most 51 routes of 49 series each)"
)


def add_latency_routes_flag(parser: argparse._ActionsContainer) -> None:
    parser.add_argument(
        "--latency-routes", action="store_true", default=None, help=LATENCY_ROUTES_HELP
    )


def check_latency(text: str | None) -> None:
    """`--latency ADDR` refused early (before a FIFO or a stats socket is looked at) when it
    can never work: one line naming the fix, exit status 2."""
    if text is not None:
        try:
            parse_reqlog_address(text)
        except ReqlogAddressError as exc:
            raise UserError(f"--latency: {exc}", code=2) from None


def latency_stage(text: str | None) -> LatencyStage | None:
    """The request log's stage for `--latency ADDR` (None without it); a bad or busy address
    is one line naming the fix (exit status 2)."""
    if text is None:
        return None
    try:
        return LatencyStage(text)
    except ReqlogAddressError as exc:
        raise UserError(f"--latency: {exc}", code=2) from None
