"""An ini that is not UTF-8 (a Latin-1 comment, a stray byte): every reader says so in one
line naming the file, the byte and the fix; nothing is written, no traceback (issue 14, 5)."""

from __future__ import annotations

from pathlib import Path

import pytest

from uwsgitune.actuate.override import (
    IniEncodingError,
    IniError,
    Override,
    OverrideError,
    SetupError,
    load_config,
    read_keys,
    read_override,
    write_atomic,
)
from uwsgitune.actuate.reload import Limits, plan
from uwsgitune.actuate.restart import ListenApplier, RestartCommand
from uwsgitune.cli.main import main

LATIN1 = b"[uwsgi]\nprocesses = 4\n; caf\xe9\n"
WHERE = "not UTF-8 (byte 0xe9 at offset 27); save it as UTF-8"


def _files(tmp_path: Path, ini: bytes, override: bytes = b"[uwsgi]\n") -> tuple[Path, Path]:
    user, ov = tmp_path / "app.ini", tmp_path / "ov.ini"
    user.write_bytes(ini + b"ini = ov.ini\n")
    ov.write_bytes(override)
    return user, ov


def test_user_ini_and_its_includes_are_named(tmp_path: Path) -> None:
    user, _ = _files(tmp_path, LATIN1)
    with pytest.raises(IniEncodingError) as err:
        load_config(user)
    assert str(err.value) == f"{user}: {WHERE}"
    assert isinstance(err.value, IniError) and isinstance(err.value, SetupError)
    user, ov = _files(tmp_path, b"[uwsgi]\n", b"[uwsgi]\n;\xff\n")
    with pytest.raises(IniEncodingError, match=f"^{ov}: not UTF-8 \\(byte 0xff at offset 9\\)"):
        load_config(user)


def test_override_not_utf8_is_refused_and_kept(tmp_path: Path) -> None:
    _, ov = _files(tmp_path, b"[uwsgi]\n", b"[uwsgi]\nlisten = 1024 ; \xe9\n")
    old = ov.read_bytes()
    with pytest.raises(IniEncodingError, match=f"^{ov}: not UTF-8"):
        read_keys(ov)  # not {}: a rewrite from {} would drop its listen
    assert read_override(ov) is None
    with pytest.raises(IniEncodingError, match=f"^{ov}: not UTF-8"):
        write_atomic(ov, "[uwsgi]\nprocesses = 4\n")
    assert ov.read_bytes() == old and sorted(p.name for p in tmp_path.iterdir()) == [
        "app.ini",
        "ov.ini",
    ]


def test_doctor_exits_2_with_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    user, ov = _files(tmp_path, LATIN1)
    code = main(["doctor", "127.0.0.1:1", "--ini", str(user), "--override", str(ov)])
    err = capsys.readouterr().err
    assert code == 2 and err == f"uwsgitune: {user}: {WHERE}\n"


def test_recommend_ini_exits_2_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    user, _ = _files(tmp_path, LATIN1)
    code = main(["recommend", "127.0.0.1:1", "--ini", str(user)])
    assert code == 2 and capsys.readouterr().err == f"uwsgitune: {user}: {WHERE}\n"


def test_reload_plan_is_a_setup_stop(tmp_path: Path) -> None:
    user, ov = _files(tmp_path, LATIN1)
    with pytest.raises(SetupError) as err:  # the tuner stops applying, says why, once
        plan(user, ov, Override(4, 1, 2), Limits(4096))
    assert str(err.value) == f"{user}: {WHERE}"


def test_listen_plan_is_refused(tmp_path: Path) -> None:
    user, ov = _files(tmp_path, LATIN1)
    applier = ListenApplier(ov, user, RestartCommand(("true",)), lambda: None)  # type: ignore[arg-type, return-value]
    with pytest.raises(OverrideError) as err:
        applier.plan(1024, 4096)
    assert str(err.value) == f"{user}: {WHERE}"
