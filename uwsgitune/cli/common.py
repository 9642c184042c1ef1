"""Argument helpers shared by commands."""

from __future__ import annotations

import argparse

from uwsgitune.core.address import StatsAddress, parse_address


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
