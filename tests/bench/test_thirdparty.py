"""The bench's third-party app (bench/thirdparty): Django's admin and a generic ListView over a
PostgreSQL cluster the bench starts, under a real uWSGI.

Skipped with the reason when the PostgreSQL server binaries (`apt-get install -y postgresql`)
or Django/psycopg (`pip install -e '.[bench]'`) are absent: CI installs `.[test]` only, so
there it is skipped. With them, one test of ~10 s.
"""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tests.uwsgi_harness import url, uwsgi_instance
from uwsgitune.loadgen import LoadRun

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

import thirdparty  # noqa: E402

WHY = thirdparty.missing()
pytestmark = [
    pytest.mark.uwsgi,
    pytest.mark.slow,
    pytest.mark.skipif(WHY is not None, reason=f"bench/thirdparty cannot run here: {WHY}"),
]


def _get(u: str, headers: tuple[tuple[str, str], ...] = ()) -> tuple[int, str]:
    """One request: the status and the body (the admin's changelist, the report)."""
    host, port = u.split("/")[2].split(":")
    path = "/" + u.split("/", 3)[3]
    extra = "".join(f"{k}: {v}\r\n" for k, v in headers)
    with socket.create_connection((host, int(port)), timeout=20) as s:
        s.sendall(f"GET {path} HTTP/1.0\r\nHost: {host}:{port}\r\n{extra}\r\n".encode())
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split()[1]), body.decode(errors="replace")


def _raw_stats(path: str) -> str:
    with socket.socket(socket.AF_UNIX) as s:
        s.connect(path)
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    return data.decode(errors="replace")


def test_admin_and_listview_serve_over_postgres_and_the_session_cookie_never_shows() -> None:
    with (
        thirdparty.database(orders=2_000) as db,
        uwsgi_instance(**db.uwsgi, processes=2) as proc,
    ):
        cookie = db.headers[0][1].split("=", 1)[1]
        assert len(cookie) >= 32
        # the CPU page: the admin's change list, logged in through the setup's session
        status, body = _get(url(proc, thirdparty.CPU_PATH), db.headers)
        assert status == 200
        assert "Select order to change" in body and "Customer " in body
        assert body.count('class="action-checkbox"') == 100  # list_per_page rows
        # without the session: the admin's login redirect (which loadgen would count as ok)
        assert _get(url(proc, thirdparty.CPU_PATH))[0] == 302
        # the IO page: the generic ListView's report, 20 customers ranked by spend
        status, body = _get(url(proc, thirdparty.IO_PATH), db.headers)
        assert status == 200 and body.count("<tr>") == 20

        # Under load with the cookie (loadgen's headers), uWSGI's stats carry it in the
        # in-flight requests' vars; what uwsgitune prints never does.
        stop = threading.Event()

        def load() -> None:
            run = LoadRun(
                url(proc, thirdparty.CPU_PATH), duration=8, max_requests=400, headers=db.headers
            )
            result = asyncio.run(run.closed_loop(6))
            assert result.ok and set(result.statuses) == {200}
            stop.set()

        th = threading.Thread(target=load)
        th.start()
        try:
            seen = False
            for _ in range(100):
                if cookie in _raw_stats(proc.stats):
                    seen = True
                    break
                stop.wait(0.05)
            assert seen, "the stats never showed an in-flight request's vars: nothing checked"
            cli = [str(Path(sys.executable).parent / "uwsgitune"), "watch", proc.stats]
            for extra in (["--once"], ["--once", "--json"]):
                out = subprocess.run(
                    [*cli, *extra, "--interval", "0.5"], capture_output=True, text=True, timeout=30
                )
                assert out.returncode == 0, out.stderr
                assert "busy" in out.stdout or "workers" in out.stdout
                assert cookie not in out.stdout + out.stderr
                if "--json" in extra:
                    json.loads(out.stdout)  # the document uwsgitune prints, whole
        finally:
            th.join()
