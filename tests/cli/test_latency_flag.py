"""`--latency ADDR` on watch and tune: a bad or busy address is one line naming the fix, exit
2, before anything is polled."""

from __future__ import annotations

import socket

import pytest

from uwsgitune.cli.main import main


@pytest.mark.parametrize(
    ("addr", "says"),
    [
        ("/run/uwsgi/log.sock", "a stalled reader would block uWSGI's master"),
        ("10.0.0.1:9118", "not loopback"),
        ("[::1]:9118", "IPv4 only"),
        ("127.0.0.1:x", "the port must be a number"),
    ],
)
def test_a_bad_address_is_one_line(
    addr: str, says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    for argv in (
        ["watch", "/x.sock", "--once", "--latency", addr],
        ["tune", "/x.sock", "--fifo", "/x.fifo", "--latency", addr],
    ):
        assert main(argv) == 2
        (line,) = capsys.readouterr().err.strip().splitlines()
        assert line.startswith("uwsgitune: --latency: ") and says in line
        assert "127.0.0.1:9118" in line  # the fix, named


def test_a_busy_port_is_named_and_one_address_per_instance(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as taken:
        taken.bind(("127.0.0.1", 0))
        busy = f"127.0.0.1:{taken.getsockname()[1]}"
        assert main(["watch", "/x.sock", "--once", "--latency", busy]) == 2
        (line,) = capsys.readouterr().err.strip().splitlines()
        assert "cannot listen" in line and "choose another port" in line
    assert main(["watch", "/a.sock", "/b.sock", "--plain", "--latency", "127.0.0.1:9"]) == 2
    assert "exactly one ADDR" in capsys.readouterr().err
    assert main(["watch", "--replay", "/x.jsonl", "--latency", "127.0.0.1:9"]) == 2
    assert "a recording holds its own" in capsys.readouterr().err
