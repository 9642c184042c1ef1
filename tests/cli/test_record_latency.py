"""`record --latency ADDR`: one instance, and a bad or busy address refused before the
recording's file is touched (one line, exit 2)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from uwsgitune.cli.main import main


def test_a_busy_or_bad_address_leaves_the_file_alone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run.jsonl"
    out.write_text("kept\n")
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as taken:
        taken.bind(("127.0.0.1", 0))
        busy = f"127.0.0.1:{taken.getsockname()[1]}"
        assert main(["record", "/x.sock", "-o", str(out), "--latency", busy]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("uwsgitune: --latency: ") and "cannot listen" in line
    assert main(["record", "/x.sock", "-o", str(out), "--latency", "10.0.0.1:9118"]) == 2
    assert "not loopback" in capsys.readouterr().err
    assert out.read_text() == "kept\n"  # neither emptied nor written


def test_one_instance_per_request_log(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["record", "/a.sock", "/b.sock", "-o", str(tmp_path / "r.jsonl")]
    assert main([*argv, "--latency", "127.0.0.1:9"]) == 2
    assert "exactly one ADDR" in capsys.readouterr().err
    assert not (tmp_path / "r.jsonl").exists()
