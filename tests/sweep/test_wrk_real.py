"""sweep's wrk driver end to end: the real wrk against a real uWSGI, its figures read from the
report script's JSON. Skipped where wrk is not installed (`apt-get install -y wrk`)."""

from __future__ import annotations

import re
import subprocess
from importlib.resources import as_file
from pathlib import Path

import pytest

from tests.uwsgi_harness import uwsgi_instance
from uwsgitune.launch import free_port
from uwsgitune.sweep.generator import LoadSpec
from uwsgitune.sweep.live import StopFlag
from uwsgitune.sweep.wrk import REPORT, Wrk, find_wrk, parse

WRK = find_wrk()
pytestmark = [
    pytest.mark.uwsgi,
    pytest.mark.skipif(WRK is None, reason="wrk is not installed (apt-get install -y wrk)"),
]
APP = """
def application(environ, start_response):
    busy = environ["PATH_INFO"] == "/busy"
    body = b"busy\\n" if busy else b"ok\\n"
    status = "503 Service Unavailable" if busy else "200 OK"
    start_response(status, [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
    return [body]
"""


def test_wrk_figures_come_from_its_json_and_agree_with_its_report(tmp_path: Path) -> None:
    assert WRK is not None
    app = tmp_path / "app.py"
    app.write_text(APP)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    with uwsgi_instance(
        wsgi_file=str(app), http_socket=None, http11_socket=f"127.0.0.1:{port}", processes=2
    ):
        marks: list[int] = []
        spec = LoadSpec(f"{base}/", clients=2, keepalive=True, timeout=5)
        window = Wrk(spec, StopFlag(), WRK).measure(1, 1, lambda: marks.append(1))
        with as_file(REPORT) as script:
            cmd = [WRK, "-t1", "-c2", "-d1s", "-s", str(script), f"{base}/busy"]
            out = subprocess.run(cmd, capture_output=True, text=True, timeout=60).stdout
    assert marks == [1, 1]
    assert window.ok > 0 and window.errors == 0, window
    assert window.seconds >= 1.0  # wrk's own duration of its `-d1s` run
    assert window.p50_ms is not None and window.p99_ms is not None
    assert 0 < window.p50_ms <= window.p90_ms <= window.p99_ms  # type: ignore[operator]
    busy = parse(out, keepalive=True)
    said = re.search(r"(\d+) requests in", out)  # wrk's own report, for the same run
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    assert said is not None and non2xx is not None, out
    assert busy.ok == 0 and busy.errors == int(said.group(1)) == int(non2xx.group(1)) > 0
