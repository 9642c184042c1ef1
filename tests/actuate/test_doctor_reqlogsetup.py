"""`doctor --latency ADDR`: the ini lines to add, what they change in the user's own request
log, and whether a line arrives (pure checks from ini lines, then a real uWSGI)."""

from __future__ import annotations

import socket
import threading
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.uwsgi_harness import url
from uwsgitune.actuate.doctor import Check
from uwsgitune.actuate.doctor.reqlogsetup import (
    Heard,
    LatencyFacts,
    ini_pairs,
    latency_checks,
    listen,
)
from uwsgitune.cli.main import main
from uwsgitune.launch import IniValue, UwsgiProcess, free_port
from uwsgitune.sources.reqlog import DEFAULT_LINE_FORMAT, LOG_TAIL, MEMORY_REPORT_FORMAT

ADDR = "127.0.0.1:9118"
Start = Callable[..., UwsgiProcess]


def checks_for(ini: str, tmp_path: Path, heard: Heard | None = None) -> dict[str, Check]:
    path = tmp_path / "app.ini"
    path.write_text(ini)
    pairs, error = ini_pairs(path)
    assert error is None
    return {c.name: c for c in latency_checks(LatencyFacts(ADDR, str(path), pairs, heard))}


def test_a_plain_ini_gets_the_default_line_with_the_tail_and_keeps_its_log_file(
    tmp_path: Path,
) -> None:
    ini = "[uwsgi]\nmaster = true\nmemory-report = true\nlogto = /var/log/app.log\n"
    c = checks_for(ini, tmp_path)
    fmt, logger = c["latency-format"], c["latency-logger"]
    assert fmt.ok is False and fmt.how == "add"
    assert fmt.fix == (f"log-format = {MEMORY_REPORT_FORMAT}{DEFAULT_LINE_FORMAT} {LOG_TAIL}")
    assert logger.ok is False and logger.fix.splitlines() == [
        f"req-logger = socket:{ADDR}",
        "req-logger = file:/var/log/app.log   (keeps your request lines: with a req-logger "
        "they leave uWSGI's log)",
    ]
    assert c["latency-logging"].ok is True


def test_disable_logging_is_named_with_its_fix(tmp_path: Path) -> None:
    c = checks_for("[uwsgi]\ndisable-logging = true\n", tmp_path)
    check = c["latency-logging"]
    assert check.ok is False and "disable-logging = true stops" in check.detail
    assert check.fix == "disable-logging = false   (or remove the line)"
    no_memory = c["latency-format"].fix
    assert no_memory == f"log-format = {DEFAULT_LINE_FORMAT} {LOG_TAIL}"


def test_the_users_log_format_keeps_its_content_and_gets_the_tail(tmp_path: Path) -> None:
    ini = "[uwsgi]\nlog-format = %(addr) - %(uri)\nlog-format = %(status) %(uri)\n"
    check = checks_for(ini, tmp_path)["latency-format"]
    assert check.ok is False and check.how == "replace"
    assert "your request log shows the tail too" in check.detail
    assert check.fix == f"log-format = %(status) %(uri) {LOG_TAIL}"  # the last one
    done = checks_for(f"[uwsgi]\nlog-format = %(status) {LOG_TAIL}\n", tmp_path)
    assert done["latency-format"].ok is True


def test_existing_request_loggers_stay_and_only_the_socket_is_added(tmp_path: Path) -> None:
    ini = "[uwsgi]\nreq-logger = file:/var/log/req.log\nreq-logger = socket:127.0.0.1:5000\n"
    check = checks_for(ini, tmp_path)["latency-logger"]
    assert check.ok is False and check.fix == f"req-logger = socket:{ADDR}"
    assert "(file:/var/log/req.log, socket:127.0.0.1:5000) stay" in check.detail
    assert "not socket:127.0.0.1:5000" in check.detail
    ok = checks_for(f"[uwsgi]\nreq-logger = socket:{ADDR}\n", tmp_path)["latency-logger"]
    assert ok.ok is True


@pytest.mark.parametrize(
    ("heard", "ok", "says"),
    [
        (Heard(0.4, lines=3, tailed=3), True, "3 request line(s) from the master in 0.4 s"),
        (Heard(5.0, lines=2), False, "without uwsgitune's tail"),
        (Heard(5.0, strangers=4, unproven="x: not the master's"), False, "another process"),
        (Heard(5.0), None, "no request arrived in 5 s"),
        (Heard(0.0, error="cannot listen"), None, "cannot listen"),
    ],
)
def test_what_arrived_is_judged(heard: Heard, ok: bool | None, says: str, tmp_path: Path) -> None:
    check = checks_for("[uwsgi]\n", tmp_path, heard)["latency-lines"]
    assert check.ok is ok and says in check.detail


def test_a_small_receive_buffer_names_the_sysctl(tmp_path: Path) -> None:
    small = checks_for("[uwsgi]\n", tmp_path, Heard(5.0, rcvbuf=425984))["latency-buffer"]
    assert small.ok is False and small.how == "run"
    assert small.detail.startswith("receive buffer 416 KiB: about 512 lines")
    assert small.fix.startswith("sysctl -w net.core.rmem_max=4194304")
    big = checks_for("[uwsgi]\n", tmp_path, Heard(5.0, rcvbuf=8388608))["latency-buffer"]
    assert big.ok is True and big.detail == "receive buffer 8192 KiB"


def test_an_unknown_ini_still_prints_the_lines() -> None:
    (unknown, lines, _) = latency_checks(LatencyFacts(ADDR, None, None, None))
    assert unknown.ok is None and unknown.fix.splitlines()[0] == f"req-logger = socket:{ADDR}"
    assert lines.ok is None


# --- a real uWSGI -----------------------------------------------------------------------------


def traffic(proc: UwsgiProcess, seconds: float) -> threading.Thread:
    def run() -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            try:
                with urllib.request.urlopen(url(proc, "/hello"), timeout=2) as answer:
                    answer.read()
            except OSError:
                pass
            time.sleep(0.1)

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def logging_instance(uwsgi: Start, tail: str, **extra: IniValue | None) -> tuple[UwsgiProcess, int]:
    """2 workers sending their request log, `%(status)` then `tail`, to a free port."""
    port = free_port()
    proc = uwsgi(
        processes=2,
        req_logger=f"socket:127.0.0.1:{port}",
        log_format=f"%(status) {tail}",
        **extra,
    )
    return proc, port


def test_doctor_hears_the_masters_line_on_a_configured_instance(
    uwsgi: Start, capsys: pytest.CaptureFixture[str]
) -> None:
    proc, port = logging_instance(uwsgi, LOG_TAIL, disable_logging=None)
    thread = traffic(proc, 3.0)
    main(["doctor", proc.stats, "--ini", str(proc.ini), "--latency", f"127.0.0.1:{port}"])
    thread.join()
    out = capsys.readouterr().out
    assert "ok   latency-format: log-format carries uwsgitune's tail" in out
    assert f"ok   latency-logger: req-logger = socket:127.0.0.1:{port}" in out
    assert "ok   latency-lines: " in out and "from the master in" in out
    assert "latency-buffer: receive buffer " in out


def test_doctor_prints_the_lines_for_an_instance_without_them_and_waits_bounded(
    uwsgi: Start, capsys: pytest.CaptureFixture[str]
) -> None:
    proc = uwsgi(processes=2)  # disable-logging = true, no req-logger
    thread = traffic(proc, 3.0)
    start = time.monotonic()
    code = main(["doctor", proc.stats, "--ini", str(proc.ini), "--latency", ADDR])
    took = time.monotonic() - start
    thread.join()
    out = capsys.readouterr().out
    assert code == 1 and took < 30
    assert "FAIL latency-logging: disable-logging = true" in out
    assert f"      add: req-logger = socket:{ADDR}" in out
    assert "??   latency-lines: no request arrived in 5 s" in out


def test_a_stranger_on_the_port_is_not_the_master(uwsgi: Start) -> None:
    """Lines from a process that is not the master fail the check, naming why."""
    proc = uwsgi(processes=1)
    port = free_port()
    stop = threading.Event()

    def send() -> None:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            while not stop.is_set():
                s.sendto(b"200 uwt1 1 1 200 1 1 GET [-] /x\n", ("127.0.0.1", port))
                time.sleep(0.05)

    sender = threading.Thread(target=send)
    sender.start()
    try:
        heard = listen(f"127.0.0.1:{port}", proc.pid, wait=1.0)
    finally:
        stop.set()
        sender.join()
    assert heard.lines == 0 and heard.strangers > 0 and "not the master's" in heard.unproven


def test_a_refused_latency_address_is_one_line_and_exit_2(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["doctor", "/nonexistent.sock", "--latency", "/run/log.sock"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "is a unix socket" in err and "Traceback" not in err
