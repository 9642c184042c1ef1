"""The batch parser reads the batch as one buffer (`parse_batch`: the lines joined, one regex
over them): a line can neither lend a field to another nor hide a second tail, and every
line it takes reads as `parse_raw` reads it alone; the rest go to the per-line parser."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.core.test_logline_batch import as_raw, fast_scan, same_fields
from uwsgitune.core.logline import MAX_LINE, FastLine, parse_batch, parse_raw

USER = b'127.0.0.1 "GET /x HTTP/1.1" 200 '
TAIL = b"uwt1 1795732664212899 5233 200 1 2476 GET [t=1795732664.201] /io/5"
GOOD = USER + TAIL


def agrees(lines: list[bytes]) -> list[FastLine] | None:
    """parse_batch's answer, checked: None, or each row as the line parsed alone; the C
    path (core/_fastlog.c) answers the same, where it is built."""
    rows = parse_batch(lines)
    assert fast_scan(lines) == rows, lines
    if rows is not None:
        assert len(rows) == len(lines)
        for data, row in zip(lines, rows, strict=True):
            raw = parse_raw(data)
            assert type(raw) is tuple, (data, raw)
            assert as_raw(row) == same_fields(raw), data
    return rows


@pytest.mark.parametrize(
    "odd",
    [
        GOOD.replace(b"/io/5", b"/io/5\nx"),  # a newline in the uri: the rest is the uri
        GOOD.replace(b"/io/5", b"/io/5\n" + TAIL),  # a second tail after a newline
        b"garbage\n" + GOOD,  # a newline before the tail
        GOOD.replace(b"/io/5", b"/io/5 " + TAIL),  # two tails: AMBIGUOUS alone
        USER + b"xuwt1 " + TAIL,  # `uwt1 ` twice, once not a marker
        GOOD.replace(b"/io/5", b"/a/uwt1 b"),
        b"",
        b"\n",
        b" ",
        GOOD[:-1],  # cut inside the uri's first segment: still a line
        GOOD.replace(b"2476", b"0"),  # pid 0: out of range
    ],
)
@pytest.mark.parametrize("where", [0, 1, 2])
def test_an_odd_line_among_good_ones_is_read_as_alone_or_sends_the_batch_away(
    odd: bytes, where: int
) -> None:
    lines = [GOOD, GOOD.replace(b"/io/5", b"/b"), GOOD.replace(b" 1 2476", b" 2 2477")]
    lines.insert(where, odd)
    agrees(lines)


def test_a_line_that_splits_in_two_cannot_stand_for_a_line_without_a_tail() -> None:
    """Two lines, one holding two tails split by a newline and one holding none: two
    matches for two lines, which must not pass for one each."""
    split = GOOD + b"\n" + TAIL.replace(b"/io/5", b"/other")
    assert agrees([split, b"no tail here"]) is None
    assert agrees([b"no tail here", split]) is None


def test_lines_that_open_with_the_tail_take_the_batch_path() -> None:
    rows = agrees([TAIL, GOOD, TAIL.replace(b"/io/5", b"/z?q=1")])
    assert rows is not None and [r[7] for r in rows] == [b"/io/5", b"/io/5", b"/z"]


def test_the_size_cap_is_per_line() -> None:
    big = USER * ((MAX_LINE - len(TAIL)) // len(USER)) + TAIL
    assert len(big) <= MAX_LINE
    assert agrees([big] * 3) is not None  # together far over the cap, each within it
    assert agrees([GOOD, big + b"x" * (MAX_LINE - len(big) + 1)]) is None


user_parts = st.lists(
    st.sampled_from([b"a", b" ", b"\n", b"uwt1 ", b" uwt1 ", b"]", b"[", b"/", b"?", b"\r", b"7"]),
    max_size=6,
).map(b"".join)
tails = st.builds(
    lambda start, service, stamp, uri, after: (
        b"uwt1 " + start + b" " + service + b" 200 3 2476 GET [" + stamp + b"] " + uri + after
    ),
    st.sampled_from([b"1795732664212899", b"1795732664212899x", b"0795732664212899"]),
    st.sampled_from([b"0", b"5233", b"99999999999"]),
    st.sampled_from([b"-", b"", b"t=1795732664.201", b"1795732664201", b"a] /b", b"x\ny"]),
    st.sampled_from([b"/", b"/io/5", b"/a b", b"/q?x\ny", b"/r\n", b"/s\r"]),
    st.sampled_from([b"", b"\n", b" ", b"\nuwt1 ", b" uwt1 1 2 3 4 5 GET [-] /x", b"\n/x"]),
)
lines_ = st.one_of(
    st.just(GOOD),
    st.builds(lambda user, tail: user + tail, user_parts, tails),
    st.builds(lambda user, tail: user + b" " + tail, user_parts, tails),
    user_parts,
)


@settings(max_examples=600, deadline=None)
@given(st.lists(lines_, min_size=1, max_size=6))
def test_any_batch_is_read_as_its_lines_alone_or_left_to_the_per_line_parser(
    lines: list[bytes],
) -> None:
    agrees(lines)
