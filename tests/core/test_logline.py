"""The request log line: what uWSGI sends (recorded from a real 2.0.31), what is kept, what is
dropped, and every way a line can be bad, counted and never raised."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import DATA
from uwsgitune.core.logline import (
    DEFAULT_USER_FORMAT,
    MAX_LINE,
    TAIL_FORMAT,
    LineFault,
    LineTally,
    RequestLine,
    log_format,
    parse_line,
    parse_raw,
)

RECORDED = json.loads((DATA / "logline" / "uwsgi-2.0.31.json").read_text())
TAIL = b" uwt1 1795732664212899 5233 200 1 2476 GET [-] /io/5"


def recorded(run: int) -> list[bytes]:
    return [d.encode("latin-1") for d in RECORDED["runs"][run]["datagrams"]]


def test_the_recorded_lines_of_a_real_uwsgi_parse_in_every_user_format() -> None:
    # the runs: uWSGI's default line spelled as a log-format; a format with the user agent;
    # uwsgitune's fields alone. The requests were the same in each (see the fixture).
    for run in range(3):
        lines = [parse_line(d) for d in recorded(run)]
        assert all(isinstance(x, RequestLine) for x in lines), lines
        got = [x for x in lines if isinstance(x, RequestLine)]
        assert [x.path for x in got] == [
            "/",
            "/io/5",  # the query (?token=secret&a=1) is gone
            "/",
            "/",
            "/nope/x%20y",
            "/",  # the stamp `a b] [c` cannot move the uri
            "/sp",  # uWSGI's http parser cut the uri at its space
            "/caf\u00e9/\ufffd",  # UTF-8 kept, an odd byte replaced
            "/error",
            "/cpu/3",
        ]
        assert [x.status for x in got].count(500) == 1
        assert [x.method for x in got][-3:] == ["POST", "GET", "HEAD"]
        assert [x.stamp for x in got][:4] == [None, None, got[2].stamp, got[3].stamp]
        assert got[2].stamp is not None and got[2].stamp.startswith("t=")
        assert got[1].service_us > 5000  # /io/5 waited 5 ms
        assert all(x.wid in (1, 2) and x.pid > 1 for x in got)
        assert all(10**15 < x.start_us < 10**17 for x in got)


def test_nothing_of_the_users_part_is_kept() -> None:
    line = recorded(1)[1]  # its user part holds the address, the query and the user agent
    got = parse_line(line)
    assert isinstance(got, RequestLine)
    kept = " ".join(str(v) for v in got)
    for secret in ("127.0.0.1", "token", "secret", "Python-urllib", "HTTP/1.1"):
        assert secret not in kept


def test_the_last_marker_wins_over_one_in_the_users_part() -> None:
    # the user agent holds a tail that does not hold up (a start in 1970): not ambiguous
    line = recorded(1)[5]
    assert b'"evil uwt1 1 2 200 1 2 GET [] /fake"' in line
    got = parse_line(line)
    assert isinstance(got, RequestLine) and got.path == "/" and got.start_us > 10**15
    # uWSGI's own parser put a request line's spaces into %(proto) (in the user's part)
    got = parse_line(recorded(1)[6])
    assert isinstance(got, RequestLine) and got.path == "/sp"


def test_a_complete_fake_tail_anywhere_makes_the_line_ambiguous() -> None:
    fake = b" uwt1 1795732664000000 1 200 1 2476 GET [-] /fake"
    in_user_part = b'1.2.3.4 "' + fake + b'"' + TAIL
    in_uri = TAIL + fake  # a uri with spaces, through a lenient proxy
    at_the_start = fake[1:] + TAIL
    for line in (in_user_part, in_uri, at_the_start):
        assert parse_line(line) is LineFault.AMBIGUOUS, line


def test_spaces_and_odd_bytes_in_the_uri_are_the_rest_of_the_line() -> None:
    got = parse_line(b"x uwt1 1795732664212899 7 404 3 99 GET [-] /a b/\xff\x00c?q=1 2\n")
    assert isinstance(got, RequestLine)
    assert got.path == "/a b/\ufffd\x00c"
    assert (got.status, got.wid, got.pid, got.service_us) == (404, 3, 99, 7)


def test_the_query_is_dropped_at_parse_time() -> None:
    got = parse_raw(b"x uwt1 1795732664212899 7 200 1 9 GET [-] /reset?token=abc&x=1\n")
    assert not isinstance(got, LineFault)
    assert got[-1] == b"/reset"
    assert b"token" not in b"".join(x for x in got if isinstance(x, bytes))


def test_a_stamp_is_kept_as_text_and_an_absent_one_is_none() -> None:
    for raw, want in ((b"[-]", None), (b"[]", None), (b"[t=1795732664.209]", "t=1795732664.209")):
        got = parse_line(b"x uwt1 1795732664212899 7 200 1 9 GET " + raw + b" /")
        assert isinstance(got, RequestLine) and got.stamp == want


@pytest.mark.parametrize(
    ("line", "fault"),
    [
        (b"x" * (MAX_LINE + 1), LineFault.OVERSIZED),
        (b'127.0.0.1 - - "GET / HTTP/1.1" 200 512', LineFault.NO_MARKER),
        (b"", LineFault.NO_MARKER),
        (b"x uwt1 1795732664212899 7 200 1 9 GET", LineFault.FIELDS),  # no stamp, no uri
        (b"x uwt1 1795732664212899 7 200 1 9 GET - /", LineFault.FIELDS),  # no brackets
        (b"x uwt1 1795732664212899 7 200 1 9 GET [-/", LineFault.FIELDS),  # unclosed
        (b"x uwt1 1795732664212899 7 200 1 9 " + b"G" * 25 + b" [-] /", LineFault.FIELDS),
        (b"x uwt1 1795732664212899 -7 200 1 9 GET [-] /", LineFault.NUMBER),
        (b"x uwt1 1795732664212899 7.5 200 1 9 GET [-] /", LineFault.NUMBER),
        (b"x uwt1 %(tmicros) 7 200 1 9 GET [-] /", LineFault.NUMBER),  # an old uWSGI
        (b"x uwt1 1795732664212899 +7 200 1 9 GET [-] /", LineFault.NUMBER),
        (b"x uwt1 1795732664212899 7 2xx 1 9 GET [-] /", LineFault.NUMBER),
        (b"x uwt1 179573266421 7 200 1 9 GET [-] /", LineFault.RANGE),  # ms, not µs
        (b"x uwt1 1795732664212899 99999999999 200 1 9 GET [-] /", LineFault.RANGE),
        (b"x uwt1 1795732664212899 7 1000 1 9 GET [-] /", LineFault.RANGE),
        (b"x uwt1 1795732664212899 7 200 70000 9 GET [-] /", LineFault.RANGE),
        (b"x uwt1 1795732664212899 7 200 1 0 GET [-] /", LineFault.RANGE),
        (b"x uwt1 1795732664212899 7 200 1 99999999 GET [-] /", LineFault.RANGE),
    ],
)
def test_every_bad_line_is_a_fault_of_its_kind(line: bytes, fault: LineFault) -> None:
    assert parse_line(line) is fault


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=300), st.binary(max_size=60))
def test_no_bytes_make_the_parser_raise(before: bytes, after: bytes) -> None:
    for line in (before, before + b" uwt1 " + after, b"uwt1 " + after, before + TAIL + after):
        got = parse_line(line)
        assert isinstance(got, (RequestLine, LineFault))


def test_a_tally_counts_by_kind_and_names_the_ini_line_on_a_mismatch() -> None:
    tally = LineTally()
    for line in recorded(0)[:3]:
        tally.count(parse_line(line))
    tally.count(parse_line(b"x uwt1 1795732664212899 7 200 1 0 GET [-] /"))  # a bad line
    assert tally.mismatch() is None
    for _ in range(5):
        tally.count(parse_line(b'127.0.0.1 - - "GET / HTTP/1.1" 200 512'))
    assert tally.as_dict()["parsed"] == 3
    assert tally.as_dict()["range"] == 1 and tally.as_dict()["no_marker"] == 5
    message = tally.mismatch()
    assert message is not None and "\n" not in message
    assert "5 of 9" in message and "log-format" in message and TAIL_FORMAT in message


def test_bad_lines_that_are_not_a_format_mismatch_never_blame_the_format() -> None:
    tally = LineTally()
    for _ in range(10):
        tally.count(LineFault.RANGE)
        tally.count(LineFault.OVERSIZED)
        tally.count(LineFault.AMBIGUOUS)
    assert tally.mismatch() is None


def test_the_log_format_keeps_the_users_format_and_appends_the_tail() -> None:
    assert log_format('%(addr) "%(uri)"  ') == f'%(addr) "%(uri)" {TAIL_FORMAT}'
    assert log_format() == f"{DEFAULT_USER_FORMAT} {TAIL_FORMAT}"
    assert log_format().endswith("[%(var.HTTP_X_REQUEST_START)] %(uri)")
    # the recorded runs were made with these very lines
    assert RECORDED["runs"][0]["log-format"] == log_format()
    assert RECORDED["runs"][2]["log-format"] == TAIL_FORMAT
