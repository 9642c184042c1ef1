"""A sweep's results go only into a directory only we write (issue 36, 2): a new one made
0700, or an existing `--out` that is a real, empty directory of ours nobody else can write;
its files are created O_EXCL|O_NOFOLLOW. Root running `sweep` from /tmp can no longer be
made to write through a planted name. Real directories and links."""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

import pytest

from uwsgitune.cli import sweep as sweep_cli
from uwsgitune.cli.main import main
from uwsgitune.errors import UwsgituneError

NOBODY = 65534
FIX = (
    "refused; a sweep writes only into a new directory, or an empty one of yours that "
    "nobody else can write: give another --out"
)
DOC = {"recommendation": 3}
root_only = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to chown")


def _mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def _refused(out: Path) -> str:
    with pytest.raises(UwsgituneError) as err:
        sweep_cli._write(out, DOC, "<svg/>")
    return str(err.value)


@pytest.fixture
def victim(tmp_path: Path) -> Path:
    v = tmp_path / "passwd"
    v.write_text("root:x:0:0::/root:/bin/sh\n")
    return v


def test_the_default_directory_is_new_and_0700_and_a_planted_name_is_skipped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, victim: Path
) -> None:
    """Root in a shared /tmp: the name it would use now is already there (a directory whose
    sweep.json links to /etc/passwd). It is left alone; the results go to a new `-2`."""
    shared = tmp_path / "tmp"
    shared.mkdir(mode=0o1777)
    shared.chmod(0o1777)
    monkeypatch.chdir(shared)
    when = time.mktime((2025, 11, 26, 12, 0, 0, 0, 0, -1))
    monkeypatch.setattr(time, "time", lambda: when)
    planted = shared / "uwsgitune-sweep-20251126-120000"
    planted.mkdir(mode=0o777)
    (planted / "sweep.json").symlink_to(victim)
    sweep_cli._write(None, DOC, "<svg/>")
    assert victim.read_text() == "root:x:0:0::/root:/bin/sh\n"
    assert sorted(os.listdir(planted)) == ["sweep.json"]
    made = shared / "uwsgitune-sweep-20251126-120000-2"
    assert _mode(made) == 0o700 and sorted(os.listdir(made)) == ["sweep.json", "sweep.svg"]
    assert '"recommendation": 3' in (made / "sweep.json").read_text()


def test_an_existing_out_that_is_not_empty_is_refused(tmp_path: Path, victim: Path) -> None:
    out = tmp_path / "out"
    out.mkdir(mode=0o700)
    (out / "sweep.json").symlink_to(victim)
    assert _refused(out) == f"{out} is not empty: {FIX}"
    assert victim.read_text() == "root:x:0:0::/root:/bin/sh\n"


def test_an_out_that_is_a_symlink_is_refused(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    out = tmp_path / "out"
    out.symlink_to(real)
    assert _refused(out) == f"{out} is a symlink: {FIX}"
    assert not list(real.iterdir())


@pytest.mark.parametrize("mode", [0o777, 0o1777, 0o770])
def test_an_out_others_can_write_is_refused(tmp_path: Path, mode: int) -> None:
    out = tmp_path / "out"
    out.mkdir()
    out.chmod(mode)
    assert _refused(out) == f"{out} is writable by group or others (mode {mode:04o}): {FIX}"
    assert not list(out.iterdir())


@root_only
def test_an_out_another_user_owns_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir(mode=0o755)
    os.chown(out, NOBODY, NOBODY)
    assert _refused(out) == f"{out} belongs to uid {NOBODY}, not to uid 0: {FIX}"
    assert not list(out.iterdir())


def test_a_bad_out_is_said_before_the_instance_is_touched(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Checked first: a sweep of many minutes never ends in a refusal to write."""
    out = tmp_path / "out"
    out.mkdir(mode=0o700)
    (out / "old.json").write_text("{}")
    argv = ["sweep", "--url", "http://127.0.0.1:1/", "--stats", str(tmp_path / "none.sock")]
    argv += ["--fifo", str(tmp_path / "none.fifo"), "--workers", "1..2", "--out", str(out)]
    assert main(argv) == 2
    assert capsys.readouterr().err.splitlines() == [f"uwsgitune: {out} is not empty: {FIX}"]
