"""`tune --latency-target p99=250ms`: read robustly, refused in one line naming the flag and
the fix (exit 2, before anything is polled), and the same target for the tuner and the
findings."""

from __future__ import annotations

import pytest

from uwsgitune.cli.main import build_parser, main
from uwsgitune.cli.tuner_flags import settings_from
from uwsgitune.core.latencytarget import LatencyTarget

TUNE = ["tune", "/x.sock", "--fifo", "/x.fifo", "--latency", "127.0.0.1:9118"]


@pytest.mark.parametrize(
    ("text", "want"),
    [("p99=250ms", LatencyTarget("p99", 250.0)), ("p99=0.25s", LatencyTarget("p99", 250.0))],
)
def test_the_target_reaches_the_tuners_settings(text: str, want: LatencyTarget) -> None:
    args = build_parser().parse_args([*TUNE, "--latency-target", text])
    assert settings_from(args, 8).latency_target == want
    plain = build_parser().parse_args(TUNE)
    assert settings_from(plain, 8).latency_target is None


@pytest.mark.parametrize("text", ["p99=fast", "250ms", "p50=10ms", "p99=-1s"])
def test_a_bad_target_is_one_line_naming_the_flag_and_the_form(
    text: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*TUNE, "--latency-target", text]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("uwsgitune: --latency-target: ")
    assert line.endswith("give it as p99=250ms or p95=0.25s")


def test_a_target_without_the_request_log_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tune", "/x.sock", "--fifo", "/x.fifo", "--latency-target", "p99=250ms"]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "--latency-target needs --latency HOST:PORT" in line


def test_the_daemon_takes_the_same_flag_beside_stats(capsys: pytest.CaptureFixture[str]) -> None:
    from uwsgitune.cli.daemon import _from_flags

    args = build_parser().parse_args(
        [
            "daemon",
            "--stats",
            "/x.sock",
            "--latency",
            "127.0.0.1:9118",
            "--latency-target",
            "p95=1s",
        ]
    )
    (inst,) = _from_flags(args).instance
    assert inst.tuner_settings(4).latency_target == LatencyTarget("p95", 1000.0)
    assert inst.rule_settings().latency_target == LatencyTarget("p95", 1000.0)
    assert main(["daemon", "--stats", "/x.sock", "--latency-target", "p99=1s"]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "--latency-target needs --latency HOST:PORT" in line
