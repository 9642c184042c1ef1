"""The demo app plus a leaking route, for the recorded rule scenarios.

- `/leak/N`: keeps N KiB per request for the life of the worker (a leak).
Every other route is the demo app's (`/cpu/N`, `/io/N`, `/error`, ...).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from uwsgitune.demo.app import application as demo

_kept: list[bytes] = []


def application(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
    parts = environ.get("PATH_INFO", "/").strip("/").split("/")
    if parts[0] == "leak":
        size = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 1024
        _kept.append(b"x" * (size * 1024))  # bytes that are written, so RSS grows
        start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", "3")])
        return [b"ok\n"]
    return demo(environ, start_response)
