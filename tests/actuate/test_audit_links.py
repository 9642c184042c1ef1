"""A root daemon appends to its audit log in a state directory uWSGI's user may write (issue
36, 1): a link planted at the log's name never makes it write (or read) another file, and a
log someone else owns is not resumed from. Real files and links; the app's user is 65534."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support.tuned import manual
from uwsgitune.actuate.audit import AuditError, AuditLog
from uwsgitune.launch import UwsgiProcess
from uwsgitune.tuner.result import AuditRecord

NOBODY = 65534
SUDOERS = b"root ALL=(ALL:ALL) ALL\n"
RECORD = AuditRecord("stop", 1.0, "app", "apply", reason="reload failed: x")
root_only = pytest.mark.skipif(os.geteuid() != 0, reason="needs root: the attack is on root")


@pytest.fixture
def state() -> Iterator[Path]:
    """The unit's StateDirectory: nobody's, 0755, and a root 0440 file outside it."""
    top = Path(tempfile.mkdtemp(prefix="uwt-audit-", dir="/tmp"))
    (top / "state").mkdir(mode=0o755)
    os.chown(top / "state", NOBODY, NOBODY)
    (top / "sudoers").write_bytes(SUDOERS)
    (top / "sudoers").chmod(0o440)
    try:
        yield top / "state"
    finally:
        shutil.rmtree(top)


def _line(path: Path, why: str) -> str:
    who = f"uid {os.geteuid()} or root" if os.geteuid() else "root"
    return (
        f"audit log {path} {why}: refused; it must be a regular file with one name, owned by "
        f"{who} (a link could make uwsgitune write anywhere): give the real file as the "
        "audit log, or move it away to start a new history"
    )


@root_only
def test_a_log_linked_to_a_sudoers_file_is_neither_written_nor_read(state: Path) -> None:
    sudoers, log = state.parent / "sudoers", state / "app.audit.jsonl"
    log.symlink_to(sudoers)
    with pytest.raises(AuditError) as err:
        AuditLog(log).append(RECORD)
    assert str(err.value) == _line(log, f"is a symlink (to {sudoers})")
    with pytest.raises(AuditError) as err:
        list(AuditLog(log).records())
    assert str(err.value) == _line(log, f"is a symlink (to {sudoers})")
    assert sudoers.read_bytes() == SUDOERS and log.is_symlink()


@root_only
def test_a_hard_linked_log_is_refused(state: Path) -> None:
    sudoers, log = state.parent / "sudoers", state / "app.audit.jsonl"
    os.link(sudoers, log)
    with pytest.raises(AuditError) as err:
        AuditLog(log).append(RECORD)
    assert str(err.value).startswith(f"audit log {log} has 2 hard links ")
    assert sudoers.read_bytes() == SUDOERS


@root_only
def test_a_log_the_apps_user_owns_is_not_resumed_from_nor_written(state: Path) -> None:
    """A history someone else wrote (a `stop`, or an hour of changes) would steer root's
    tuner: refused, and their file gets nothing from root."""
    log = state / "app.audit.jsonl"
    log.write_text('{"event": "stop", "t": 1.0, "instance": "app", "mode": "apply"}\n')
    os.chown(log, NOBODY, NOBODY)
    before = log.read_bytes()
    for act in (lambda: AuditLog(log).append(RECORD), lambda: list(AuditLog(log).records())):
        with pytest.raises(AuditError) as err:
            act()
        assert str(err.value) == _line(log, f"belongs to uid {NOBODY}, not to root")
    assert log.read_bytes() == before


@pytest.mark.uwsgi
def test_tune_with_a_linked_audit_log_says_so_in_one_line(
    uwsgi: Callable[..., UwsgiProcess], tmp_path: Path
) -> None:
    proc = uwsgi(**manual(tmp_path / "override.ini", processes=2, initial=1))
    victim, audit = tmp_path / "victim", tmp_path / "audit.jsonl"
    victim.write_bytes(SUDOERS)
    audit.symlink_to(victim)
    argv = [str(Path(sys.executable).parent / "uwsgitune"), "tune", proc.stats, "--fifo"]
    argv += [proc.fifo, "--mode", "apply", "--audit", str(audit), "--duration", "1"]
    env = {**os.environ, "UWSGITUNE_LOCK_DIR": str(tmp_path / "locks")}
    out = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=30)
    assert out.returncode == 1, out
    assert out.stderr.splitlines() == [f"uwsgitune: {_line(audit, f'is a symlink (to {victim})')}"]
    assert victim.read_bytes() == SUDOERS
