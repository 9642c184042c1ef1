"""One HTTP/1.x request head in, one response out: the parsing and the bytes, no I/O.

Requests are parsed by h11 (python-hyper/h11: bytes in, events out), not by hand, so that
the request line, header names and values, Host and the message framing follow RFC 9112
as h11 enforces it. On top of h11, for an endpoint that serves GET and HEAD only:
- no request carries a body: `Transfer-Encoding`, a `Content-Length` other than 0, or any
  `Content-Length` on GET or HEAD is a 400 after which the connection closes, so body
  bytes are never read as the next request (h11 folds repeated equal lengths into one;
  refusing the header on GET and HEAD refuses a repeated `Content-Length: 0` there too);
- `Host`, `Authorization` and `X-Prometheus-Scrape-Timeout-Seconds` appear at most once:
  two are a 400, never "the last one wins";
- other repeated headers are joined with ", " (RFC 9110 5.3), names lower-cased;
- the head (request line and headers) is at most `limit` bytes, however it arrives (h11's
  `max_incomplete_event_size` bounds what is buffered; a head complete in one read is
  measured too): past it, 431.
A 400 names h11's reason without the bytes it quotes: the client's bytes are never echoed.

Answers are written here (`Response.head`), not by h11: the head is one f-string the server
sends with the body's shared slices (`wire.py`), and every header value it can carry is
checked where it is configured (`webconfig.py`), so h11's writer would add only its cost.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import parse_qs, unquote

import h11

REASONS = {
    200: "OK", 400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found",
    405: "Method Not Allowed", 431: "Request Header Fields Too Large",
    500: "Internal Server Error", 502: "Bad Gateway", 503: "Service Unavailable",
}  # fmt: skip
TEXT = "text/plain; charset=utf-8"


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    query: dict[str, list[str]] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)  # lower-case names
    version: str = "HTTP/1.1"

    @property
    def keep_alive(self) -> bool:
        """HTTP/1.1 keeps the connection unless the client says close; 1.0 closes it."""
        connection = (self.header("Connection") or "").lower()
        return self.version == "HTTP/1.1" and "close" not in connection

    def header(self, name: str) -> str | None:
        return self.headers.get(name.lower())

    def param(self, name: str) -> str | None:
        values = self.query.get(name)
        return values[0] if values else None


@dataclass(frozen=True)
class Response:
    status: int
    body: bytes = b""
    content_type: str = TEXT
    headers: tuple[tuple[str, str], ...] = ()
    tail: bytes = b""  # sent after `body`, which a scrape shares with others (exposition.py)

    @property
    def content(self) -> bytes:
        """The whole body (a copy when there is a tail)."""
        return self.body + self.tail if self.tail else self.body

    def encode(self, head_only: bool = False, extra: tuple[tuple[str, str], ...] = ()) -> bytes:
        return self.head(extra) + (b"" if head_only else self.content)

    def head(self, extra: tuple[tuple[str, str], ...] = (), keep: bool = False) -> bytes:
        """The status line and headers: the server writes the body after it, uncopied.
        `keep`: the connection stays open for the client's next request."""
        lines = [
            f"HTTP/1.1 {self.status} {REASONS.get(self.status, 'Unknown')}",
            f"Content-Type: {self.content_type}",
            f"Content-Length: {len(self.body) + len(self.tail)}",
            "Connection: keep-alive" if keep else "Connection: close",
            *(f"{k}: {v}" for k, v in (*self.headers, *extra)),
        ]
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def text(status: int, message: str, *headers: tuple[str, str]) -> Response:
    return Response(status, (message + "\n").encode(), TEXT, headers)


SINGLE = frozenset((b"host", b"authorization", b"x-prometheus-scrape-timeout-seconds"))
NO_BODY = (b"GET", b"HEAD")


class RequestParser:
    """One request from a connection's bytes: `feed` what arrives (at most `room` bytes
    at a time), `next()` until it is not None; `rest` is what followed the request head
    (a pipelined next request), for the next parser."""

    def __init__(self, limit: int, data: bytes = b"") -> None:
        self.limit = limit
        self._h11 = h11.Connection(h11.SERVER, max_incomplete_event_size=limit)
        self._fed = 0
        self._new = False  # bytes fed since h11 last needed more
        self.rest = b""
        if data:
            self.feed(data)

    @property
    def room(self) -> int:
        """Bytes to read at most before the head must be complete."""
        return max(1, self.limit + 1 - self._fed)

    def feed(self, data: bytes) -> None:
        self._fed += len(data)
        self._new = True
        self._h11.receive_data(data)

    def next(self) -> Request | Response | None:
        """The request, an answer that refuses it (the connection closes after it), or
        None: more bytes are needed."""
        if not self._new:
            return None
        self._new = False
        try:
            event = self._h11.next_event()
        except h11.RemoteProtocolError as exc:
            if exc.error_status_hint == 431:
                return text(431, "request head too large")
            return text(400, f"bad request: {_reason(exc)}")
        if not isinstance(event, h11.Request):  # NEED_DATA: the peer's close is not fed
            return None
        self.rest = self._h11.trailing_data[0]
        if self._fed - len(self.rest) > self.limit:
            return text(431, "request head too large")
        return _request(event)


def _reason(exc: h11.RemoteProtocolError) -> str:
    """h11's reason, cut before the client's bytes it quotes."""
    reason = str(exc)
    for quoted in (": b'", ': b"', ": bytearray("):
        reason = reason.split(quoted, 1)[0]
    return reason


def _request(event: h11.Request) -> Request | Response:
    headers: dict[str, str] = {}
    for raw, value in event.headers.raw_items():
        name = raw.lower()
        key = name.decode("ascii")
        if key not in headers:
            headers[key] = value.decode("latin-1")
        elif name in SINGLE:
            return text(400, f"bad request: more than one {key} header")
        else:
            headers[key] += ", " + value.decode("latin-1")
    length = headers.get("content-length")
    if (
        "transfer-encoding" in headers
        or length not in (None, "0")
        or (length is not None and event.method in NO_BODY)
    ):
        why = "a request body (Content-Length, Transfer-Encoding); this endpoint takes none"
        return text(400, f"bad request: {why}")
    path, _, query = event.target.decode("ascii").partition("?")
    version = "HTTP/" + event.http_version.decode("ascii")
    return Request(event.method.decode("ascii"), unquote(path), parse_qs(query), headers, version)
