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

    .venv/bin/python bench/scrape_abuse.py --scenario auth [--seconds 30]

The wrong-password scenario (issue 36.4): the child serves the daemon's site with basic
auth (bcrypt cost 10, the documented default) for the 64-worker fixture. A third process
keeps 64 connections (8 from each of 8 loopback addresses, the per-peer cap) sending wrong
passwords as fast as they are answered, on the same connection while it stays open, on a
new one when the server closes it: first the same wrong password on each connection, then a
new one at every request (which no cache of failures can answer). Meanwhile this process
scrapes on a new connection each time: once a second with the password it logged in with
before the attack (its success is cached), and every other second as a new user from a new
address (not cached: one bcrypt). Printed per mode: each kind of scrape's status and times,
the attackers' answers, and the child's CPU (its process CPU time over the window, in
cores).
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

    from uwsgitune.exporter.metrics import registry_for
    from uwsgitune.exporter.server import MetricsServer

    snap = snapshot(workers)
    current = [snap]

    async def main() -> None:
        server = MetricsServer(registry_for(lambda: current))  # type: ignore[arg-type]
        try:  # as the daemon serves it: rendered once per poll (a checkout that has it)
            from uwsgitune.exporter.exposition import PollExposition
            from uwsgitune.exporter.metrics import polled_registry

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


USER, PASSWORD, FRESH = "prometheus", "s3cret-scraper", 40  # FRESH: users never cached


def serve_auth(workers: int) -> None:
    """The daemon's site (basic auth, the poll's exposition) on a free loopback port."""
    import asyncio

    import bcrypt

    from uwsgitune.exporter.auth import BasicAuth
    from uwsgitune.exporter.exposition import PollExposition
    from uwsgitune.exporter.metrics import polled_registry, registry_for
    from uwsgitune.exporter.server import MetricsServer
    from uwsgitune.exporter.site import Site

    users = {USER: PASSWORD, **{f"fresh{i}": f"pw-fresh{i}" for i in range(FRESH)}}
    hashes = {u: bcrypt.hashpw(p.encode(), bcrypt.gensalt(10)) for u, p in users.items()}
    current = [snapshot(workers)]

    async def main() -> None:
        exposition = PollExposition(lambda: current, polled_registry(process=True))  # type: ignore[arg-type,return-value]
        site = Site(exposition.encoded, auth=BasicAuth(hashes), kept=exposition.kept)
        server = MetricsServer(registry_for(lambda: current), handler=site)  # type: ignore[arg-type,return-value]
        await server.start("127.0.0.1:0")
        print(server.address[1], flush=True)
        while True:  # a poll a second: each publishes a new state, as the pipeline does
            await asyncio.sleep(1.0)
            current[0] = dataclasses.replace(current[0])  # type: ignore[type-var]

    asyncio.run(main())


def basic(user: str, password: str) -> str:
    import base64

    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


def attack(port: int, fresh: bool, seconds: float) -> None:
    """64 connections, 8 from each of 127.0.0.2-9, sending wrong passwords (a new one at
    every request when `fresh`) until `seconds` pass; prints the answers' statuses (JSON)."""
    import asyncio

    counts: dict[str, int] = {}

    def count(key: str) -> None:
        counts[key] = counts.get(key, 0) + 1

    async def one(i: int, deadline: float) -> None:
        loop, n, reader = asyncio.get_running_loop(), 0, None
        while loop.time() < deadline:
            try:
                if reader is None:
                    sock = socket.socket()
                    try:
                        sock.bind((f"127.0.0.{2 + i // 8}", 0))
                        sock.setblocking(False)
                        await loop.sock_connect(sock, ("127.0.0.1", port))
                    except OSError:
                        sock.close()
                        raise
                    reader, writer = await asyncio.open_connection(sock=sock)
                n += 1
                password = f"wrong-{i}-{n}" if fresh else f"wrong-{i}"
                writer.write(
                    f"GET /metrics HTTP/1.1\r\nHost: x\r\nAuthorization: "
                    f"{basic(USER, password)}\r\n\r\n".encode()
                )
                head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 30)
                length = next(
                    int(line.split(b":")[1])
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length:")
                )
                await reader.readexactly(length)
                count(head.split(b" ")[1].decode())
                if b"connection: close" in head.lower():
                    writer.close()
                    reader = None
            except (OSError, asyncio.IncompleteReadError, asyncio.TimeoutError) as exc:
                count(type(exc).__name__)
                if reader is not None:
                    writer.close()
                reader = None
                await asyncio.sleep(0.01)

    async def main() -> None:
        deadline = asyncio.get_running_loop().time() + seconds
        await asyncio.gather(*(one(i, deadline) for i in range(64)))

    asyncio.run(main())
    print(json.dumps(counts), flush=True)


def authorised(port: int, user: str, password: str, source: str) -> tuple[int | str, float]:
    """One scrape on a new connection from `source`: its status and seconds."""
    t0 = time.monotonic()
    try:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10, source_address=(source, 0))
        conn.request("GET", "/metrics", headers={"Authorization": basic(user, password)})
        resp = conn.getresponse()
        resp.read()
        conn.close()
        return resp.status, time.monotonic() - t0
    except OSError as exc:
        return type(exc).__name__, time.monotonic() - t0


def describe(got: list[tuple[int | str, float]]) -> str:
    times = sorted(t for _, t in got)
    statuses = sorted({str(s) for s, _ in got})
    ok = sum(1 for s, _ in got if s == 200)
    return (
        f"{ok}/{len(got)} 200 (others {[s for s in statuses if s != '200']}), median "
        f"{times[len(times) // 2]:.2f} s, worst {times[-1]:.2f} s"
    )


def loop_cpu(proc: psutil.Process) -> float:
    """CPU seconds of the process's main thread (its event loop)."""
    return sum(t.user_time + t.system_time for t in proc.threads() if t.id == proc.pid)


def run_auth(port: int, proc: psutil.Process, seconds: float, env: dict[str, str]) -> None:
    status, _ = authorised(port, USER, PASSWORD, "127.0.0.1")  # logs in: cached from now
    assert status == 200, status
    fresh_users = iter(range(FRESH))
    for fresh in (False, True):
        cmd = [
            sys.executable,
            __file__,
            "--attack",
            str(port),
            "--fresh",
            str(int(fresh)),
            "--seconds",
            str(seconds),
        ]
        attacker = subprocess.Popen(cmd, stdout=subprocess.PIPE, env=env, text=True)
        time.sleep(2)  # the attack under way
        cpu0, loop0, t0 = sum(proc.cpu_times()[:2]), loop_cpu(proc), time.monotonic()
        cached: list[tuple[int | str, float]] = []
        uncached: list[tuple[int | str, float]] = []
        tick = 0
        while time.monotonic() - t0 < seconds - 4:
            cached.append(authorised(port, USER, PASSWORD, "127.0.0.1"))
            if tick % 2 == 0:
                i = next(fresh_users)
                uncached.append(authorised(port, f"fresh{i}", f"pw-fresh{i}", f"127.0.1.{i + 1}"))
            tick += 1
            time.sleep(max(0.0, t0 + tick - time.monotonic()))
        took = time.monotonic() - t0
        cores = (sum(proc.cpu_times()[:2]) - cpu0) / took
        loop = (loop_cpu(proc) - loop0) / took
        out, _ = attacker.communicate(timeout=seconds + 60)
        mode = "a new wrong password every request" if fresh else "one wrong password each"
        print(
            f"64 connections, {mode}: server CPU {cores:.2f} cores ({loop:.2f} in its event "
            f"loop's thread, the rest in others: bcrypt, renders); cached scrapes "
            f"{describe(cached)}; new users' scrapes {describe(uncached)}; attackers' "
            f"answers {out.strip()}"
        )
        time.sleep(3)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--serve", type=int, metavar="WORKERS", help=argparse.SUPPRESS)
    parser.add_argument("--serve-auth", type=int, metavar="WORKERS", help=argparse.SUPPRESS)
    parser.add_argument("--attack", type=int, metavar="PORT", help=argparse.SUPPRESS)
    parser.add_argument("--fresh", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--scenario", choices=("slow", "auth", "all"), default="all")
    parser.add_argument("--workers", type=int, default=1000)
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=40.0)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve)
        return
    if args.serve_auth:
        serve_auth(args.serve_auth)
        return
    if args.attack:
        attack(args.attack, bool(args.fresh), args.seconds)
        return
    env = {**os.environ, "PYTHONPATH": os.environ.get("PYTHONPATH", str(ROOT))}
    if args.scenario in ("slow", "all"):
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
    if args.scenario in ("auth", "all"):
        cmd = [sys.executable, __file__, "--serve-auth", "64"]
        child = subprocess.Popen(cmd, stdout=subprocess.PIPE, env=env, text=True)
        try:
            assert child.stdout is not None
            port = int(child.stdout.readline())
            run_auth(port, psutil.Process(child.pid), min(args.seconds, 30.0), env)
        finally:
            child.terminate()
            child.wait(10)


if __name__ == "__main__":
    main()
