"""The ini a master was started with, when its ini moved the cwd (`chdir = %d`): the README's
`uwsgi --ini examples/uwsgi.ini` from a checkout runs in examples/, and doctor read
examples/examples/uwsgi.ini ("cannot read") until the launch directory (`PWD`) was tried."""

from __future__ import annotations

import os
from pathlib import Path

from uwsgitune.actuate.procini import ini_from_proc


def _proc(tmp: Path, argv: list[str], cwd: Path, env: dict[str, str]) -> Path:
    base = tmp / "proc" / "42"
    base.mkdir(parents=True)
    (base / "cmdline").write_bytes(b"\0".join(a.encode() for a in argv) + b"\0")
    os.symlink(cwd, base / "cwd")
    (base / "environ").write_bytes(b"\0".join(f"{k}={v}".encode() for k, v in env.items()))
    return tmp / "proc"


def test_a_relative_ini_is_found_from_where_uwsgi_was_started(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / "examples").mkdir(parents=True)
    (repo / "examples" / "uwsgi.ini").write_text("[uwsgi]\nchdir = %d\n")
    argv = ["uwsgi", "--ini", "examples/uwsgi.ini"]
    proc = _proc(tmp_path, argv, repo / "examples", {"HOME": "/root", "PWD": str(repo)})
    assert ini_from_proc(42, proc) == repo / "examples" / "uwsgi.ini"


def test_the_cwd_comes_first_and_names_the_path_when_nothing_exists(tmp_path: Path) -> None:
    app = tmp_path / "app"
    app.mkdir()
    (app / "app.ini").write_text("[uwsgi]\n")
    proc = _proc(tmp_path, ["uwsgi", "app.ini"], app, {"PWD": "/nowhere"})
    assert ini_from_proc(42, proc) == app / "app.ini"
    (app / "app.ini").unlink()
    assert ini_from_proc(42, proc) == app / "app.ini"  # the error then names this path
