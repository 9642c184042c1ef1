"""Every address form a user may type, and every malformed one, parsed without the network."""

from __future__ import annotations

import os

import pytest

from uwsgitune.cli.main import main
from uwsgitune.core.address import AddressError, StatsAddress, parse_address


@pytest.mark.parametrize(
    ("text", "kind", "path", "host", "port", "uri"),
    [
        (
            "/run/uwsgi/stats.sock",
            "unix",
            "/run/uwsgi/stats.sock",
            "",
            0,
            "unix:///run/uwsgi/stats.sock",
        ),
        ("./stats.sock", "unix", "./stats.sock", "", 0, "unix://./stats.sock"),
        ("stats.sock", "unix", "stats.sock", "", 0, "unix://stats.sock"),
        ("@uwsgi-stats", "abstract", "uwsgi-stats", "", 0, "unix://@uwsgi-stats"),
        ("127.0.0.1:9191", "tcp", "", "127.0.0.1", 9191, "tcp://127.0.0.1:9191"),
        ("localhost:9191", "tcp", "", "localhost", 9191, "tcp://localhost:9191"),
        (":9191", "tcp", "", "127.0.0.1", 9191, "tcp://127.0.0.1:9191"),
        ("[::1]:9191", "tcp", "", "::1", 9191, "tcp://[::1]:9191"),
        ("http://127.0.0.1:9191", "http", "", "127.0.0.1", 9191, "http://127.0.0.1:9191/"),
        ("http://[::1]:9191/", "http", "", "::1", 9191, "http://[::1]:9191/"),
        ("unix:///tmp/s.sock", "unix", "/tmp/s.sock", "", 0, "unix:///tmp/s.sock"),
        ("unix://@abs", "abstract", "abs", "", 0, "unix://@abs"),
        ("tcp://10.0.0.1:1717", "tcp", "", "10.0.0.1", 1717, "tcp://10.0.0.1:1717"),
        ("tcp://10.0.0.1:1717/", "tcp", "", "10.0.0.1", 1717, "tcp://10.0.0.1:1717"),
        ("  /tmp/s.sock  ", "unix", "/tmp/s.sock", "", 0, "unix:///tmp/s.sock"),
    ],
)
def test_every_form(text: str, kind: str, path: str, host: str, port: int, uri: str) -> None:
    addr = parse_address(text)
    assert (addr.kind, addr.path, addr.host, addr.port) == (kind, path, host, port)
    assert addr.uri == uri
    assert str(addr) == text.strip()  # shown as the user typed it


def test_http_path_kept() -> None:
    assert parse_address("http://h:1/stats").http_path == "/stats"


def test_tilde_is_expanded() -> None:
    addr = parse_address("~/stats.sock")
    assert addr.path == os.path.expanduser("~/stats.sock")
    assert str(addr) == "~/stats.sock"


@pytest.mark.parametrize(
    ("text", "hint"),
    [
        ("", "empty stats address"),
        ("   ", "empty stats address"),
        ("@", "no abstract socket name"),
        ("unix://", "no path after unix://"),
        ("unix://@", "no abstract socket name"),
        ("tcp://", "no valid port"),
        ("tcp://host", "no valid port"),
        ("host:", "no valid port"),
        ("host:0", "no valid port"),
        ("host:65536", "no valid port"),
        ("host:abc", "no valid port"),
        ("[::1:9191", "unclosed '['"),
        ("http://host", "no port"),
        ("http://host:abc", "no valid port"),
        ("http://host:99999", "no valid port"),
        ("http://host:0", "no valid port"),
        ("https://host:9191", "does not speak TLS"),
        ("ftp://host:21", "unknown scheme 'ftp'"),
    ],
)
def test_errors_are_one_line_with_a_hint(text: str, hint: str) -> None:
    with pytest.raises(AddressError) as info:
        parse_address(text)
    message = str(info.value)
    assert hint in message
    assert "\n" not in message


def test_cli_bad_address_exits_2_without_traceback(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["watch", "http://host:abc", "--once"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("uwsgitune: http://host:abc: no valid port")
    assert "Traceback" not in err


def test_address_is_frozen_and_hashable() -> None:
    a, b = parse_address("/x.sock"), parse_address("/x.sock")
    assert a == b and hash(a) == hash(b)
    assert isinstance(a, StatsAddress)
