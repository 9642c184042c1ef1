"""The tuner against a real uWSGI: changes under a bounded non-keepalive load lose nothing;
stale stats get no action; the CLI fails in one line on bad input."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.tuned import applying, audit_of, drive, live, manual
from tests.uwsgi_harness import url
from uwsgitune.cli.main import main
from uwsgitune.launch import UwsgiProcess
from uwsgitune.loadgen import LoadResult, LoadRun
from uwsgitune.tuner import TunerSettings

pytestmark = pytest.mark.uwsgi
FAST = TunerSettings(
    max_workers=6,
    cooldown_up=2,
    cooldown_down=4,
    down_window=4,
    measure_frames=3,
    settle_after_change=1,
)


async def _phases(u: str) -> LoadResult:
    total = LoadResult()
    for clients, seconds in ((6, 10.0), (1, 14.0)):
        r = await LoadRun(u, duration=seconds, timeout=20).closed_loop(clients)
        total.ok, total.errors = total.ok + r.ok, total.errors + r.errors
    return total


def test_tuning_under_load_loses_no_request(
    uwsgi: Callable[..., UwsgiProcess], tmp_path: Path
) -> None:
    proc = uwsgi(**manual(tmp_path / "o.ini", processes=6, initial=1))
    driver, lines = applying(proc, tmp_path, FAST), list[str]()
    result: list[LoadResult] = []
    load = threading.Thread(target=lambda: result.append(asyncio.run(_phases(url(proc, "/io/30")))))
    load.start()
    decisions = drive(driver, 24.5, lines)
    load.join()
    ups = [d for d in decisions if d.action == "up"]
    downs = [d for d in decisions if d.action == "down"]
    assert ups and downs, "\n".join(lines)
    assert result[0].errors == 0 and result[0].ok > 300
    verified = [r for r in audit_of(tmp_path).records() if r.result == "verified"]
    assert len(verified) >= 2
    assert all(1 <= d.desired <= 6 for d in decisions)
    assert all("[" in line and "]" in line for line in lines)


def test_stale_stats_get_no_action(uwsgi: Callable[..., UwsgiProcess], tmp_path: Path) -> None:
    proc = uwsgi(**manual(tmp_path / "o.ini", processes=6, initial=1))
    # Our clock runs 5 s ahead of the polls: every frame is older than two intervals.
    driver = applying(proc, tmp_path, FAST, mono=lambda: time.monotonic() + 5)
    result: list[LoadResult] = []
    load = threading.Thread(
        target=lambda: result.append(
            asyncio.run(LoadRun(url(proc, "/io/30"), duration=6).closed_loop(6))
        )
    )
    load.start()
    decisions = drive(driver, 6)
    load.join()
    assert {d.code for d in decisions} <= {"stale"}
    assert live(proc) == 1 and not list(audit_of(tmp_path).records())


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        (["--fifo", "/nonexistent/fifo"], "no such file"),
        (["--fifo", "REGULAR"], "not a FIFO"),
        (
            ["--fifo", "REGULAR", "--min-workers", "5", "--max-workers", "2"],
            "--min-workers 5 > --max-workers 2",
        ),
        (["--fifo", "REGULAR", "--restart-command", "true"], "needs --override"),
        (
            ["--fifo", "REGULAR", "--override", "O", "--restart-command", "no-such-cmd -x"],
            "'no-such-cmd' not found",
        ),
        (
            ["--fifo", "REGULAR", "--override", "O", "--restart-command", "'open"],
            "No closing quotation",
        ),
    ],
)
def test_cli_bad_input_is_one_line(
    extra: list[str], needle: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "regular").write_text("")
    args = [a.replace("REGULAR", str(tmp_path / "regular")) for a in extra]
    assert main(["tune", str(tmp_path / "stats.sock"), *args]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and needle in err[0] and "Traceback" not in err[0]


def test_cli_doctor_and_observe(
    uwsgi: Callable[..., UwsgiProcess], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ready = uwsgi(**manual(tmp_path / "o.ini"))
    plain = uwsgi()
    assert main(["doctor", ready.stats, "--override", str(tmp_path / "o.ini")]) == 0
    out = capsys.readouterr().out
    assert "ready" in out and "FAIL" not in out
    assert main(["doctor", plain.stats]) == 1
    out = capsys.readouterr().out
    assert "add: cheaper-algo = manual" in out and "add: ini = " in out
    assert (
        main(
            [
                "tune",
                ready.stats,
                "--fifo",
                ready.fifo,
                "--duration",
                "2.5",
                "--audit",
                str(tmp_path / "a.jsonl"),
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "observe: wait" in out or "observe: hold" in out
    assert live(ready) == 2
