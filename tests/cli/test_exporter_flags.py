"""uwsgi_exporter's flags on `uwsgitune daemon`: aliases with the exporter's defaults;
the flags uwsgitune does not implement are refused by name."""

from __future__ import annotations

import argparse
import subprocess

import pytest

from tests.exporter.test_webconfig import UWSGITUNE
from uwsgitune.cli.daemon import load
from uwsgitune.cli.exporter_flags import go_duration
from uwsgitune.cli.main import build_parser
from uwsgitune.errors import UserError


def parse(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(["daemon", *argv])


def test_exporter_flags_become_the_config() -> None:
    config = load(
        parse(
            "--stats.uri=unix:///run/a.sock",
            "--stats.uri",
            "tcp://127.0.0.1:1717",
            "--stats.timeout=1500ms",
            "--web.listen-address=:9117",
            "--web.listen-address",
            "127.0.0.1:9200",
            "--web.telemetry-path=/uwsgi",
            "--collect.cores",
            "--log.level=warn",
            "--log.format=json",
            "--timeout-offset=0.5",
        )
    )
    d = config.daemon
    assert d.listens == ("0.0.0.0:9117", "127.0.0.1:9200")
    assert (d.telemetry_path, d.collect_cores, d.log_level, d.log_format) == (
        "/uwsgi",
        True,
        "warn",
        "json",
    )
    assert d.scrape_timeout_offset == 0.5
    assert [(i.name, i.stats, i.timeout) for i in config.instance] == [
        ("uwsgi-1", "unix:///run/a.sock", 1.5),
        ("uwsgi-2", "tcp://127.0.0.1:1717", 1.5),
    ]


def test_the_exporters_defaults() -> None:
    exporter = load(parse("--stats.uri=unix:///run/a.sock")).daemon
    assert exporter.listens == ("0.0.0.0:9117",)  # uwsgi_exporter's :9117
    assert (exporter.telemetry_path, exporter.collect_cores, exporter.log_level) == (
        "/metrics",
        False,
        "info",
    )
    assert load(parse("--stats=/run/a.sock")).daemon.listens == ("127.0.0.1:9117",)


@pytest.mark.parametrize(
    ("text", "seconds"), [("5s", 5.0), ("1m30s", 90.0), ("250ms", 0.25), ("2", 2.0)]
)
def test_go_durations(text: str, seconds: float) -> None:
    assert float(go_duration(text)) == seconds


def test_several_stats_with_a_fifo_is_refused() -> None:
    with pytest.raises(UserError, match="--fifo, --override and --latency need a single --stats"):
        load(parse("--stats.uri=/a.sock", "--stats.uri=/b.sock", "--fifo=/f"))


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (
            ["--web.systemd-socket"],
            "--web.systemd-socket: a uwsgi_exporter flag uwsgitune does not support",
        ),
        (["--version"], "--version: a uwsgi_exporter flag"),
        (["--stats.timeout=soon"], "'soon' is not a duration"),
        (["--log.level=trace"], "--log.level: invalid choice"),
        (["--collect.workers"], "unrecognized arguments: --collect.workers"),
        (["--stats.uri=unix:///x", "--web.listen-address=nohost"], "--metrics-listen"),
    ],
)
def test_bad_flags_are_one_line_and_exit_2(argv: list[str], needle: str) -> None:
    out = subprocess.run([UWSGITUNE, "daemon", *argv], capture_output=True, text=True, timeout=180)
    assert out.returncode == 2 and "Traceback" not in out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("uwsgitune: ") and needle in lines[0], lines


def test_only_loopback_counts_as_local() -> None:
    from uwsgitune.exporter.server import ip_loopback

    assert ip_loopback("127.0.0.1") and ip_loopback("::1") and ip_loopback("localhost")
    assert not ip_loopback("0.0.0.0") and not ip_loopback("::") and not ip_loopback("10.1.2.3")
