"""`uwsgitune recommend`: replay, JSON, exit statuses, one-line errors, and a live run."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from uwsgitune.cli.main import main
from uwsgitune.launch import UwsgiProcess

RECORDINGS = Path(__file__).resolve().parent.parent / "data" / "recordings"


def rec(name: str) -> str:
    return str(RECORDINGS / f"{name}.jsonl")


def test_healthy_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["recommend", "--replay", rec("healthy")]) == 0
    assert "no findings" in capsys.readouterr().out


def test_warning_exits_1() -> None:
    assert main(["recommend", "--replay", rec("listen_bursts")]) == 1


def test_critical_exits_2_and_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["recommend", "--replay", rec("listen_capacity_short"), "--json"]) == 2
    doc = json.loads(capsys.readouterr().out)
    (inst,) = doc["instances"]
    ids = [f["id"] for f in inst["findings"]]
    assert "listen_queue.capacity_short" in ids and doc["unobserved"] == []


def test_text_shows_reason_recommendation_evidence(capsys: pytest.CaptureFixture[str]) -> None:
    main(["recommend", "--replay", rec("oversubscribed_cpu")])
    out = capsys.readouterr().out
    assert "WARN oversubscribed_cpu" in out and "do: processes 10 → 3 (reload): " in out
    assert "evidence (" in out


def test_window_limits_the_replay(capsys: pytest.CaptureFixture[str]) -> None:
    main(["recommend", "--replay", rec("listen_capacity_short"), "--window", "10", "--json"])
    (f,) = json.loads(capsys.readouterr().out)["instances"][0]["findings"]
    assert f["window"]["frames"] <= 11


def test_ini_facts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "tune.ini").write_text("[uwsgi]\noffload-threads = 2\n")
    (tmp_path / "app.ini").write_text("[uwsgi]\nprocesses = 2\nini = tune.ini\n")
    args = ["recommend", "--replay", rec("static_files"), "--ini", str(tmp_path / "app.ini")]
    main([*args, "--json"])
    findings = json.loads(capsys.readouterr().out)["instances"][0]["findings"]
    static = next(f for f in findings if f["id"] == "static_files")
    assert static["recommendation"]["setting"] == "outside:nginx"


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["recommend"], "no stats address"),
        (["recommend", "/tmp/x.sock", "--replay", "f.jsonl"], "not both"),
        (["recommend", "--replay", "/nonexistent/r.jsonl"], "cannot open"),
        (["recommend", "--replay", rec("healthy"), "--ini", "/nonexistent.ini"], "cannot read"),
    ],
)
def test_bad_input_is_one_line(
    argv: list[str], needle: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert needle in err and err.count("\n") == 1 and "Traceback" not in err


def test_bad_recording_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text("not json\n")
    assert main(["recommend", "--replay", str(bad)]) == 2
    assert "bad.jsonl:1" in capsys.readouterr().err


def test_unreachable_exits_3_and_says_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sock = str(tmp_path / "none.sock")
    assert main(["recommend", sock, "--window", "0.3", "--interval", "0.1"]) == 3
    why = f"no socket at {sock}; is uWSGI running with `stats = {sock}`?"
    assert f"{sock}: could not observe (no two good polls in the window); last: " in (
        out := capsys.readouterr().out
    )
    assert why in out and out.count("\n") == 1


@pytest.mark.uwsgi
def test_an_instance_lost_in_the_window_is_said_with_its_last_error(
    uwsgi: Callable[..., UwsgiProcess], capsys: pytest.CaptureFixture[str]
) -> None:
    proc = uwsgi(processes=1)
    stopper = threading.Timer(0.5, proc.stop)
    stopper.start()
    try:
        code = main(["recommend", proc.stats, "--window", "5", "--interval", "2.5"])
    finally:
        stopper.join()
    out, err = capsys.readouterr()
    assert code == 3, err
    assert f"{proc.stats}: could not observe (no two good polls in the window); last: " in out, err


@pytest.mark.uwsgi
def test_live_instance(
    uwsgi: Callable[..., UwsgiProcess], capsys: pytest.CaptureFixture[str]
) -> None:
    proc = uwsgi(processes=2)
    assert main(["recommend", proc.stats, "--window", "3", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["instances"][0]["source"] == proc.stats and doc["unobserved"] == []
