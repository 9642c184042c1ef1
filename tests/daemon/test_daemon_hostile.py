"""Hostile stats peers against the real daemon (the `watch --once` cases are in
tests/sources/test_faults.py): it keeps serving /metrics, says what is wrong once, and
request `vars` never reach the metrics or the log."""

from __future__ import annotations

import json
import socket
import tempfile
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path

from tests.conftest import stats_fixture
from tests.daemon.conftest import DaemonProc
from tests.daemon.helpers import http_get, scrape, value, wait_for
from tests.support.instances import fake_server, send, trickle

SECRET = "session=SECRET-7f3a"


def endless(conn: socket.socket) -> None:
    conn.sendall(b'{"workers": [')
    while True:
        conn.sendall(b'{"id": 1, "status": "idle"},' * 1000)


def doc_with_secret() -> bytes:
    doc = json.loads(stats_fixture("64-workers-2-threads-busy.json"))
    for w in doc["workers"]:
        for core in w.get("cores", []):
            if core.get("vars"):
                core["vars"] = [*core["vars"], f"HTTP_COOKIE={SECRET}", "HTTP_AUTHORIZATION=x"]
    return json.dumps(doc).encode()


def test_hostile_peers_and_request_vars(start_daemon: Callable[..., DaemonProc]) -> None:
    workdir = Path(tempfile.mkdtemp(prefix="uwt-h-", dir="/tmp"))
    behaviours = {
        "garbage": send(b"\x00\xffnot json at all" * 100),
        "endless": endless,
        "trickle": trickle(b'{"version": "2.0.31", "workers": []}', 1.0),
        "secret": send(doc_with_secret()),
    }
    with ExitStack() as stack:
        paths = {
            n: stack.enter_context(fake_server(b, unix_path=str(workdir / f"{n}.sock")))
            for n, b in behaviours.items()
        }
        config = '[daemon]\nmetrics_listen = "127.0.0.1:@PORT@"\n' + "".join(
            f'[[instance]]\nname = "{n}"\nstats = "{p}"\nmode = "recommend"\n'
            f"interval = 0.5\ntimeout = 1.0\n"
            for n, p in paths.items()
        )
        d = start_daemon(config=config)
        wait_for(lambda: len(d.events("disconnected")) >= 3, timeout=15)
        samples = scrape(d.port)
        assert value(samples, "uwsgi_up", stats_uri=f"unix://{paths['secret']}") == 1
        for n in ("garbage", "endless", "trickle"):
            assert value(samples, "uwsgi_up", stats_uri=f"unix://{paths[n]}") == 0
        status, body, _ = http_get(d.port, "/metrics", "POST")
        assert status == 405
        body = http_get(d.port)[1]
        assert d.proc.poll() is None
    log = d.log.read_text()
    by_name = {n: [x for x in d.events("disconnected") if f"instance={n} " in x] for n in paths}
    assert len(by_name["garbage"]) == 1 and "not a uWSGI stats document" in by_name["garbage"][0]
    endless_msg = by_name["endless"][0] if len(by_name["endless"]) == 1 else ""
    assert "larger than 16 MiB" in endless_msg or "no answer within" in endless_msg
    assert len(by_name["trickle"]) == 1 and "no answer within" in by_name["trickle"][0]
    assert SECRET.encode() not in body and SECRET not in log and "HTTP_AUTHORIZATION" not in log
    assert "Traceback" not in log
    workdir.rmdir()
