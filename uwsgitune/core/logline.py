"""One request log datagram from uWSGI, parsed: bytes in, a `RequestLine` or a `LineFault` out.

**The line.** `log-format` is global in uWSGI (it changes every request logger the user
has), so uwsgitune does not replace it: it appends its own fields after a marker. The ini
line is `log_format(user_format)`:

    log-format = <the user's format> uwt1 %(tmicros) %(micros) %(status) %(wid) %(pid)
                 %(method) [%(var.HTTP_X_REQUEST_START)] %(uri)      (one line)

and uWSGI 2.0.31 sends, for example (tests/data/logline/uwsgi-2.0.31.json):

    127.0.0.1 "GET /io/5?t=s HTTP/1.1" 200 uwt1 1795732664212899 5233 200 1 2476 GET [-] /io/5?t=s

- Everything up to the LAST ` uwt1 ` is the user's part: it is discarded at once, never
  stored, logged or shown (it may hold addresses, cookies, user agents). The marker may also
  open the line (a format of uwsgitune's fields alone).
- Then: the request's start (µs since the epoch), its service time (µs, from when the worker
  received it), the status, the worker id, the worker's pid, the method, the proxy's stamp in
  brackets (uWSGI renders an absent variable as `-`), and the uri, which is the rest of the
  line (it may hold spaces through a lenient proxy, and any byte).
- The stamp ends at the first `] /` (a uri starts with `/`), else at the first `] `; a
  client-sent stamp holding those characters can only spoil its own line.
- The query string (from the first `?`) is dropped here, before anything else sees the uri:
  tokens live there. The path is decoded as UTF-8, odd bytes replaced.

**Never raise, never be fooled.** A line that does not parse is a `LineFault`, counted by
kind in a `LineTally`; parsing never raises. Numbers must be plain digits within sane ranges
(`RANGES`). A client controls the uri, the user agent and (through some proxies) spaces in
the request line, so it can put a whole fake tail ` uwt1 <fields> [..] /x` inside its own
request's line: in the user's part (harmless: the last marker wins) or, through a proxy that
lets spaces into the uri, after the real tail, where the last marker would be the fake. A
line with more than one marker whose fields all parse is therefore `AMBIGUOUS` and dropped:
a client can only hide its own request, never invent a latency.

**A format that does not match.** Lines without the marker (`NO_MARKER`), or with the marker
and the wrong fields (`FIELDS`, `NUMBER`), mean the instance's `log-format` is not the one
uwsgitune needs (another format, or an older tail): `LineTally.mismatch()` turns the counts
into the one line that names the ini line to fix, or None while the lines are good.

**Bounds.** A line longer than `MAX_LINE` bytes is `OVERSIZED` and not parsed (uWSGI's own
log buffer is 8 KiB by default). A receiver that caps its reads finds a longer datagram cut
(`MSG_TRUNC`): it counts it with `tally.count(LineFault.OVERSIZED)` and drops it.

**A batch at once** (`parse_batch`, what the recorder runs on each drain of the socket: the
per-line path costs ~2.5 µs a line, bench/results/latency_cost.md). The lines are joined
into one buffer, each after a space (so that a line that opens with the tail shows a marker
like the others) and before a newline, and ONE compiled regex (`FAST_TAIL`) runs over it
with `findall`: no Python loop runs per line, and no line is copied but by the join. The
regex is stricter than `parse_raw` (plain numbers in the ranges that `RANGES` allows, with
room to spare; no `]` in the stamp; no CR in a uri without a query; nginx's `t=${msec}`
split out), and no part of it matches a newline, so a match lies within one line and ends
at its end. The batch takes this path only when no line holds a newline (one `memchr` over the
lines joined as they are), the buffer holds `uwt1 ` once a line (counted), and
a match for every line; since each match holds one `uwt1 `, each line then holds one match,
at its only marker (its first is its last, as `parse_raw` requires), running to the line's
end. Otherwise `parse_batch` answers None and the caller parses line by line, faults
counted as ever. A batch that holds a crafted or foreign line costs what it always did; no
line is read differently.

**In C.** core/_fastlog.c `scan` reads a batch as `parse_batch` does (the same lines taken,
the same rows; tests compare them on crafted lines and hypothesis's), and its `record` is
what the recorder runs where the extension is built (core/latency.py "A drain in C").

**The public API:** `log_format(user_format)` (the ini value, for doctor), `TAIL_FORMAT`,
`DEFAULT_USER_FORMAT`, `MARKER`; `parse_line(bytes) -> RequestLine | LineFault` (decoded;
its `wid` and `pid` can be checked against the stats' workers); `parse_raw(bytes)`, the
same undecoded, which `core/latency.py` reads; `LineTally` (counts by kind, `mismatch()`,
`as_dict()` for machine outputs).
"""

from __future__ import annotations

import enum
import re
from typing import NamedTuple

MARKER = b" uwt1 "
OPENING = MARKER[1:]  # the tail's first word and its space: "uwt1 "
FIELDS_FORMAT = (
    "%(tmicros) %(micros) %(status) %(wid) %(pid) %(method) [%(var.HTTP_X_REQUEST_START)] %(uri)"
)
TAIL_FORMAT = OPENING.decode() + FIELDS_FORMAT
# The sampled tail (uwsgitune/uwsgi_sample.py sets `uwk` and `uwt` on the requests it
# samples): `uwk20 uwt1 <fields>` on those, `uwk- uwt- <fields>` on a line uWSGI logs on its
# own (log-5xx, log-slow ...), which is `UNSAMPLED`.
SAMPLED_TAIL_FORMAT = "uwk%(uwk) uwt%(uwt) " + FIELDS_FORMAT
UNSAMPLED_MARKER = b" uwt- "
SAMPLE_TOKEN = b"uwk"
MAX_SAMPLE = 1_000_000
# uWSGI's own default request line, spelled as a log-format: what a user who never set
# `log-format` keeps seeing in their log, with uwsgitune's tail after it.
DEFAULT_USER_FORMAT = (
    "[pid: %(pid)|app: -|req: -/-] %(addr) (%(user)) {%(vars) vars in %(pktsize) bytes} "
    "[%(ctime)] %(method) %(uri) => generated %(rsize) bytes in %(msecs) msecs "
    "(%(proto) %(status)) %(headers) headers in %(hsize) bytes "
    "(%(switches) switches on core %(core))"
)
MAX_LINE = 16384
MAX_METHOD = 24
# Plausible ranges (inclusive): a start between 2001 and 5138, a service time under a day,
# a status of three digits, a worker id and a pid that can exist.
RANGES = {
    "tmicros": (10**15, 10**17 - 1),
    "micros": (0, 86_400 * 10**6),
    "status": (0, 999),
    "wid": (0, 65_535),
    "pid": (1, 2**22),
}
_T_LO, _T_HI = RANGES["tmicros"]
_MICROS_HI = RANGES["micros"][1]
_WID_HI = RANGES["wid"][1]
_PID_HI = RANGES["pid"][1]


class LineFault(enum.Enum):
    """Why a line was not used; each is counted, none is raised."""

    OVERSIZED = "longer than the size cap"
    NO_MARKER = "no ` uwt1 ` marker (the log-format lacks uwsgitune's fields)"
    FIELDS = "the fields after the marker are not the expected ones"
    NUMBER = "a number field is not a plain number"
    RANGE = "a number is out of range"
    AMBIGUOUS = "more than one complete uwsgitune tail (a crafted uri or header)"
    UNSAMPLED = "logged by uWSGI outside the sample (log-5xx, log-slow ...): left out"


# The faults that mean "the instance's log-format is not uwsgitune's", not "a bad line".
FORMAT_FAULTS = (LineFault.NO_MARKER, LineFault.FIELDS, LineFault.NUMBER)


class RequestLine(NamedTuple):
    """One request, as uWSGI logged it; `path` is the uri without its query."""

    start_us: int  # %(tmicros): µs since the epoch
    service_us: int  # %(micros)
    status: int
    wid: int
    pid: int
    method: str
    stamp: str | None  # the X-Request-Start text as sent, None when absent
    path: str


def log_format(user_format: str | None = None, *, sampled: bool = False) -> str:
    """The `log-format` value: the user's format (or uWSGI's default line), then the tail
    (the sampled tail with `sampled`: uwsgitune/uwsgi_sample.py sets its variables)."""
    user = (user_format or DEFAULT_USER_FORMAT).rstrip()
    tail = SAMPLED_TAIL_FORMAT if sampled else TAIL_FORMAT
    return f"{user} {tail}" if user else tail


def sample_every(data: bytes) -> int | None:
    """The K of a sampled line (`uwk<K>` just before its marker), 1 for a line of the plain
    tail, None for a line `parse_raw` does not take. The token read is the one before the
    marker `parse_raw` accepted, which the user's part (where a client's text lies) cannot
    reach."""
    if type(parse_raw(data)) is not tuple:
        return None
    at = data.rfind(MARKER)
    if at < 0:
        return 1  # the tail opens the line: no token before it
    word = data[data.rfind(b" ", 0, at) + 1 : at]
    if word.startswith(SAMPLE_TOKEN):
        k = word[len(SAMPLE_TOKEN) :]
        if k.isdigit() and len(k) <= 7 and 1 <= int(k) <= MAX_SAMPLE:
            return int(k)
    return 1


# The fields of a line as bytes and ints, before anything is decoded: (start_us, service_us,
# status, wid, pid, method, stamp or None, path without the query). The recorder reads these
# (decoding only what it keeps); `parse_line` wraps them in a `RequestLine`.
RawLine = tuple[int, int, int, int, int, bytes, bytes | None, bytes]


def parse_line(data: bytes) -> RequestLine | LineFault:
    """The request in one datagram, or why there is none (never raises)."""
    got = parse_raw(data)
    if isinstance(got, LineFault):
        return got
    t, m, s, w, p, method, stamp, path = got
    return RequestLine(
        t,
        m,
        s,
        w,
        p,
        method.decode("ascii", "replace"),
        None if stamp is None else stamp.decode("ascii", "replace"),
        path.decode("utf-8", "replace"),
    )


def parse_raw(data: bytes) -> RawLine | LineFault:
    """`parse_line` without the decoding: the fields as bytes and ints (never raises)."""
    if len(data) > MAX_LINE:
        return LineFault.OVERSIZED
    if UNSAMPLED_MARKER in data or data.startswith(UNSAMPLED_MARKER[1:]):
        return LineFault.UNSAMPLED
    at = data.rfind(MARKER)
    if at >= 0:
        start = at + len(MARKER)
    elif data.startswith(OPENING):
        start = len(OPENING)
    else:
        return LineFault.NO_MARKER
    got = _tail(data, start)
    earlier = at > 0 and (data.rfind(MARKER, 0, at) >= 0 or data.startswith(OPENING))
    if earlier and type(got) is tuple and _earlier_tail(data, at):
        return LineFault.AMBIGUOUS
    return got


def _earlier_tail(data: bytes, end: int) -> bool:
    """Whether a marker before `end` also starts a complete, valid tail."""
    while True:
        at = data.rfind(MARKER, 0, end)
        if at < 0:
            return data.startswith(OPENING) and type(_tail(data, len(OPENING))) is tuple
        if type(_tail(data, at + len(MARKER))) is tuple:
            return True
        end = at


def _tail(data: bytes, start: int) -> RawLine | LineFault:
    parts = data[start:].split(b" ", 6)
    if len(parts) != 7:
        return LineFault.FIELDS
    tm, mi, st, wi, pi, method, rest = parts
    if not (tm.isdigit() and mi.isdigit() and st.isdigit() and wi.isdigit() and pi.isdigit()):
        return LineFault.NUMBER
    if rest[:1] != b"[" or not method or len(method) > MAX_METHOD:
        return LineFault.FIELDS
    close = rest.find(b"] /")  # a uri starts with `/`: a stamp holding `] ` cannot move it
    if close < 0:
        close = rest.find(b"] ")
        if close < 0:
            return LineFault.FIELDS
    t, m, s, w, p = int(tm), int(mi), int(st), int(wi), int(pi)
    if not (_T_LO <= t <= _T_HI and m <= _MICROS_HI and s <= 999 and w <= _WID_HI):
        return LineFault.RANGE
    if not 1 <= p <= _PID_HI:
        return LineFault.RANGE
    stamp: bytes | None = rest[1:close]
    if stamp == b"-" or not stamp:
        stamp = None
    uri = rest[close + 2 :]
    q = uri.find(b"?")
    uri = uri[:q] if q >= 0 else uri.rstrip(b"\r\n")
    return t, m, s, w, p, method, stamp, uri


# The tail of a line that needs no check beyond the match (see "A batch at once"): the start
# (16-17 digits, no leading 0: within RANGES), the service time (at most 10 digits: under
# 2.8 hours, within RANGES), the status (3 digits), the worker id (at most 4 digits), the
# pid (1 to 2**22, spelled out), the method, the stamp (nginx's t=<s>.<ms> in two groups,
# else any text without `]` or a newline), the path without the query. Each match ends at
# its line's newline.
FAST_TAIL = re.compile(
    rb" uwt1 ([1-9][0-9]{15,16}) ([0-9]{1,10}) ([0-9]{3}) ([0-9]{1,4}) "
    rb"(?:[1-9][0-9]{0,5}|[1-3][0-9]{6}|40[0-9]{5}|41[0-8][0-9]{4}|419[0-3][0-9]{3}"
    rb"|4194[0-2][0-9]{2}|419430[0-4]) "
    rb"[^ \n]{1,24} \[(?:t=([1-9][0-9]{9})\.([0-9]{3})|([^\]\n]*))\] "
    rb"(/[^?\r\n]*)(?:\?[^\n]*)?\n"
)
# The fields `parse_batch` answers per line, all bytes: (start, service, status, wid,
# nginx seconds or b"", nginx milliseconds or b"", another stamp or b"", path).
FastLine = tuple[bytes, bytes, bytes, bytes, bytes, bytes, bytes, bytes]


def parse_batch(lines: list[bytes]) -> list[FastLine] | None:
    """Every line's fields from one regex run over the whole batch, or None when any line
    needs the per-line parser (`parse_raw`): see "A batch at once"."""
    n = len(lines)
    if not n or max(map(len, lines)) > MAX_LINE:
        return None
    # No newline inside a line: one `memchr` over the lines as they are, joined (a count
    # of the newlines in the buffer below costs about four times as much, measured).
    if b"\n" in b"".join(lines):
        return None
    # The lines joined, each with a space before it (so that a line that opens with the
    # tail shows a marker like the others) and a newline after it: "\n L1\n L2 ... \n Ln\n ".
    joined = b"\n ".join([b"", *lines, b""])
    # One `uwt1 ` in each line (checked below: each line holds a match, which holds one),
    # so that its marker is its first and its last.
    if joined.count(OPENING) != n or UNSAMPLED_MARKER in joined:
        return None
    rows: list[FastLine] = FAST_TAIL.findall(joined)
    return rows if len(rows) == n else None


class LineTally:
    """Lines counted: parsed, and not parsed by `LineFault`; the mismatch diagnosis."""

    def __init__(self) -> None:
        self.parsed = 0
        self.faults: dict[LineFault, int] = dict.fromkeys(LineFault, 0)

    def count(self, got: RequestLine | LineFault) -> None:
        if isinstance(got, LineFault):
            self.faults[got] += 1
        else:
            self.parsed += 1

    @property
    def lines(self) -> int:
        return self.parsed + sum(self.faults.values())

    @property
    def format_faults(self) -> int:
        return sum(self.faults[f] for f in FORMAT_FAULTS)

    def mismatch(self, share: float = 0.5) -> str | None:
        """The one-line diagnosis when at least `share` of the lines do not match the format.

        Counts are since the tally began: give each period a new tally (or compare two
        snapshots) to judge what the instance sends now.
        """
        bad = self.format_faults
        if bad == 0 or bad < share * self.lines:
            return None
        worst = max(FORMAT_FAULTS, key=lambda f: self.faults[f])
        return (
            f"{bad} of {self.lines} request log lines do not carry uwsgitune's fields "
            f"({worst.value}): set `log-format = <your format> {TAIL_FORMAT}` in the ini "
            "(`uwsgitune doctor --latency ADDR` prints the exact line)"
        )

    def as_dict(self) -> dict[str, int]:
        """Raw counts for machine outputs: `parsed` and one key per fault kind."""
        return {"parsed": self.parsed} | {f.name.lower(): n for f, n in self.faults.items()}
