"""Override rendering, validation, atomic writes, the ini loader, doctor checks, audit resume."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from uwsgitune.actuate.audit import AuditLog, resume
from uwsgitune.actuate.doctor import DoctorFacts, checks
from uwsgitune.actuate.override import (
    Override,
    OverrideError,
    load_config,
    problems,
    read_override,
    restore,
    validate,
    write_atomic,
)
from uwsgitune.actuate.reload import Limits, check_include, plan
from uwsgitune.tuner import TunerState
from uwsgitune.tuner.result import AuditRecord

OK = {"processes": "8", "cheaper": "1", "cheaper-initial": "2", "cheaper-algo": "manual"}


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        ({"cheaper": "8"}, "cheaper = 8 >= processes = 8"),
        ({"cheaper": "0"}, "cheaper mode needs cheaper >= 1"),
        ({"listen": "5000"}, "listen = 5000 > somaxconn = 4096"),
        ({"cheaper-algo": "spare2"}, "unknown"),
        ({"cheaper-initial": "9"}, "outside"),
        ({"processes": "x"}, "not a number"),
    ],
)
def test_problems_name_what_uwsgi_would_refuse(change: dict[str, str], needle: str) -> None:
    assert problems(OK, somaxconn=4096) == []
    found = problems({**OK, **change}, somaxconn=4096)
    assert any(needle in p for p in found), found


def test_memory_budget_and_unknown_somaxconn() -> None:
    assert problems(OK, somaxconn=4096, mem_per_worker=100 * 2**20, memory_budget=150 * 2**20)
    assert problems(OK, somaxconn=None)
    with pytest.raises(OverrideError, match="cheaper = 3 >= processes = 3"):
        validate({"listen": "100"}, Override(3, 3, 3), somaxconn=4096)


def test_atomic_write_keeps_previous_and_restores(tmp_path: Path) -> None:
    path = tmp_path / "ov.ini"
    write_atomic(path, Override(8, 1, 2).render())
    assert not (tmp_path / "ov.ini.prev").exists()
    write_atomic(path, Override(8, 1, 5).render())
    assert read_override(path) == Override(8, 1, 5)
    assert read_override(tmp_path / "ov.ini.prev") == Override(8, 1, 2)
    assert restore(path)
    assert read_override(path) == Override(8, 1, 2)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ov.ini", "ov.ini.prev"]  # no temp left


def test_load_config_follows_includes_last_wins(tmp_path: Path) -> None:
    (tmp_path / "ov.ini").write_text("[uwsgi]\nprocesses = 6\n")
    user = tmp_path / "app.ini"
    user.write_text(
        "[uwsgi]\nprocesses = 4\nlisten = 64\n; note\n[other]\nx = 1\n[uwsgi]\nini = ov.ini\n"
    )
    cfg = load_config(user)
    assert cfg["processes"] == "6" and cfg["listen"] == "64" and "x" not in cfg
    check_include(user, tmp_path / "ov.ini")
    with pytest.raises(OverrideError, match="does not end with"):
        check_include(user, tmp_path / "other.ini")


def test_plan_refuses_without_the_include_or_the_ini(tmp_path: Path) -> None:
    user = tmp_path / "app.ini"
    user.write_text("[uwsgi]\nprocesses = 4\n")
    with pytest.raises(OverrideError, match="pass --ini"):
        plan(None, tmp_path / "ov.ini", Override(8, 1, 2), Limits(4096))
    with pytest.raises(OverrideError, match="add it as its last line"):
        plan(user, tmp_path / "ov.ini", Override(8, 1, 2), Limits(4096))


def test_doctor_checks_say_what_to_add() -> None:
    facts = DoctorFacts(
        address="/s.sock",
        stats_error="refused",
        fifo=None,
        config={"listen": "8000"},
        ini="/etc/app.ini",
        somaxconn=4096,
        memory_report=False,
    )
    by = {c.name: c for c in checks(facts)}
    assert by["stats"].ok is False and "stats =" in by["stats"].fix
    assert by["fifo"].ok is False and "master-fifo" in by["fifo"].fix
    assert by["cheaper"].ok is False and "cheaper-algo = manual" in by["cheaper"].fix
    assert by["memory-report"].ok is False and by["memory-report"].fix == "memory-report = true"
    assert by["override"].ok is False and "ini = " in by["override"].fix
    assert by["listen"].ok is False and "listen = 4096" in by["listen"].fix
    good = DoctorFacts(
        address="/s",
        master_pid=1,
        fifo="/f",
        fifo_read=True,
        memory_report=True,
        config={"cheaper": "1", "cheaper-algo": "manual"},
        somaxconn=4096,
    )
    ok = {c.name: c.ok for c in checks(good)}
    assert ok["fifo"] and ok["cheaper"] and ok["memory-report"] and ok["listen"]


def test_audit_survives_restarts_and_resumes(tmp_path: Path) -> None:
    log = AuditLog(tmp_path / "audit.jsonl")
    log.append(AuditRecord("change", 1000.0, "a", "apply", via="fifo", result="sent"))
    log.append(AuditRecord("change", 1100.0, "a", "apply", via="reload", result="verified"))
    log.append(AuditRecord("change", 1150.0, "b", "apply", via="fifo", result="sent"))
    log.append(AuditRecord("stop", 1200.0, "a", "apply", reason="reload failed: x"))
    with log.path.open("a") as f:
        f.write('{"torn": ')  # a crash mid-line
    records = list(AuditLog(log.path).records("a"))
    assert len(records) == 3 and all(json.dumps(r.to_json()) for r in records)
    st, stopped = resume(records, TunerState(), now_wall=1300.0, now_mono=50.0)
    assert st.changes == (-250.0, -150.0) and st.last_change == -150.0 and st.last_reload == -150.0
    assert stopped == "reload failed: x"
    log.append(AuditRecord("resume", 1250.0, "a", "apply"))
    assert resume(list(log.records("a")), TunerState(), 1300.0, 50.0)[1] is None
