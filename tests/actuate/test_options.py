"""Where `lazy` is on for a master (its ini, its command line, its environment), read as
uWSGI reads a boolean option; and the setup error a reload plan raises under it, before
anything is written."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.actuate.test_quiesce import _proc
from uwsgitune.actuate.doctor import DoctorFacts, checks
from uwsgitune.actuate.override import Override, SetupError, flag_on, lazy_where, master_options
from uwsgitune.actuate.reload import Limits, plan


def test_a_flag_is_on_unless_false_off_no_or_0() -> None:
    for value in ("", "1", "true", "True", "yes", "on", " 1 ", "anything"):
        assert flag_on(value), value
    for value in ("0", "false", "FALSE", "off", "Off", "no", " no "):
        assert not flag_on(value), value


def test_master_options_read_the_command_line_and_the_environment(tmp_path: Path) -> None:
    proc = _proc(
        tmp_path,
        ["uwsgi", "--ini", "app.ini", "--lazy", "--subscribe-to=127.0.0.1:7000:app", "app.ini"],
        ["PATH=/bin", "UWSGI_CHEAPER_ALGO=manual", "UWSGI_PROCESSES=8"],
    )
    got = master_options(42, proc)
    assert got == {
        "ini": ("", "--ini"),  # its value is the next word, which is not an option
        "lazy": ("", "--lazy"),
        "subscribe-to": ("127.0.0.1:7000:app", "--subscribe-to"),
        "cheaper-algo": ("manual", "UWSGI_CHEAPER_ALGO"),
        "processes": ("8", "UWSGI_PROCESSES"),
    }
    assert master_options(43, proc) is None  # no such master


def test_lazy_is_found_where_it_is_on_and_only_there(tmp_path: Path) -> None:
    plain = _proc(tmp_path, ["uwsgi", "--ini", "app.ini", "--lazy-apps"], ["PATH=/bin"])
    assert lazy_where({"lazy-apps": "true", "processes": "8"}, 42, plain) is None
    assert lazy_where({"lazy": "false"}, 42, plain) is None
    assert lazy_where({"lazy": "true"}, 42, plain) == "`lazy` in its ini"
    assert lazy_where({"lazy": ""}, 42, plain) == "`lazy` in its ini"  # a bare `lazy =`
    assert lazy_where(None, 43, plain) is None  # nothing readable: not known to be on
    assert lazy_where({}, 0, plain) is None  # no master
    flag = _proc(tmp_path, ["uwsgi", "--lazy"], [])
    assert lazy_where({}, 42, flag) == "`--lazy` on master 42"
    env = _proc(tmp_path, ["uwsgi"], ["UWSGI_LAZY=1"])
    assert lazy_where({}, 42, env) == "`UWSGI_LAZY` on master 42"
    off = _proc(tmp_path, ["uwsgi"], ["UWSGI_LAZY=0"])
    assert lazy_where({}, 42, off) is None


def test_a_reload_is_planned_under_lazy_never(tmp_path: Path) -> None:
    override = tmp_path / "ov.ini"
    override.write_text("[uwsgi]\n")
    user = tmp_path / "app.ini"
    user.write_text(f"[uwsgi]\nprocesses = 4\ncheaper = 1\nlazy = true\nini = {override}\n")
    with pytest.raises(SetupError, match=r"`lazy` in its ini: .* `lazy-apps = true`"):
        plan(user, override, Override(8, 1, 2), Limits(4096))
    assert override.read_text() == "[uwsgi]\n"
    user.write_text(f"[uwsgi]\nprocesses = 4\ncheaper = 1\nlazy-apps = true\nini = {override}\n")
    assert plan(user, override, Override(8, 1, 2), Limits(4096))["lazy-apps"] == "true"


def test_doctor_fails_the_reload_check_under_lazy_and_names_lazy_apps() -> None:
    base = DoctorFacts(address="/s", master_pid=7, config={"processes": "4"})
    assert {c.name: c.ok for c in checks(base)}["reload"] is True
    lazy = DoctorFacts(address="/s", master_pid=7, config={"lazy": "1"}, lazy="`lazy` in its ini")
    check = {c.name: c for c in checks(lazy)}["reload"]
    assert check.ok is False and "never reads the ini again" in check.detail
    assert check.fix.startswith("lazy-apps = true")
    assert {c.name: c.ok for c in checks(DoctorFacts(address="/s"))}["reload"] is None
