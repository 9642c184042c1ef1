"""One HTTP/1.x request head in, one response out: the parsing and the bytes, no I/O."""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import parse_qs, unquote

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


def parse_head(head: bytes) -> Request | None:
    """The request line and headers; None when the request line is not HTTP."""
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split()
    if len(parts) != 3 or not parts[2].startswith("HTTP/"):
        return None
    target = parts[1]
    path, _, query = target.partition("?")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if sep:
            headers[name.strip().lower()] = value.strip()
    return Request(parts[0], unquote(path), parse_qs(query), headers, parts[2])
