"""A real HTTP server on loopback that answers as a Prometheus server would, or as a broken
one: each test gives the answer (status, body) to each POSTed form. The forms are kept, with
the path (`_path`), the Authorization header (`_auth`) and Accept-Encoding (`_encoding`)."""

from __future__ import annotations

import contextlib
import json
import ssl
import threading
import urllib.parse
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

Answer = Callable[[dict[str, str]], tuple[int, bytes]]


def matrix(result: list[dict[str, object]], **extra: object) -> bytes:
    doc = {"status": "success", "data": {"resultType": "matrix", "result": result}, **extra}
    return json.dumps(doc).encode()


def success(data: object) -> bytes:
    return json.dumps({"status": "success", "data": data}).encode()


@contextlib.contextmanager
def answering(
    tls: ssl.SSLContext | None = None,
) -> Iterator[Callable[[Answer], tuple[str, list[dict[str, str]]]]]:
    """`start(answer)` -> (base URL, the forms seen); every server stops when the block ends.
    `tls`: a server context, for HTTPS."""
    servers: list[ThreadingHTTPServer] = []

    def start(answer: Answer) -> tuple[str, list[dict[str, str]]]:
        seen: list[dict[str, str]] = []

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                n = int(self.headers.get("Content-Length", 0))
                form = dict(urllib.parse.parse_qsl(self.rfile.read(n).decode()))
                form["_path"] = self.path
                form["_auth"] = self.headers.get("Authorization", "")
                form["_encoding"] = self.headers.get("Accept-Encoding", "")
                seen.append(form)
                status, body = answer(form)
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                with contextlib.suppress(OSError):  # the client gave up (a timeout)
                    self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        srv.daemon_threads = True
        if tls is not None:
            srv.socket = tls.wrap_socket(srv.socket, server_side=True)
        servers.append(srv)
        threading.Thread(target=srv.serve_forever, args=(0.05,), daemon=True).start()
        scheme = "https" if tls is not None else "http"
        return f"{scheme}://127.0.0.1:{srv.server_address[1]}", seen

    try:
        yield start
    finally:
        for srv in servers:
            srv.shutdown()
            srv.server_close()
