"""The proxy's stamp: every format proxies use, read by magnitude and named; bad stamps; the
queue wait's bounds; the clock skew stated; Little's law without a stamp."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from uwsgitune.core.reqstamp import (
    MAX_SKEW_US,
    MAX_WAIT_US,
    NGINX,
    SKEW_TOLERANCE_US,
    StampUnit,
    WaitKind,
    classify_wait,
    little_wait,
    parse_stamp,
    skew_offset,
)

US = 1_795_732_664_209_123  # a time of day in µs since the epoch


@pytest.mark.parametrize(
    ("raw", "micros", "name"),
    [
        (b"t=1795732664.209", 1_795_732_664_209_000, "t=seconds (nginx ${msec})"),
        (b"t=1795732664", 1_795_732_664_000_000, "t=seconds (nginx ${msec})"),
        (b"1795732664.209123", 1_795_732_664_209_123, "seconds"),
        (b"1795732664.2", 1_795_732_664_200_000, "seconds"),
        (b"1795732664.2091239", 1_795_732_664_209_123, "seconds"),  # below 1 µs: cut
        (b"1795732664209", 1_795_732_664_209_000, "milliseconds"),
        (b"1795732664209.5", 1_795_732_664_209_500, "milliseconds"),
        (b"t=1795732664209", 1_795_732_664_209_000, "t=milliseconds"),
        (b"1795732664209123", 1_795_732_664_209_123, "microseconds"),
        (b"t=1795732664209123", 1_795_732_664_209_123, "t=microseconds"),
    ],
)
def test_every_format_is_read_by_magnitude_and_named(raw: bytes, micros: int, name: str) -> None:
    got = parse_stamp(raw)
    assert got is not None
    assert got[0] == micros
    assert got[1].name == name


def test_nginx_msec_is_the_format_of_the_fast_path() -> None:
    got = parse_stamp(b"t=1795732664.209")
    assert got is not None and got[1] is NGINX and NGINX.unit is StampUnit.SECONDS


@given(st.integers(min_value=10**9, max_value=9_999_999_999), st.integers(0, 999))
def test_nginx_msec_is_read_exactly(seconds: int, millis: int) -> None:
    assert parse_stamp(f"t={seconds}.{millis:03d}".encode()) == (
        seconds * 10**6 + millis * 1000,
        NGINX,
    )


@given(st.integers(min_value=10**15, max_value=10**17 - 1), st.booleans())
def test_the_same_instant_in_every_unit_reads_the_same(micros: int, prefixed: bool) -> None:
    seconds, frac = divmod(micros, 10**6)
    ms, sub = divmod(micros, 1000)
    lead = "t=" if prefixed else ""
    for text in (f"{seconds}.{frac:06d}", f"{ms}.{sub:03d}", f"{micros}"):
        got = parse_stamp(f"{lead}{text}".encode())
        assert got is not None and got[0] == micros, text
        assert got[1].prefixed is prefixed


@pytest.mark.parametrize(
    "raw",
    [
        b"",
        b"-",
        b"t=",
        b"t=abc",
        b"1.2.3",
        b"1795732664.",
        b"-1795732664",
        b"+1795732664",
        b"1795732664 .209",
        b"0",  # 1970
        b"t=12.5",
        b"99999999999999999999",  # beyond any unit
        b"1e9",
        b"t=1795732664.2x9",
        b"t=0000000001.000",  # the fast path's shape, in 1970
        b"\xff\xfe",
    ],
)
def test_what_is_not_a_stamp_is_none(raw: bytes) -> None:
    assert parse_stamp(raw) is None


def test_queue_waits_are_sorted_by_their_bounds() -> None:
    assert classify_wait(0) is WaitKind.OK
    assert classify_wait(MAX_WAIT_US) is WaitKind.OK
    assert classify_wait(MAX_WAIT_US + 1) is WaitKind.ABSURD
    assert classify_wait(-1) is WaitKind.NEGATIVE
    assert classify_wait(-MAX_SKEW_US) is WaitKind.NEGATIVE
    assert classify_wait(-MAX_SKEW_US - 1) is WaitKind.ABSURD


def test_a_skew_is_stated_as_an_offset_beyond_the_tolerance_only() -> None:
    assert skew_offset(None) is None
    assert skew_offset(-SKEW_TOLERANCE_US + 1) is None  # nginx's ms stamp, NTP's jitter
    got = skew_offset(-42_000.0)
    assert got is not None
    lead, text = got
    assert lead == 42_000.0
    assert "42 ms ahead" in text and "NTP" in text and "\n" not in text


def test_little_gives_the_mean_queue_wait_from_the_listen_queue() -> None:
    assert little_wait(5.0, 100.0) == pytest.approx(0.05)
    assert little_wait(0.0, 100.0) == 0.0
    assert little_wait(5.0, 0.0) is None
    assert little_wait(None, 100.0) is None
    assert little_wait(5.0, None) is None
    assert little_wait(-1.0, 100.0) is None
