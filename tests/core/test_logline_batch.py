"""The batch parser (`logline.parse_batch`) reads every line it takes as `parse_raw` does, and
takes the ordinary lines; the recorder counts a batch as it counts the same lines one by one.
"""

from __future__ import annotations

import json
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import DATA
from uwsgitune.core import latency
from uwsgitune.core.latency import LatencyRecorder
from uwsgitune.core.logline import FastLine, RawLine, parse_batch, parse_raw

try:
    from uwsgitune.core import _fastlog
except ImportError:  # not built: tests/core/test_fastlog.py says whether it should be
    _fastlog = None  # type: ignore[assignment]

# The recorder's paths: the C one (where built) and the Python one, each compared below.
FAST = [
    pytest.param(True, id="c", marks=pytest.mark.skipif(_fastlog is None, reason="not built")),
    pytest.param(False, id="python"),
]
T0 = 1_795_732_664_000_000
PREFIX = b'127.0.0.1 "GET /x HTTP/1.1" 200'


def tail(
    start: bytes = b"1795732664212899",
    service: bytes = b"5233",
    status: bytes = b"200",
    wid: bytes = b"1",
    pid: bytes = b"2476",
    method: bytes = b"GET",
    stamp: bytes = b"-",
    uri: bytes = b"/io/5",
) -> bytes:
    return b" ".join((b"uwt1", start, service, status, wid, pid, method, b"[" + stamp + b"]", uri))


def fast_scan(lines: list[bytes]) -> list[FastLine] | None:
    """The C path's rows for these lines (core/_fastlog.c `scan`), or parse_batch's where it
    is not built: every comparison with parse_batch then holds trivially."""
    return parse_batch(lines) if _fastlog is None else _fastlog.scan(lines)


def as_raw(row: FastLine) -> tuple[int, int, int, int, bytes | None, bytes]:
    """A batch row as the fields of `parse_raw` it carries (no pid, no method)."""
    start, service, status, wid, sec, ms, other, path = row
    stamp = b"t=" + sec + b"." + ms if sec else None if other in (b"", b"-") else other
    return int(start), int(service), int(status), int(wid), stamp, path


def same_fields(raw: RawLine) -> tuple[int, int, int, int, bytes | None, bytes]:
    t, m, s, w, _, _, stamp, path = raw
    return t, m, s, w, stamp, path


# Fields that parse_raw takes and the batch regex may not (leading zeros, long numbers,
# odd stamps and uris, extra markers): the batch must then say None or read them alike.
numbers = st.sampled_from(
    [b"0", b"7", b"0007", b"65535", b"65536", b"99999", b"4194304", b"4194305", b"1234567"]
)
starts = st.sampled_from(
    [b"1795732664212899", b"01795732664212899", b"999999999999999", b"99999999999999999", b"1x"]
)
services = st.sampled_from([b"0", b"5233", b"9999999999", b"86400000000", b"86400000001", b"-1"])
stamps = st.sampled_from(
    [
        b"-",
        b"",
        b"t=1795732664.123",
        b"t=0795732664.123",
        b"t=1795732664.12",
        b"1795732664123",
        b"a] [b",
        b"a]",
        b"t=1795732664.123] /x",
    ]
)
uris = st.sampled_from(
    [b"/", b"/io/5?t=s", b"/a b", b"/a\r", b"/a?\r", b"/caf\xc3\xa9/\xff", b"x", b"/a\nb", b""]
)
methods = st.sampled_from([b"GET", b"", b"X" * 25, b"\xffPOST"])
prefixes = st.sampled_from(
    [
        PREFIX + b" ",
        b"",
        b"uwt1 ",
        b"a uwt1 1 2 3 ",
        PREFIX + b" uwt1 uwt1 ",
        b"x\n",
        PREFIX + b" uwk20 ",  # a sampled line
        b"uwt- ",  # outside the sample (uWSGI's own forced lines)
        PREFIX + b" uwk- uwt- ",
    ]
)


@st.composite
def odd_lines(draw: st.DrawFn) -> bytes:
    line = draw(prefixes) + tail(
        start=draw(starts),
        service=draw(services),
        status=draw(st.sampled_from([b"200", b"2000", b"20", b"404"])),
        wid=draw(numbers),
        pid=draw(numbers),
        method=draw(methods),
        stamp=draw(stamps),
        uri=draw(uris),
    )
    if draw(st.booleans()):
        line += draw(st.sampled_from([b" uwt1 ", b" " + tail(), b"\r", b" ]", b" uwt- "]))
    return line


@settings(max_examples=400, deadline=None)
@given(st.lists(odd_lines(), min_size=1, max_size=6))
def test_a_batch_is_read_as_each_line_alone_or_left_to_the_per_line_parser(
    lines: list[bytes],
) -> None:
    rows = parse_batch(lines)
    assert fast_scan(lines) == rows, lines
    if rows is None:
        return
    assert len(rows) == len(lines)
    for data, row in zip(lines, rows, strict=True):
        raw = parse_raw(data)
        assert type(raw) is tuple, (data, raw)
        assert as_raw(row) == same_fields(raw), data


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from([PREFIX + b" ", b"", b"a [uwt1] b "]),
            st.integers(0, 9_999_999_999),
            st.integers(0, 999),
            st.integers(0, 9999),
            st.integers(1, 2**22),
            st.sampled_from([b"-", b"", b"t=1795732664.123", b"1795732664123456"]),
            st.sampled_from([b"/", b"/io/5?t=s&x=\r", b"/a b/c", b"/caf\xc3\xa9"]),
        ),
        min_size=1,
        max_size=8,
    )
)
def test_ordinary_lines_take_the_batch_path(
    fields: list[tuple[bytes, int, int, int, int, bytes, bytes]],
) -> None:
    lines = [
        prefix
        + tail(
            service=b"%d" % service,
            status=b"%03d" % status,
            wid=b"%d" % wid,
            pid=b"%d" % pid,
            stamp=stamp,
            uri=uri,
        )
        for prefix, service, status, wid, pid, stamp, uri in fields
    ]
    rows = parse_batch(lines)
    assert rows is not None, lines
    assert fast_scan(lines) == rows
    assert [as_raw(r) for r in rows] == [same_fields(parse_raw(x)) for x in lines]  # type: ignore[arg-type]


def test_the_recorded_lines_of_a_real_uwsgi_take_the_batch_path_alike() -> None:
    recorded = json.loads((DATA / "logline" / "uwsgi-2.0.31.json").read_text())
    for run in recorded["runs"]:
        lines = [d.encode("latin-1").rstrip(b"\n") for d in run["datagrams"]]
        # one line holds a stamp `a b] [c`, one a fake tail in its request line: the
        # batch goes to the per-line parser; the others take the batch path
        assert parse_batch(lines) is None
        assert fast_scan(lines) is None
        plain = [x for x in lines if b"] [" not in x and (b" " + x).count(b" uwt1 ") == 1]
        assert len(plain) >= len(lines) - 2
        rows = parse_batch(plain)
        assert rows is not None
        assert fast_scan(plain) == rows
        assert [as_raw(r) for r in rows] == [same_fields(parse_raw(x)) for x in plain]  # type: ignore[arg-type]


def test_a_line_the_batch_cannot_read_sends_the_batch_to_the_per_line_parser() -> None:
    good = PREFIX + b" " + tail()
    for bad in (
        b"garbage",
        PREFIX + b" " + tail(stamp=b"a]b"),
        PREFIX + b" " + tail() + b" " + tail(),  # two markers
        good + b"\n",  # a newline in the tail
        good * 60,  # over MAX_LINE
    ):
        assert parse_batch([good, bad, good]) is None, bad
        assert fast_scan([good, bad, good]) is None, bad
    assert parse_batch([good, good]) is not None
    assert fast_scan([good, good]) == parse_batch([good, good])
    assert parse_batch([]) is None
    assert fast_scan([]) is None


@pytest.mark.parametrize(
    ("field", "inside", "outside"),
    [
        ("pid", b"4194304", b"4194305"),  # 2**22
        ("pid", b"1", b"0"),
        ("start", b"1000000000000000", b"999999999999999"),
        ("start", b"99999999999999999", b"100000000000000000"),
        ("service", b"9999999999", b"86400000001"),
        ("wid", b"9999", b"65536"),
        ("status", b"999", b"1000"),
    ],
)
def test_numbers_at_the_edges_of_their_ranges(field: str, inside: bytes, outside: bytes) -> None:
    good = PREFIX + b" " + tail()
    line = PREFIX + b" " + tail(**{field: inside})
    rows = parse_batch([good, line])
    assert rows is not None
    assert fast_scan([good, line]) == rows
    assert as_raw(rows[1]) == same_fields(parse_raw(line))  # type: ignore[arg-type]
    assert parse_batch([good, PREFIX + b" " + tail(**{field: outside})]) is None
    assert fast_scan([good, PREFIX + b" " + tail(**{field: outside})]) is None


@pytest.mark.parametrize("fast", FAST)
def test_the_rest_of_the_routes_is_capped_by_its_own_maximum(fast: bool) -> None:
    # 11 routes, 10 shown: the 11th, one request of 1 ms, is "other"; its p99 (its only
    # request) is its own maximum, not the slowest route's
    rec = LatencyRecorder(top=10, fast=fast)
    lines = [
        PREFIX + b" " + tail(service=b"%d" % (10**6 if r == 0 else 50_000), uri=b"/r%d" % r)
        for r in range(10)
        for _ in range(3)
    ]
    lines.append(PREFIX + b" " + tail(service=b"1000", uri=b"/last"))
    rec.ingest(lines, 5.0)
    for seconds in (10, 30):
        routes = rec.window(5.0, seconds).routes
        assert routes[-1].route == latency.OTHER and routes[-1].count == 1
        assert routes[-1].p99_ms == 1.0


def mixed(n: int, seed: int) -> list[bytes]:
    """Lines over 8 workers and 30 paths, with every kind of stamp: nginx, other formats,
    waits negative and absurd, none, bad."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        start = T0 + i * 1000
        kind = rng.random()
        if kind < 0.05:  # nginx's clock ahead: a negative wait
            ms = (start + rng.randint(1000, 9000)) // 1000
            stamp = f"t={ms // 1000}.{ms % 1000:03d}"
        elif kind < 0.5:
            ms = (start - int(rng.lognormvariate(7, 1))) // 1000
            stamp = f"t={ms // 1000}.{ms % 1000:03d}"
        elif kind < 0.6:
            stamp = str(start + rng.randint(1, 5000))  # µs, ahead: negative
        elif kind < 0.65:
            stamp = str((start - 400 * 10**6) // 1000)  # ms, 400 s ago: absurd
        elif kind < 0.7:
            stamp = "garbage"
        else:
            stamp = "-"
        service = 0 if rng.random() < 0.01 else int(rng.lognormvariate(9, 1.2))
        path = f"/p{rng.randint(0, 29)}/{rng.randint(0, 3)}" + ("?q=1" if i % 3 == 0 else "")
        out.append(
            (
                f'1.2.3.4 "GET {path}" uwt1 {start} {service} '
                f"{rng.choice((200, 200, 404, 500, 302))} {rng.randint(1, 8)} 4000 GET "
                f"[{stamp}] {path}"
            ).encode()
        )
    return out


@pytest.mark.parametrize("fast", FAST)
@pytest.mark.parametrize("pending", [latency.MAX_PENDING, 7])
@pytest.mark.parametrize("only_nginx", [False, True])
def test_a_batch_is_recorded_as_its_lines_one_by_one(
    monkeypatch: pytest.MonkeyPatch, pending: int, only_nginx: bool, fast: bool
) -> None:
    monkeypatch.setattr(latency, "MAX_PENDING", pending)
    lines = mixed(6000, seed=38)
    if only_nginx:  # every batch's waits at once (but for those with a negative wait)
        lines = [x for x in lines if b"[t=" in x]
    batched, alone = LatencyRecorder(fast=fast), LatencyRecorder(fast=False)
    now = 100.0
    for k in range(0, len(lines), 150):
        chunk = lines[k : k + 150]
        assert parse_batch(chunk) is not None
        batched.ingest(chunk, now)
        alone._put(map(parse_raw, chunk), now)
        now += 0.37
        if k % 900 == 0:  # reading now and then, as polls do
            for rec in (batched, alone):
                rec.window(now, 10)
    assert batched.recorded == alone.recorded == len(lines)
    assert batched.tally.as_dict() == alone.tally.as_dict()
    for seconds in (10, 60, 30):
        assert batched.window(now, seconds) == alone.window(now, seconds)
    assert batched.p99_series(now) == alone.p99_series(now)
    assert batched.export() == alone.export()
