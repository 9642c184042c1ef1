"""Issue 14.1: any client of the app could blind uwsgitune. uWSGI escapes too little in the
in-flight requests' `vars`, so a request for `/x%01y` or with a raw 0xff byte in a header
makes the stats invalid JSON while it is served. The document is repaired, and counted."""

from __future__ import annotations

import json
import os
import socket
import time
from collections.abc import Callable
from contextlib import ExitStack, closing
from pathlib import Path

import pytest

from tests.conftest import stats_fixture
from tests.support.instances import document, fake_server, send, worker
from tests.uwsgi_harness import http_port
from uwsgitune.cli.main import main
from uwsgitune.core.address import parse_address
from uwsgitune.core.model import DocumentError, parse_document
from uwsgitune.exporter.metrics import ExportOptions
from uwsgitune.exporter.probe import probe_text
from uwsgitune.launch import UwsgiProcess
from uwsgitune.sources.poller import LiveSource
from uwsgitune.sources.stats import read_stats

BUSY = stats_fixture("64-workers-2-threads-busy.json")
GOOD_VAR = b'"PATH_INFO=/sleep/3"'


def _hostile(port: int, head: bytes) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    sock.sendall(head)
    return sock


def _wait_invalid(stats: str) -> bytes:
    """The stats document once both hostile requests are in flight (bounded: 5 s)."""
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        raw = read_stats(parse_address(stats))
        if raw.count(b'"busy"') >= 2:
            return raw
        time.sleep(0.05)
    raise AssertionError("the hostile requests never showed in the stats")


def test_hostile_requests_on_a_real_uwsgi(
    uwsgi: Callable[..., UwsgiProcess], capsys: pytest.CaptureFixture[str]
) -> None:
    proc = uwsgi(processes=2)
    port = http_port(proc)
    with ExitStack() as stack:
        for head in (
            b"GET /sleep/2500/x%01y HTTP/1.0\r\nHost: a\r\n\r\n",
            b"GET /sleep/2500 HTTP/1.0\r\nHost: a\r\nX-Bad: \xff\xfe\x80\r\n\r\n",
        ):
            stack.enter_context(closing(_hostile(port, head)))
        raw = _wait_invalid(proc.stats)
        with pytest.raises(ValueError):
            json.loads(raw)  # what every standard parser (and uwsgitune before) did
        poll = LiveSource(parse_address(proc.stats)).poll()
        assert poll.ok, poll.error
        assert poll.doc is not None and poll.repairs >= 2
        assert len(poll.doc.workers) == 2 and poll.doc.sockets
        assert poll.peer_uid == os.stat(f"/proc/{poll.doc.pid}").st_uid  # SO_PEERCRED
        assert sum(w.status == "busy" for w in poll.doc.workers) == 2
        assert main(["watch", proc.stats, "--once"]) == 0
    out = capsys.readouterr().out
    assert "repaired" in out and "PATH_INFO" not in out and "X-Bad" not in out.upper()


def _inject(value: bytes, doc: bytes = BUSY) -> bytes:
    return doc.replace(GOOD_VAR, b'"PATH_INFO=/x' + value + b'y"', 1)


def _small() -> bytes:
    busy = worker(1, 10, status="busy", requests=5, cores=2)
    busy["cores"][1]["vars"] = ["REQUEST_METHOD=GET", GOOD_VAR.decode().strip('"'), "X=1"]
    return document(100, [busy, worker(2, 11, requests=7)])


def test_every_byte_value_in_request_data() -> None:
    """Fuzz: each byte value 0-255 (and runs of them) inside a request string."""
    small = _small()
    clean = parse_document(small).doc
    values = [bytes([b]) for b in range(256)] + [bytes(range(256)), bytes(range(255, -1, -1))]
    for value in values:
        if value in (b'"', b"\\"):
            continue  # uWSGI escapes these two itself
        parsed = parse_document(_inject(value.replace(b"\\", b"").replace(b'"', b""), small))
        assert parsed.repairs == (value.isascii() is False or any(b < 0x20 for b in value))
        fields = ("pid", "requests", "status", "running_time")
        for got, want in zip(parsed.doc.workers, clean.workers, strict=True):
            assert [getattr(got, f) for f in fields] == [getattr(want, f) for f in fields]
            assert [len(c.vars) for c in got.cores] == [len(c.vars) for c in want.cores]
        assert parsed.doc.sockets == clean.sockets
        json.loads(parsed.raw)  # what a recording stores is valid JSON


def test_valid_document_is_not_touched() -> None:
    parsed = parse_document(BUSY)
    assert parsed.repairs == 0 and parsed.raw is BUSY


def test_invalid_outside_request_data_stays_an_error() -> None:
    bad = _inject(b"\x01").replace(b'"cwd"', b'"c\x01wd"', 1)
    with pytest.raises(DocumentError):
        parse_document(bad)
    with pytest.raises(DocumentError):
        parse_document(BUSY[: len(BUSY) // 2] + b"\x01")  # truncated stays truncated


def test_exporter_counts_repairs() -> None:
    with fake_server(send(_inject(b"\x1b[31m\xff"))) as addr:
        text = probe_text(parse_address(addr), 2.0, ExportOptions()).decode()
    assert f'uwsgi_up{{stats_uri="{parse_address(addr).uri}"}} 1.0' in text
    assert "uwsgitune_stats_repairs_total" in text
    line = next(x for x in text.splitlines() if x.startswith("uwsgitune_stats_repairs_total"))
    assert line.endswith(" 1.0")


def test_record_and_replay_a_repaired_poll(tmp_path: Path) -> None:
    from uwsgitune.sources.recording import RecordingWriter, read_recording

    path = tmp_path / "rec.jsonl"
    with fake_server(send(_inject(b"\x01\xff"))) as addr:
        observer = LiveSource(parse_address(addr))
        poll = observer.poll()
    assert poll.ok and poll.repairs == 1
    with path.open("w") as out:
        RecordingWriter(out).write(poll, observer.last_raw)
    (replayed,) = read_recording(path)
    assert replayed.doc is not None and len(replayed.doc.workers) == 64
    assert b"PATH_INFO" not in path.read_bytes()


def test_the_tui_says_a_document_was_repaired() -> None:
    from uwsgitune.core.derive import Tracker
    from uwsgitune.tui.summary import state_line

    with fake_server(send(_inject(b"\x01"))) as addr:
        poll = LiveSource(parse_address(addr)).poll()
    line = state_line(Tracker(addr).update(poll), None)
    assert line is not None and "1 request string(s)" in line.plain and "repaired" in line.plain
