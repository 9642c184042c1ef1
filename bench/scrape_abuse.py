"""The scrape endpoint under abuse, with a 1,000-worker exposition (issue 14, point 7).

    .venv/bin/python bench/scrape_abuse.py [--clients 50] [--seconds 40]
    PYTHONPATH=/path/to/an/older/checkout .venv/bin/python bench/scrape_abuse.py   # before

The server runs in a child process (the 64-worker fixture tests/data/stats/64-workers.json
scaled to 1,000 workers: ~1.7 MB of exposition); this process opens slow readers against it
(a 4 KiB receive window, a request, then nothing read), from several loopback addresses,
either all at once ("burst": they share renders) or one every 0.25 s ("staggered"), and
meanwhile scrapes normally once a second. The child publishes a new state every second, as
polls do: a checkout that renders once per poll shares one body among a poll's scrapes.
Printed: the child's RSS before and at its peak, how many slow readers were cut and when,
the normal scrapes' status and time, and a scrape's time behind 64 idle sockets.
"""

from __future__ import annotations

import argparse
import dataclasses
import http.client
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
if not os.environ.get("PYTHONPATH"):  # else: the checkout it names (to compare)
    sys.path.insert(0, str(ROOT))
GET = b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"


def snapshot(workers: int) -> object:
    from tests.conftest import stats_fixture
    from uwsgitune.core.derive import Tracker
    from uwsgitune.core.model import parse_stats
    from uwsgitune.core.samples import Poll
    from uwsgitune.pipeline import InstanceState

    doc = json.loads(stats_fixture("64-workers.json"))
    base = doc["workers"]
    doc["workers"] = [
        {**base[i % len(base)], "id": i + 1, "pid": 100_000 + i} for i in range(workers)
    ]
    raw = json.dumps(doc).encode()
    tracker, frame = Tracker("unix:///x"), None
    for i in range(2):
        frame = tracker.update(Poll("unix:///x", 1000.0 + i, 10.0 + i, doc=parse_stats(raw)))
    return InstanceState("unix:///x", "app", "observe", frame, tracker.prev)


def serve(workers: int) -> None:
    import asyncio

    from uwsgitune.exporter.collector import registry_for
    from uwsgitune.exporter.http import MetricsServer

    snap = snapshot(workers)
    current = [snap]

    async def main() -> None:
        server = MetricsServer(registry_for(lambda: current))  # type: ignore[arg-type]
        try:  # as the daemon serves it: rendered once per poll (a checkout that has it)
            from uwsgitune.exporter.collector import polled_registry
            from uwsgitune.exporter.exposition import PollExposition

            exposition = PollExposition(lambda: current, polled_registry())  # type: ignore[arg-type]
            server._render = lambda: exposition.encoded(False)
        except ImportError:
            pass
        await server.start("127.0.0.1:0")
        print(server.address[1], flush=True)
        while True:  # a poll a second: each publishes a new state, as the pipeline does
            await asyncio.sleep(1.0)
            current[0] = dataclasses.replace(current[0])  # type: ignore[type-var]

    asyncio.run(main())


def scrape(port: int) -> tuple[int | str, float, int]:
    t0 = time.monotonic()
    try:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        conn.request("GET", "/metrics")
        resp = conn.getresponse()
        size = len(resp.read())
        conn.close()
        return resp.status, time.monotonic() - t0, size
    except OSError as exc:
        return type(exc).__name__, time.monotonic() - t0, 0


def slow_reader(port: int, i: int) -> socket.socket:
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.bind((f"127.0.0.{2 + i // 8}", 0))  # 8 per address: the per-peer cap
    sock.connect(("127.0.0.1", port))
    sock.sendall(GET)
    return sock


def established(sock: socket.socket) -> bool:
    return sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 1)[0] == 1


def run(port: int, proc: psutil.Process, clients: int, stagger: float, seconds: float) -> None:
    scrape(port)
    base = proc.memory_info().rss
    peak, readers, scrapes, cut_at = base, [], [], {}
    t0 = time.monotonic()
    next_scrape = t0
    while (now := time.monotonic()) - t0 < seconds:
        if len(readers) < clients and (stagger == 0 or now - t0 >= len(readers) * stagger):
            readers += [slow_reader(port, len(readers)) for _ in range(1 if stagger else clients)]
        if now >= next_scrape:
            scrapes.append(scrape(port))
            next_scrape += 1.0
        for i, sock in enumerate(readers):
            if i not in cut_at and not established(sock):
                cut_at[i] = time.monotonic() - t0
        peak = max(peak, proc.memory_info().rss)
        time.sleep(0.02)
    mode = f"staggered every {stagger:g} s" if stagger else "burst"
    ok = [s for s in scrapes if s[0] == 200]
    print(f"{clients} slow readers, {mode}: RSS {base / 2**20:.1f} MiB before, peak "
          f"{peak / 2**20:.1f} MiB (+{(peak - base) / 2**20:.1f}); cut {len(cut_at)}/{clients}"
          + (f", the last at {max(cut_at.values()):.1f} s" if cut_at else "")
          + f"; normal scrapes {len(ok)}/{len(scrapes)} OK, worst "
          f"{max(s[1] for s in scrapes):.2f} s, {scrapes[0][2]} bytes; others "
          f"{sorted({str(s[0]) for s in scrapes if s[0] != 200})}")  # fmt: skip
    for sock in readers:
        sock.close()


def idle_then_scrape(port: int) -> None:
    idle = []
    for i in range(64):
        sock = socket.socket()
        sock.bind((f"127.0.0.{20 + i // 8}", 0))
        sock.connect(("127.0.0.1", port))
        idle.append(sock)
    status, took, _ = scrape(port)
    print(f"64 idle sockets, then a scrape: {status} in {took:.2f} s")
    for sock in idle:
        sock.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--serve", type=int, metavar="WORKERS", help=argparse.SUPPRESS)
    parser.add_argument("--workers", type=int, default=1000)
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=40.0)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve)
        return
    env = {**os.environ, "PYTHONPATH": os.environ.get("PYTHONPATH", str(ROOT))}
    cmd = [sys.executable, __file__, "--serve", str(args.workers)]
    child = subprocess.Popen(cmd, stdout=subprocess.PIPE, env=env, text=True)
    try:
        assert child.stdout is not None
        port = int(child.stdout.readline())
        proc = psutil.Process(child.pid)
        idle_then_scrape(port)
        for stagger in (0.0, 0.25):
            run(port, proc, args.clients, stagger, args.seconds)
            time.sleep(2)
    finally:
        child.terminate()
        child.wait(10)


if __name__ == "__main__":
    main()
