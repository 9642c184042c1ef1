"""Bad input and hostile peers: one clear line naming the address and the fix, exit 1 from
`watch --once`, no traceback, and no connection held past its timeout."""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from pathlib import Path

import pytest

from tests.conftest import stats_fixture
from tests.support.instances import (
    Behaviour,
    fake_server,
    http_answer,
    read_then_send,
    run_cli,
    send,
    silent,
    trickle,
)
from uwsgitune.cli.main import main
from uwsgitune.core.address import parse_address
from uwsgitune.sources.poller import LiveSource
from uwsgitune.sources.stats import StatsError, read_stats

DOC = stats_fixture("processes.json")


def _assert_one_line(res: object, address: str, *needles: str) -> None:
    import subprocess

    assert isinstance(res, subprocess.CompletedProcess)
    assert res.returncode == 1, (res.stdout, res.stderr)
    assert "Traceback" not in res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, res.stderr
    assert lines[0].startswith(f"uwsgitune: {address}: "), lines[0]
    assert lines[0].count(address) >= 1
    for needle in needles:
        assert needle in lines[0], lines[0]
    assert res.stdout == ""  # nothing to summarise for an instance that never answered


PEERS: list[tuple[str, Behaviour, tuple[str, ...]]] = [
    (
        "random-bytes",
        send(os.urandom(64).replace(b"{", b"x").replace(b" ", b"x")),
        ("not a uWSGI stats document",),
    ),
    # A real HTTP server waits for a request: raw, it looks silent (see the stats-http test).
    ("http-server", http_answer(b"<html>hi</html>"), ()),
    (
        "http-unprompted",
        send(b"HTTP/1.1 408 Request Timeout\r\n\r\n"),
        ("an HTTP server answered",),
    ),
    ("truncated-json", send(DOC[: len(DOC) // 2]), ("truncated JSON",)),
    ("invalid-json", send(b'{"workers": [1, 2,, ]}'), ("invalid JSON",)),
    ("other-json", send(b'{"status": "ok"}'), ("not a uWSGI stats socket",)),
    ("wrong-types", send(b'{"workers": [{"requests": "lots"}]}'), ("not a uWSGI stats document",)),
    ("closes-at-once", send(b""), ("closed without sending anything",)),
]


@pytest.mark.parametrize(("name", "behaviour", "needles"), PEERS, ids=[p[0] for p in PEERS])
@pytest.mark.parametrize("family", ["tcp", "unix"])
def test_not_uwsgi_peers(
    tmp_path: Path, name: str, behaviour: Behaviour, needles: tuple[str, ...], family: str
) -> None:
    unix = str(tmp_path / "s.sock") if family == "unix" else None
    with fake_server(behaviour, unix_path=unix) as addr:
        _assert_one_line(run_cli("watch", addr, "--once", "--interval", "0.2"), addr, *needles)


def test_document_over_the_size_cap() -> None:
    huge = b'{"workers": [' + b" " * (16 * 1024 * 1024 + 10) + b"]}"
    with fake_server(send(huge)) as addr:
        _assert_one_line(run_cli("watch", addr, "--once"), addr, "larger than 16 MiB")
    with (
        fake_server(send(b"{" + b" " * 5000 + b"}")) as addr,
        pytest.raises(StatsError, match="larger than 4096 bytes"),
    ):
        read_stats(parse_address(addr), max_bytes=4096)


def test_missing_refused_and_wrong_paths(tmp_path: Path) -> None:
    missing = str(tmp_path / "none.sock")
    _assert_one_line(run_cli("watch", missing, "--once"), missing, "no socket at", "stats =")
    stale = str(tmp_path / "stale.sock")
    with socket.socket(socket.AF_UNIX) as s:
        s.bind(stale)  # a socket file nobody listens on: what a stopped uWSGI leaves
    _assert_one_line(run_cli("watch", stale, "--once"), stale, "connection refused", "socket file")
    regular = tmp_path / "file.txt"
    regular.write_text("x")
    _assert_one_line(run_cli("watch", str(regular), "--once"), str(regular), "not a socket")
    _assert_one_line(run_cli("watch", str(tmp_path), "--once"), str(tmp_path), "is a directory")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    addr = f"127.0.0.1:{port}"
    _assert_one_line(
        run_cli("watch", addr, "--once"), addr, "connection refused", "is uWSGI running"
    )
    _assert_one_line(run_cli("watch", "@uwt-none", "--once"), "@uwt-none", "connection refused")


def test_permission_denied(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """As root, the check runs in-process under a temporary effective uid `nobody` (root
    ignores socket permissions, and `nobody` cannot run the venv's script)."""
    path = str(tmp_path / "p.sock")
    with fake_server(send(DOC), unix_path=path) as addr:
        os.chmod(path, 0o600)
        if os.geteuid() != 0:
            _assert_one_line(run_cli("watch", addr, "--once"), addr, "permission denied")
            return
        main(["watch", str(tmp_path / "warm.sock"), "--once"])  # import everything as root
        capsys.readouterr()
        os.seteuid(65534)
        try:
            code = main(["watch", addr, "--once"])
        finally:
            os.seteuid(0)
    err = capsys.readouterr().err.strip()
    assert code == 1
    assert err == (
        f"uwsgitune: {addr}: permission denied; run uwsgitune as the uWSGI user or in its group"
    )


def test_never_answers_is_bounded(tmp_path: Path) -> None:
    with fake_server(silent(10), unix_path=str(tmp_path / "s.sock")) as addr:
        t0 = time.monotonic()
        with pytest.raises(StatsError, match=r"no answer within 0\.4s"):
            read_stats(parse_address(addr), timeout=0.4)
        assert time.monotonic() - t0 < 0.9
        res = run_cli("watch", addr, "--once", "--timeout", "0.5")
        _assert_one_line(res, addr, "no answer within 0.5s")


def test_slow_peer_is_cut_at_the_deadline() -> None:
    with fake_server(trickle(DOC, 0.05)) as addr:
        t0 = time.monotonic()
        with pytest.raises(StatsError, match=r"no answer within 0\.5s"):
            read_stats(parse_address(addr), timeout=0.5)
        assert time.monotonic() - t0 < 1.0


def test_silent_raw_tcp_peer_suggests_stats_http() -> None:
    with fake_server(silent(5)) as addr:
        t0 = time.monotonic()
        res = run_cli("watch", addr, "--once")
        _assert_one_line(res, addr, "--stats-http", f"http://{addr}")
        assert time.monotonic() - t0 < 4


def test_silent_stats_http_peer() -> None:
    with fake_server(silent(5)) as addr:
        url = f"http://{addr}"
        _assert_one_line(
            run_cli("watch", url, "--once", "--timeout", "0.5"), url, "no answer within"
        )


def test_http_peer_answers_raw_json() -> None:
    with fake_server(send(DOC)) as addr:
        url = f"http://{addr}"
        res = run_cli("watch", url, "--once")
        _assert_one_line(res, url, f"use {addr}")


@pytest.mark.parametrize(
    ("behaviour", "needle"),
    [
        (http_answer(b"nope", status="404 Not Found"), "HTTP 404"),
        (http_answer(b"<html></html>"), "not a uWSGI stats document"),
        (read_then_send(b"HTTP/1.0 200 OK\r\nContent-Type"), "truncated HTTP answer"),
        (read_then_send(b"SSH-2.0-OpenSSH\r\n\r\n"), "not an HTTP answer"),
        (read_then_send(DOC), "raw JSON, not HTTP"),
    ],
)
def test_http_peers(behaviour: Behaviour, needle: str) -> None:
    with fake_server(behaviour) as addr:
        url = f"http://{addr}"
        _assert_one_line(run_cli("watch", url, "--once"), url, needle)


def test_stats_http_fake_works() -> None:
    with fake_server(http_answer(DOC)) as addr:
        res = run_cli("watch", f"http://{addr}", "--json", "--interval", "0.1")
        assert res.returncode == 0, res.stderr
        (inst,) = json.loads(res.stdout)["instances"]
        assert inst["kind"] == "ok" and inst["live"] == 4


def test_one_good_one_bad_instance(tmp_path: Path) -> None:
    missing = str(tmp_path / "none.sock")
    with fake_server(send(DOC)) as addr:
        res = run_cli("watch", addr, missing, "--once", "--interval", "0.1")
    assert res.returncode == 1
    assert "uWSGI 2.0.31" in res.stdout and "4 live / 4 max" in res.stdout
    hint = f"is uWSGI running with `stats = {missing}`?"
    assert res.stderr.strip() == f"uwsgitune: {missing}: no socket at {missing}; {hint}"


def test_observer_never_raises_for_peer_faults() -> None:
    with fake_server(send(b"\x00\xff garbage")) as addr:
        poll = LiveSource(parse_address(addr), timeout=0.5).poll()
    assert not poll.ok and poll.error and poll.error.startswith(addr)


def test_bad_arguments_exit_2() -> None:
    for args in (
        ["watch", "--once"],
        ["watch", "/x", "--interval", "0"],
        ["watch", "/x", "--interval", "abc"],
    ):
        res = run_cli(*args)
        assert res.returncode == 2 and "Traceback" not in res.stderr


def test_help_lists_commands() -> None:
    res = run_cli("--help")
    assert res.returncode == 0 and "watch" in res.stdout and "record" in res.stdout


@pytest.mark.parametrize("suffix", [b"", b"\0"])
def test_abstract_both_spellings(suffix: bytes) -> None:
    """uWSGI binds `@name` with a trailing NUL; other programs without: both are found."""
    name = f"uwt-abs-{os.getpid()}-{len(suffix)}"
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(b"\0" + name.encode() + suffix)
    listener.listen(1)
    try:
        client = threading.Thread(target=lambda: out.append(read_stats(parse_address("@" + name))))
        out: list[bytes] = []
        client.start()
        conn, _ = listener.accept()
        with conn:
            conn.sendall(DOC)
        client.join(5)
        assert out == [DOC]
    finally:
        listener.close()
