"""What the scrape endpoint's HTTP layer costs per request: reading and parsing the request,
writing the answer's head and its body, for a body rendered beforehand (as the daemon serves
a poll's render), so that only the server's own work is measured.

    .venv/bin/python bench/http_cost.py                  # 3000 requests each way
    .venv/bin/python bench/http_cost.py --requests 10000

To compare a commit, run this file from a checkout of it (`git archive C | tar -x -C DIR`,
then copy this file into DIR/bench/): it imports the package next to it.

The server (`MetricsServer`) runs in a child process. Its CPU time (user + system, from
/proc) per request is the steadier number on a shared machine; the client's wall time per
request is printed too. The client sends Prometheus's own request head (Accept, gzip, the
scrape timeout header, basic auth) over one kept-alive connection, then over a new
connection per request. The numbers go in bench/results/exporter.md, not in tests.
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

HEAD = (
    "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUser-Agent: Prometheus/2.42.0\r\n"
    "Accept: application/openmetrics-text;version=1.0.0,application/openmetrics-text;"
    "version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1\r\n"
    "Accept-Encoding: gzip\r\nX-Prometheus-Scrape-Timeout-Seconds: 10\r\n"
    "Authorization: Basic cHJvbWV0aGV1czpzM2NyZXQ=\r\n{close}\r\n"
)


def child() -> None:
    """Serve the 64-worker fixture's exposition, gzipped once, until stdin closes."""
    from bench.exporter_bench import fixture_snapshot
    from uwsgitune.exporter.exposition import render
    from uwsgitune.exporter.metrics import registry_for
    from uwsgitune.exporter.server import MetricsServer

    snap = fixture_snapshot("64-workers.json")
    registry = registry_for(lambda: [snap])
    body = gzip.compress(render(registry), compresslevel=1, mtime=0)

    async def serve() -> None:
        server = MetricsServer(registry, render=lambda: (body, b""))
        await server.start("127.0.0.1:0")
        print(server.address[1], len(body), flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
        await server.close()

    asyncio.run(serve())


def read_answer(sock: socket.socket, buffered: bytearray) -> bytes:
    while b"\r\n\r\n" not in buffered:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("closed before an answer")
        buffered += chunk
    end = buffered.index(b"\r\n\r\n") + 4
    head = bytes(buffered[:end])
    length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
    while len(buffered) < end + length:
        buffered += sock.recv(65536)
    del buffered[: end + length]
    return head


def kept_alive(port: int, n: int) -> list[float]:
    request = HEAD.format(port=port, close="").encode()
    out = []
    with socket.create_connection(("127.0.0.1", port)) as sock:
        buffered = bytearray()
        for _ in range(n):
            t0 = time.perf_counter()
            sock.sendall(request)
            head = read_answer(sock, buffered)
            out.append(time.perf_counter() - t0)
            assert head.startswith(b"HTTP/1.1 200 "), head
    return out


def one_per_connection(port: int, n: int) -> list[float]:
    request = HEAD.format(port=port, close="Connection: close\r\n").encode()
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        with socket.create_connection(("127.0.0.1", port)) as sock:
            sock.sendall(request)
            head = read_answer(sock, bytearray())
        out.append(time.perf_counter() - t0)
        assert head.startswith(b"HTTP/1.1 200 "), head
    return out


def cpu(p: psutil.Process) -> float:
    times = p.cpu_times()
    return times.user + times.system


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child()
    argv = [sys.executable, __file__, "--child"]
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        port, size = (int(x) for x in proc.stdout.readline().split())
        server = psutil.Process(proc.pid)
        print(f"server at {ROOT}: a {size}-byte body, {args.requests} requests each way")
        for label, run in (("kept alive", kept_alive), ("one per connection", one_per_connection)):
            run(port, 200)  # warm up
            before = cpu(server)
            walls = sorted(run(port, args.requests))
            spent = cpu(server) - before
            median, p99 = statistics.median(walls), walls[int(len(walls) * 0.99)]
            print(
                f"{label}: server CPU {spent / args.requests * 1e6:.0f} us/request; "
                f"client wall median {median * 1e6:.0f} us, p99 {p99 * 1e6:.0f} us"
            )
    finally:
        if proc.stdin is not None:
            proc.stdin.close()
        proc.wait(10)


if __name__ == "__main__":
    main()
