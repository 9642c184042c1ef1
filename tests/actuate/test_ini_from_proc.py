"""The ini a master was started with, when its ini moved the cwd (`chdir = %d`): the README's
`uwsgi --ini examples/uwsgi.ini` from a checkout runs in examples/, and doctor read
examples/examples/uwsgi.ini ("cannot read") until the launch directory (`PWD`) was tried."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from tests.uwsgi_harness import APP
from uwsgitune.actuate.override import ini_from_proc
from uwsgitune.launch import free_port


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


@pytest.mark.uwsgi
def test_doctor_finds_the_ini_of_a_master_started_as_the_example_says() -> None:
    """A real uWSGI started from a shell as examples/uwsgi.ini says (`uwsgi --ini
    examples/uwsgi.ini` from the checkout, `chdir = %d` in it): doctor reads that ini."""
    work = Path(tempfile.mkdtemp(prefix="uwt-", dir="/tmp"))
    (work / "examples").mkdir()
    override = work / "override.ini"
    override.write_text("[uwsgi]\n")
    ini = work / "examples" / "app.ini"
    ini.write_text(
        "[uwsgi]\nmaster = true\nchdir = %d\n"
        f"http-socket = 127.0.0.1:{free_port()}\nwsgi-file = {APP}\nprocesses = 2\n"
        f"stats = {work}/stats.sock\nmaster-fifo = {work}/fifo\ndisable-logging = true\n"
        f"ini = {override}\n"
    )
    uwsgi = Path(sys.executable).parent / "uwsgi"
    shell = f"cd {work} && exec {uwsgi} --ini examples/app.ini"
    proc = subprocess.Popen(
        ["sh", "-c", shell], stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT
    )
    try:
        deadline = time.monotonic() + 20
        while not (work / "stats.sock").exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert Path(os.readlink(f"/proc/{proc.pid}/cwd")) == work / "examples"  # chdir moved it
        assert ini_from_proc(proc.pid) == ini
        cli = [sys.executable, "-m", "uwsgitune", "doctor", str(work / "stats.sock")]
        out = subprocess.run(cli, capture_output=True, text=True, timeout=60).stdout
        assert f"ok   override: {ini} ends with `ini = {override}`" in out, out
        assert "examples/examples" not in out
    finally:
        try:  # SIGTERM would reload: stop with `q`
            fd = os.open(work / "fifo", os.O_WRONLY | os.O_NONBLOCK)
            os.write(fd, b"q")
            os.close(fd)
        except OSError:
            proc.send_signal(signal.SIGINT)
        proc.wait(timeout=30)
        shutil.rmtree(work, ignore_errors=True)
