"""The addresses a user types, parsed without touching the network: stats addresses in every
form, and the metrics endpoint's `HOST:PORT` (`split_listen`).

Stats address forms accepted (the first four are uWSGI's own, the last two uwsgi_exporter's):
- `/run/uwsgi/stats.sock` or `./stats.sock`: a unix socket path;
- `@name`: a Linux abstract unix socket;
- `host:port`, `[::1]:port`: the raw stats socket over TCP (JSON, not HTTP);
- `http://host:port[/path]`: a `--stats-http` server;
- `unix:///path`, `tcp://host:port`.

Where the metrics endpoint listens, `HOST:PORT` or `[IPV6]:PORT`: a host is required
(127.0.0.1 is local only, 0.0.0.0 or :: every interface); `:9117` is refused rather than
guessed.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Literal
from urllib.parse import urlsplit

from uwsgitune.errors import UwsgituneError

Kind = Literal["unix", "abstract", "tcp", "http"]


class AddressError(UwsgituneError, ValueError):
    """An address that cannot be parsed; the message is one line for the user."""

    code = 2


@dataclass(frozen=True)
class StatsAddress:
    kind: Kind
    path: str = ""
    host: str = ""
    port: int = 0
    http_path: str = "/"
    text: str = ""

    def __str__(self) -> str:
        return self.text or self.uri

    @property
    def uri(self) -> str:
        """The address as uwsgi_exporter spells it (used as the `stats_uri` label)."""
        if self.kind == "unix":
            return f"unix://{self.path}"
        if self.kind == "abstract":
            return f"unix://@{self.path}"
        if self.kind == "tcp":
            return f"tcp://{_join(self.host, self.port)}"
        return f"http://{_join(self.host, self.port)}{self.http_path}"


def _join(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def split_host_port(text: str) -> tuple[str, str, str | None]:
    """`HOST:PORT` or `[IPV6]:PORT` -> (host, port text, problem). The problem is None,
    "unclosed" (a '[' without ']') or "no-colon"; the caller words the error."""
    if text.startswith("["):
        host, sep, rest = text[1:].partition("]")
        port_text = rest[1:] if rest.startswith(":") else ""
        return host, port_text, None if sep else "unclosed"
    host, sep, port_text = text.rpartition(":")
    return host, port_text, None if sep else "no-colon"


def split_listen(text: str) -> tuple[str, int]:
    """Parse the metrics endpoint's `HOST:PORT` or `[IPV6]:PORT`. Raises ValueError with a
    one-line hint."""
    host, port_text, problem = split_host_port(text.strip())
    if problem == "unclosed":
        raise ValueError(f"{text!r}: unclosed '['; write [::1]:9117")
    if problem == "no-colon":
        raise ValueError(f"{text!r}: write HOST:PORT, e.g. 127.0.0.1:9117")
    if not host:
        raise ValueError(
            f"{text!r}: give a host: 127.0.0.1:PORT (local) or 0.0.0.0:PORT (every interface)"
        )
    if not port_text.isdigit() or not 0 <= int(port_text) < 65536:
        raise ValueError(f"{text!r}: the port must be a number from 0 to 65535")
    return host, int(port_text)


def _host_port(text: str, original: str) -> tuple[str, int]:
    host, port_text, problem = split_host_port(text)
    if problem == "unclosed":
        raise AddressError(f"{original}: unclosed '[' in IPv6 address; write [::1]:PORT")
    if not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise AddressError(f"{original}: no valid port; write HOST:PORT, e.g. 127.0.0.1:9191")
    return host or "127.0.0.1", int(port_text)


def _unix_uri(raw: str, expand: bool) -> StatsAddress:
    path = raw[len("unix://") :]
    if not path:
        raise AddressError(f"{raw}: no path after unix://")
    if path.startswith("@"):
        if len(path) == 1:
            raise AddressError(f"{raw}: no abstract socket name after '@'")
        return StatsAddress("abstract", path=path[1:], text=raw)
    return StatsAddress("unix", path=os.path.expanduser(path) if expand else path, text=raw)


def _http_uri(raw: str) -> StatsAddress:
    if raw.startswith("https://"):
        raise AddressError(f"{raw}: uWSGI's stats-http does not speak TLS; use http://")
    parts = urlsplit(raw)
    try:
        http_port = parts.port
    except ValueError:  # not a number, or out of range: urlsplit raises late
        http_port = -1
    if http_port is None:
        raise AddressError(f"{raw}: no port; write http://HOST:PORT")
    if not 0 < http_port < 65536:
        raise AddressError(f"{raw}: no valid port; write http://HOST:PORT, e.g. :9191")
    http_host = parts.hostname or "127.0.0.1"
    return StatsAddress(
        "http", host=http_host, port=http_port, http_path=parts.path or "/", text=raw
    )


def parse_address(text: str, *, expand: bool = True) -> StatsAddress:
    """Parse one user-typed address. Raises `AddressError` with a one-line hint.
    `expand=False` keeps a leading `~` as written: for addresses a client sends (/probe),
    where `~user` would be an NSS lookup (LDAP, NIS: the network) on the event loop."""
    raw = text.strip()
    if not raw:
        raise AddressError("empty stats address; give a socket path, @abstract or HOST:PORT")
    if raw.startswith("unix://"):
        return _unix_uri(raw, expand)
    if raw.startswith("tcp://"):
        host, port = _host_port(raw[len("tcp://") :].rstrip("/"), raw)
        return StatsAddress("tcp", host=host, port=port, text=raw)
    if raw.startswith(("http://", "https://")):
        return _http_uri(raw)
    if raw.startswith("@"):
        if len(raw) == 1:
            raise AddressError("@: no abstract socket name after '@'")
        return StatsAddress("abstract", path=raw[1:], text=raw)
    if "://" in raw:
        scheme = raw.split("://", 1)[0]
        raise AddressError(f"{raw}: unknown scheme {scheme!r}; use unix://, tcp:// or http://")
    if raw.startswith(("/", ".", "~")) or ":" not in raw:
        # `~` is the user's shell shorthand: `~/` reads $HOME, but `~user/` asks NSS.
        path = os.path.expanduser(raw) if expand else raw
        return StatsAddress("unix", path=path, text=raw)
    host, port = _host_port(raw, raw)
    return StatsAddress("tcp", host=host, port=port, text=raw)
