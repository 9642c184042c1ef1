"""A small WSGI app with CPU-bound, IO-bound, static and failing routes, for the demo and tests.

Routes:
- `/` or `/hello`: a tiny answer;
- `/cpu/N`: about N ms of pure-Python CPU work (holds the GIL);
- `/io/N` or `/sleep/N`: waits N ms (a database or upstream call);
- `/mixed/C/I`: C ms of CPU, then I ms of waiting;
- `/error`: raises (counted by uWSGI as an exception);
- `/big/N`: N KiB of body.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any

StartResponse = Callable[..., Any]


def burn(ms: float) -> int:
    end = time.thread_time() + ms / 1000.0  # this thread's CPU: threads share a process
    n = 0
    while time.thread_time() < end:
        for i in range(200):
            n += i * i
    return n


def _num(parts: list[str], i: int, default: float) -> float:
    try:
        return float(parts[i])
    except (IndexError, ValueError):
        return default


def application(environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
    parts = environ.get("PATH_INFO", "/").strip("/").split("/")
    route = parts[0]
    body = b"ok\n"
    if route == "cpu":
        burn(_num(parts, 1, 10))
    elif route in ("io", "sleep"):
        time.sleep(_num(parts, 1, 100) / 1000.0)
    elif route == "mixed":
        burn(_num(parts, 1, 5))
        time.sleep(_num(parts, 2, 20) / 1000.0)
    elif route == "error":
        raise RuntimeError("demo error route")
    elif route == "big":
        body = b"x" * int(_num(parts, 1, 64) * 1024)
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
    return [body]
