"""The load generators: keepalive against a loopback server, latency from the intended send
time, wrk's report parsed, a saturated generator flagged. No timed assertions."""

from __future__ import annotations

import asyncio

from uwsgitune.cli.sweep_args import production_looking
from uwsgitune.core.address import parse_address
from uwsgitune.loadgen import LoadRun
from uwsgitune.sweep.generator import LoadSpec, Window
from uwsgitune.sweep.wrk import command, parse

BODY = b"ok\n"


async def serve(keep: bool, conns: list[int]) -> tuple[asyncio.Server, int]:
    """A tiny HTTP/1.1 server: keeps connections open when `keep`, else closes each."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conns.append(1)
        try:
            while True:
                await reader.readuntil(b"\r\n\r\n")
                close = b"Connection: close\r\n" if not keep else b""
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n" + close + b"\r\n" + BODY)
                await writer.drain()
                if not keep:
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1]


async def closed(keep: bool, keepalive: bool) -> tuple[int, int, int]:
    conns: list[int] = []
    server, port = await serve(keep, conns)
    async with server:
        run = LoadRun(
            f"http://127.0.0.1:{port}/", duration=30, max_requests=60, keepalive=keepalive
        )
        r = await run.closed_loop(3)
    return r.ok, r.errors, len(conns)


def test_keepalive_reuses_one_connection_per_client() -> None:
    ok, errors, conns = asyncio.run(closed(keep=True, keepalive=True))
    assert (ok, errors) == (60, 0) and conns == 3


def test_keepalive_reconnects_when_the_server_closes() -> None:
    ok, errors, conns = asyncio.run(closed(keep=False, keepalive=True))
    assert (ok, errors) == (60, 0) and conns == 60


def test_each_failure_is_counted_with_its_kind_and_when() -> None:
    """A connection closed with no answer and an HTTP 500 are both failures, each with its
    kind and the clock it came at (the tuner benchmark sets them beside its reloads)."""
    seen = 0

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal seen
        seen += 1
        await reader.readuntil(b"\r\n\r\n")
        if seen % 3 == 1:  # accepted, then dropped unanswered (a worker that exits)
            writer.close()
            return
        status = b"500 Oops" if seen % 3 == 2 else b"200 OK"
        writer.write(b"HTTP/1.0 " + status + b"\r\nContent-Length: 3\r\n\r\n" + BODY)
        await writer.drain()
        writer.close()

    async def go() -> tuple[int, int, dict[str, int], list[float], float, float]:
        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        async with server:
            run = LoadRun(f"http://127.0.0.1:{port}/", duration=30, max_requests=9)
            r = await run.closed_loop(1)
        return r.ok, r.errors, r.error_kinds, r.failed_at, r.started, r.ended

    ok, errors, kinds, at, started, ended = asyncio.run(go())
    assert (ok, errors) == (3, 6)
    assert kinds == {"ConnectionError": 3, "HTTP 500": 3}
    assert len(at) == 6 and all(started <= t <= ended for t in at)


def test_open_loop_latency_runs_from_the_intended_send_time() -> None:
    async def go() -> float:
        server, port = await serve(False, [])
        async with server:
            run = LoadRun(f"http://127.0.0.1:{port}/", duration=5)
            late = run._clock() - 2.0  # the schedule wanted it sent 2 s ago
            await run._fire(None, intended=late)
        return run.result.latencies[0]

    assert asyncio.run(go()) >= 2.0


WRK_CLOSE = """Running 2s test @ http://127.0.0.1:8000/
  2 threads and 16 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency     1.20ms    3.00ms  40.00ms   92.50%
    Req/Sec     6.80k     0.50k    7.50k    70.50%
  Latency Distribution
     50%  812.00us
     75%    1.20ms
     90%    2.50ms
     99%   10.01ms
  27000 requests in 2.00s, 2.1MB read
  Socket errors: connect 0, read 26990, write 0, timeout 2
  Non-2xx or 3xx responses: 8
Requests/sec:  13500.00
"""


def test_wrk_report_parsed_close_reads_are_not_failures() -> None:
    ok, errors, pct = parse(WRK_CLOSE, keepalive=False)
    assert (ok, errors) == (27000 - 8 - 2, 10)
    assert pct == {50: 0.812, 90: 2.5, 99: 10.01}
    assert parse(WRK_CLOSE, keepalive=True)[1] == 8 + 2 + 26990


def test_wrk_command_is_bounded_and_closes_unless_keepalive() -> None:
    spec = LoadSpec("http://127.0.0.1:8000/x", clients=16, timeout=5)
    cmd = command("wrk", spec, 2.4, threads=2)
    assert cmd[1:5] == ["-t2", "-c16", "-d2s", "--latency"] and "Connection: close" in cmd
    assert "Connection: close" not in command("wrk", LoadSpec("http://h/", 1, keepalive=True), 1, 2)
    assert "-t1" in command("wrk", LoadSpec("http://h/", 1), 1, 4)  # no more threads than clients


def test_a_generator_at_its_cores_is_flagged() -> None:
    w = Window(1.0, 10, 0, None, None, None, gen_cpu_cores=0.95, gen_cores_max=1.0)
    assert w.generator_bound
    assert not Window(1.0, 10, 0, None, None, None, 0.95, 2.0).generator_bound
    assert not Window(1.0, 10, 0, None, None, None, None, 1.0).generator_bound


def test_production_looking_targets() -> None:
    local = parse_address("/tmp/s.sock")
    assert production_looking("http://127.0.0.1:8000/", local, 0.0) is None
    assert "loopback" in (production_looking("http://10.0.0.5:8000/", local, 0.0) or "")
    remote = parse_address("10.0.0.5:9191")
    assert "not on this host" in (production_looking("http://127.0.0.1/", remote, None) or "")
    assert "other traffic" in (production_looking("http://127.0.0.1/", local, 40.0) or "")
