"""The restart command, run for real: its exit counts, not its output's end; a group killed
on timeout; output kept bounded; a minimal environment; no exception escapes."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from uwsgitune.actuate import restart
from uwsgitune.actuate.restart import KEEP, RestartCommand, command_env, run_restart

EXTRA = {"UWSGITUNE_LISTEN": "64", "UWSGITUNE_OVERRIDE": "/var/lib/uwsgitune/app.ini"}


def _script(tmp: Path, body: str) -> RestartCommand:
    path = tmp / "restart.sh"
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return RestartCommand((str(path),), timeout=5.0)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie is dead: it waits for init to reap it
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _gone(pid: int, seconds: float = 10.0) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if not _alive(pid):
            return True
        time.sleep(0.05)
    return not _alive(pid)


@pytest.fixture
def pids() -> Iterator[list[int]]:
    """Pids a test's commands left behind: killed at teardown if still there."""
    found: list[int] = []
    yield found
    for pid in found:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def _pid(path: Path) -> int:
    end = time.monotonic() + 10
    while time.monotonic() < end and not path.exists():
        time.sleep(0.05)
    return int(path.read_text())


def test_a_background_child_holding_stdout_is_success_and_left_running(
    tmp_path: Path, pids: list[int]
) -> None:
    """It used to wait for the end of the output, which the child held: "timed out"."""
    child = tmp_path / "child.pid"
    cmd = _script(tmp_path, f"sleep 60 &\necho $! > {child}\necho restarted\nexit 0\n")
    cmd = RestartCommand(cmd.argv, timeout=30.0)
    start = time.monotonic()
    said = run_restart(cmd, EXTRA)
    took = time.monotonic() - start
    pid = _pid(child)
    pids.append(pid)
    assert said is None, said
    assert took < 15, f"waited {took:.1f}s for a background child's output"
    assert _alive(pid), "the background child (maybe the new uWSGI) was killed"


def test_a_hanging_command_has_its_whole_group_killed(tmp_path: Path, pids: list[int]) -> None:
    child = tmp_path / "child.pid"
    body = f"trap '' TERM\nsleep 300 &\necho $! > {child}\necho $$ > {child}.main\nwait\n"
    cmd = RestartCommand(_script(tmp_path, body).argv, timeout=1.0)
    said = run_restart(cmd, EXTRA)
    main, bg = _pid(Path(f"{child}.main")), _pid(child)
    pids.extend([main, bg])
    assert said == "restart command timed out after 1s; its process group was killed"
    assert _gone(main) and _gone(bg), "a process of the command's group was left running"


def test_output_kept_is_bounded_and_the_last_line_is_said(tmp_path: Path) -> None:
    body = "head -c 3000000 /dev/zero | tr '\\0' x\necho\necho 'unit uwsgi@app not found' >&2\n"
    cmd = _script(tmp_path, body + "exit 5\n")
    assert run_restart(cmd, EXTRA) == "restart command exited 5: unit uwsgi@app not found"


def test_output_is_read_while_it_runs_and_capped(tmp_path: Path) -> None:
    """Megabytes of output never block the command (a full pipe would) nor are all kept."""
    r, w = os.pipe()
    with os.fdopen(r, "rb") as reader:
        out = restart._Output([reader])
        os.write(w, b"y" * 60000 + b"\nlast line\x1b[31m\n")
        os.close(w)
        while out.read(0.1):
            pass
        assert all(len(v) <= KEEP for v in out.kept.values())
        assert out.tail() == "last line\\x1b[31m"  # terminal escapes made visible
        out.close()


def test_the_environment_is_minimal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    dump = tmp_path / "env"
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "hunter2")
    monkeypatch.setenv("NOTIFY_SOCKET", "/run/systemd/notify")
    monkeypatch.setenv("PATH", f"relative/bin:{tmp_path}:/usr/bin")
    cmd = _script(tmp_path, f"env > {dump}\n")
    assert run_restart(cmd, EXTRA) is None
    env = dict(line.split("=", 1) for line in dump.read_text().splitlines())
    env.pop("PWD", None)  # the shell sets these itself
    env.pop("SHLVL", None)
    env.pop("_", None)
    assert set(env) <= {"PATH", "HOME", "LANG", "LC_ALL", *EXTRA}
    assert env["UWSGITUNE_LISTEN"] == "64" and env["LC_ALL"] == "C.UTF-8"
    assert env["PATH"].split(":")[:2] == [str(tmp_path), "/usr/bin"]
    assert "/usr/sbin" in env["PATH"].split(":")


def test_command_env_without_path_or_home() -> None:
    env = command_env(EXTRA, {"HOME": "", "TOKEN": "x"})
    assert env["PATH"] == ":".join(restart.SAFE_PATH)
    assert set(env) == {"PATH", "LANG", "LC_ALL", *EXTRA}


def test_failures_are_one_line_never_an_exception(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    missing = RestartCommand((str(tmp_path / "nope"),))
    said = run_restart(missing, EXTRA)
    assert (
        said
        == f"restart command {str(tmp_path / 'nope')!r} failed to run: No such file or directory"
    )
    killed = _script(tmp_path, "kill -9 $$\n")
    assert run_restart(killed, EXTRA) == "restart command was killed by SIGKILL"

    def broken(*_a: object, **_k: object) -> None:
        raise ValueError("embedded null byte")

    monkeypatch.setattr(subprocess, "Popen", broken)
    said = run_restart(RestartCommand(("true",)), EXTRA)
    assert said == "restart command 'true' failed: ValueError: embedded null byte"


def test_an_exception_while_waiting_kills_the_command(
    tmp_path: Path, pids: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Never two restart commands at once: the caller runs it again to roll back."""
    main = tmp_path / "main.pid"
    cmd = _script(tmp_path, f"echo $$ > {main}\nexec sleep 300\n")

    def broken(self: restart._Output, timeout: float) -> int:
        if main.exists() and main.read_text().strip():
            raise MemoryError("no memory")
        return 0

    monkeypatch.setattr(restart._Output, "read", broken)
    said = run_restart(cmd, EXTRA)
    pid = _pid(main)
    pids.append(pid)
    assert said is not None and said.endswith("failed: MemoryError: no memory")
    assert _gone(pid)
