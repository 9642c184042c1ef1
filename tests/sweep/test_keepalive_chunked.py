"""The keep-alive load client against a real uWSGI that answers chunked: uWSGI's HTTP router
with `--http-keepalive --http-auto-chunked` keeps the connection and frames an answer that
has no Content-Length (an app that streams) with chunked transfer-coding."""

from __future__ import annotations

import asyncio
import socket
import time
from pathlib import Path

import pytest

from tests.uwsgi_harness import uwsgi_instance
from uwsgitune.keepalive import KeepAliveConn
from uwsgitune.launch import free_port
from uwsgitune.loadgen import LoadResult, LoadRun

pytestmark = pytest.mark.uwsgi

STREAMING_APP = """
def application(environ, start_response):
    start_response("200 OK", [("Content-Type", "text/plain")])
    return iter([b"no ", b"length, ", b"so chunked\\n"])  # no Content-Length
"""
REQUESTS, CLIENTS = 24, 2


class Counted(LoadRun):
    """A LoadRun that keeps its clients' connections, to count how often each opened."""

    conns: list[KeepAliveConn]

    def _conn(self) -> KeepAliveConn | None:
        conn = super()._conn()
        assert conn is not None  # keepalive
        self.conns.append(conn)
        return conn


def _head(port: int) -> bytes:
    """The answer's head as it comes on the wire (the premise: chunked, kept alive)."""
    deadline = time.monotonic() + 10
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
                s.sendall(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n")
                data = b""
                while b"\r\n\r\n" not in data:
                    data += s.recv(4096)
                return data.split(b"\r\n\r\n", 1)[0]
        except OSError:  # the router binds after the workers are up
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def test_keepalive_reads_chunked_answers_and_keeps_the_connection(tmp_path: Path) -> None:
    """Before: an answer without Content-Length was read to EOF, which a kept connection
    never sends; each request then waited for its timeout or for the server to give up on
    the connection, and opened a new one."""
    app = tmp_path / "streaming.py"
    app.write_text(STREAMING_APP)
    port = free_port()
    with uwsgi_instance(
        wsgi_file=str(app),
        http_socket=None,
        http=f"127.0.0.1:{port}",
        http_keepalive=1,  # a number: "true" would read as 0, keep-alive off
        http_auto_chunked=True,
        processes=2,
    ):
        head = _head(port).lower()
        assert b"transfer-encoding: chunked" in head and b"content-length" not in head
        run = Counted(
            f"http://127.0.0.1:{port}/",
            duration=60,
            max_requests=REQUESTS,
            timeout=5,
            keepalive=True,
        )
        run.conns = []
        result: LoadResult = asyncio.run(run.closed_loop(CLIENTS))
    assert (result.ok, result.errors) == (REQUESTS, 0), result.error_kinds
    assert result.statuses == {200: REQUESTS}
    assert [c.connects for c in run.conns] == [1] * CLIENTS  # one connection per client
