"""`HOST:PORT` for the metrics endpoint. A host is required: 127.0.0.1 is local only,
0.0.0.0 (or ::) every interface. `:9117` is refused rather than guessed."""

from __future__ import annotations

from uwsgitune.core.address import split_host_port


def split_listen(text: str) -> tuple[str, int]:
    """Parse `HOST:PORT` or `[IPV6]:PORT`. Raises ValueError with a one-line hint."""
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
