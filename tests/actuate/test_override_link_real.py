"""An override that configuration management installed as a symlink, against a real uWSGI
and `uwsgitune tune --mode apply` (issue 36, 1): refused with one line that says why and
what to do instead, the instance untouched (no reload, the same workers, the link and its
target as they were); the fix it names (the link's target as the override) then applies."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.tuned import doc, wait_for
from uwsgitune.launch import UwsgiProcess

pytestmark = pytest.mark.uwsgi
UWSGITUNE = str(Path(sys.executable).parent / "uwsgitune")


def _tune(proc: UwsgiProcess, override: Path, tmp_path: Path, seconds: int, *more: str) -> str:
    """`tune --mode apply` for `seconds`, with a floor above the 2 workers `processes` allows:
    its first decision is a reload to 3 (through the override). Its output."""
    argv = [UWSGITUNE, "tune", proc.stats, "--fifo", proc.fifo, "--override", str(override)]
    argv += ["--ini", str(proc.ini), "--mode", "apply", "--min-workers", "3", "--max-workers"]
    argv += ["4", "--interval", "0.5", "--audit", str(tmp_path / "audit.jsonl")]
    argv += ["--duration", str(seconds), *more]
    env = {**os.environ, "UWSGITUNE_LOCK_DIR": str(tmp_path / "locks")}
    out = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=seconds + 60)
    assert out.returncode == 0 and "Traceback" not in out.stderr, out
    return out.stdout


def test_a_symlinked_override_is_refused_in_one_line_and_the_instance_untouched(
    uwsgi: Callable[..., UwsgiProcess], tmp_path: Path
) -> None:
    managed, state = tmp_path / "managed", tmp_path / "state"
    managed.mkdir()
    state.mkdir()
    target, link = managed / "app.ini", state / "app.ini"
    target.write_text("[uwsgi]\n")
    link.symlink_to(target)  # what configuration management installed
    proc = uwsgi(processes=2, cheaper=1, cheaper_initial=2, cheaper_algo="manual", ini=str(link))
    before = doc(proc)
    pids = {w.pid for w in before.workers}
    out = _tune(proc, link, tmp_path, 6)
    line = (
        f"{link} is a symlink (to {target}): refused; the override must be a regular file with "
        "one name (a link could point root at any file): install it as one, or give the "
        "link's target as the override"
    )
    stops = [s for s in out.splitlines() if "STOPPED APPLYING" in s]
    assert len(stops) == 1 and line in stops[0], out
    after = doc(proc)
    assert after.pid == before.pid and {w.pid for w in after.workers} == pids  # no reload
    assert len(after.live_workers) == 2 and len(after.workers) == 2
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert target.read_text() == "[uwsgi]\n" and sorted(os.listdir(state)) == ["app.ini"]
    assert sorted(os.listdir(managed)) == ["app.ini"]

    # The fix the line names: the link's target as the override (the ini still includes
    # the link, which resolves to it), then resume, as the stop says.
    out = _tune(proc, target, tmp_path, 15, "--resume-apply")
    assert "STOPPED APPLYING" not in out, out
    assert wait_for(lambda: len(doc(proc).live_workers) == 3, timeout=20), out
    assert "cheaper-initial = 3" in target.read_text() and link.is_symlink()
