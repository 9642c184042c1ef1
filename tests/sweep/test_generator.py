"""The load generators: keepalive against a loopback server, latency from the intended send
time, wrk's figures read from its report script's JSON, a saturated generator flagged. No timed
assertions."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from uwsgitune.cli.sweep_args import production_looking
from uwsgitune.core.address import parse_address
from uwsgitune.loadgen import LoadRun
from uwsgitune.sweep.generator import LoadSpec, LoadWindow
from uwsgitune.sweep.live import SweepError
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


# Recorded: wrk 4.1.0 with `-s wrk_report.lua`, `-H 'Connection: close'`, on a real uWSGI
# `http-socket` (which closes after each answer: wrk counts each close as a read error).
WRK_CLOSE = """Running 1s test @ http://127.0.0.1:18935/
  1 threads and 2 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency   253.09us  670.63us   6.69ms   93.12%
    Req/Sec    12.68k     3.32k   16.19k    60.00%
  12618 requests in 1.00s, 800.95KB read
  Socket errors: connect 0, read 12618, write 0, timeout 0
Requests/sec:  12569.31
Transfer/sec:    797.86KB
{"uwsgitune_wrk": 1, "duration_us": 1003874, "requests": 12618, "bytes": 820170, "errors": \
{"connect": 0, "read": 12618, "write": 0, "status": 0, "timeout": 0}, "latency_us": \
{"mean": 253.093, "max": 6687, "p50": 82, "p75": 95, "p90": 277, "p99": 3760}}
"""
# Recorded the same way on `http11-socket`: every answer a 503; a route slower than --timeout.
WRK_503 = (
    '{"uwsgitune_wrk": 1, "duration_us": 2099383, "requests": 101031, "bytes": 8688666, '
    '"errors": {"connect": 0, "read": 0, "write": 0, "status": 101031, "timeout": 0}, '
    '"latency_us": {"mean": 62.107, "max": 2616, "p50": 32, "p75": 50, "p90": 85, "p99": 750}}'
)
WRK_TIMEOUTS = (
    '{"uwsgitune_wrk": 1, "duration_us": 2002549, "requests": 2, "bytes": 134, "errors": '
    '{"connect": 0, "read": 0, "write": 0, "status": 0, "timeout": 2}, "latency_us": null}'
)


def test_wrk_figures_come_from_its_json_and_close_reads_are_not_failures() -> None:
    report = parse(WRK_CLOSE, keepalive=False)
    assert (report.ok, report.errors) == (12618, 0)
    assert (report.p50_ms, report.p90_ms, report.p99_ms) == (0.082, 0.277, 3.76)  # not 6.69ms
    assert report.seconds == 1.003874  # wrk's own, not its report's "1.00s"
    assert parse(WRK_CLOSE, keepalive=True).errors == 12618


def test_wrk_errors_by_kind_and_no_latency_when_none_was_recorded() -> None:
    busy = parse(WRK_503, keepalive=True)
    assert (busy.ok, busy.errors) == (0, 101031)  # answers other than 2xx/3xx
    slow = parse(WRK_TIMEOUTS, keepalive=True)
    assert (slow.ok, slow.errors, slow.p50_ms, slow.p99_ms) == (0, 2, None, None)


def test_wrk_output_without_the_report_line_is_an_error() -> None:
    text_only = WRK_CLOSE.split("{", 1)[0]  # wrk's rounded text is never read
    with pytest.raises(SweepError, match="wrk gave no result"):
        parse(text_only, keepalive=False)
    with pytest.raises(SweepError, match="could not be read"):
        parse('{"uwsgitune_wrk": 1, "requests": 3}', keepalive=False)


def test_wrk_command_is_bounded_and_closes_unless_keepalive() -> None:
    spec = LoadSpec("http://127.0.0.1:8000/x", clients=16, timeout=5)
    script = Path("report.lua")
    cmd = command("wrk", spec, 2.4, threads=2, script=script)
    assert cmd[1:6] == ["-t2", "-c16", "-d2s", "-s", "report.lua"] and "Connection: close" in cmd
    keep = LoadSpec("http://h/", 1, keepalive=True)
    assert "Connection: close" not in command("wrk", keep, 1, 2, script)
    assert "-t1" in command("wrk", LoadSpec("http://h/", 1), 1, 4, script)  # threads <= clients


def test_a_generator_at_its_cores_is_flagged() -> None:
    w = LoadWindow(1.0, 10, 0, None, None, None, gen_cpu_cores=0.95, gen_cores_max=1.0)
    assert w.generator_bound
    assert not LoadWindow(1.0, 10, 0, None, None, None, 0.95, 2.0).generator_bound
    assert not LoadWindow(1.0, 10, 0, None, None, None, None, 1.0).generator_bound


def test_production_looking_targets() -> None:
    local = parse_address("/tmp/s.sock")
    assert production_looking("http://127.0.0.1:8000/", local, 0.0) is None
    assert "loopback" in (production_looking("http://10.0.0.5:8000/", local, 0.0) or "")
    remote = parse_address("10.0.0.5:9191")
    assert "not on this host" in (production_looking("http://127.0.0.1/", remote, None) or "")
    assert "other traffic" in (production_looking("http://127.0.0.1/", local, 40.0) or "")


async def _heads(keepalive: bool) -> list[bytes]:
    heads: list[bytes] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                heads.append(await reader.readuntil(b"\r\n\r\n"))
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\n" + BODY)
                await writer.drain()
                if not keepalive:
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    async with server:
        run = LoadRun(
            f"http://127.0.0.1:{port}/admin/?q=1",
            duration=30,
            max_requests=4,
            keepalive=keepalive,
            stamp=True,
            headers=[("Cookie", "sessionid=abc123")],
        )
        run.set_url(f"http://127.0.0.1:{port}/admin/x/")  # a phase's new path keeps them
        r = await run.closed_loop(2)
    assert (r.ok, r.errors) == (4, 0)
    return heads


@pytest.mark.parametrize("keepalive", [False, True])
def test_headers_go_with_every_request(keepalive: bool) -> None:
    """A session cookie (bench/thirdparty's admin) rides every request, on fresh connections
    and kept ones, after a path change, beside the proxy stamp."""
    heads = asyncio.run(_heads(keepalive))
    assert len(heads) == 4
    for head in heads:
        assert head.startswith(b"GET /admin/x/ HTTP/1.")
        assert b"\r\ncookie: sessionid=abc123\r\n" in head.lower()  # h11 lowercases
        assert b"\r\nx-request-start: t=" in head.lower()
