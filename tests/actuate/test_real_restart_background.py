"""A restart script that starts the new uWSGI in the background, holding the script's
stdout and stderr: its exit 0 is success at once, the new uWSGI is left running (and keeps
serving with its log on a closed pipe); no second restart. And whatever running the command
raises, the override is restored."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.instances import Instance, Load
from tests.support.tuned import PidfileUwsgi, stop_pid, wait_for
from tests.uwsgi_harness import base_options
from uwsgitune.actuate.override import read_keys
from uwsgitune.actuate.restart import ListenApplier, RestartCommand
from uwsgitune.launch import find_uwsgi, render_ini
from uwsgitune.loadgen import run_closed

# Stop the instance by its pidfile (SIGINT: SIGTERM is a reload), start it again in the
# background from the same ini, not daemonized: it keeps this script's stdout and stderr.
RESTART = """#!/bin/sh
set -u
echo $$ >> {runs}
if [ -f {pidfile} ]; then
  pid=$(cat {pidfile})
  kill -INT "$pid"
  i=0
  while kill -0 "$pid" 2>/dev/null; do
    i=$((i + 1)); [ "$i" -gt 150 ] && exit 3; sleep 0.1
  done
  rm -f {pidfile}
fi
{uwsgi} --ini {ini} &
echo "started $!"
"""


@dataclass
class Background(PidfileUwsgi):
    work: Path
    ini: Path
    override: Path
    pidfile: Path
    stats: str
    port: int
    script: Path
    runs: Path


@pytest.fixture
def background() -> Iterator[Background]:
    work = Path(f"/tmp/uwt-bg-{os.getpid()}-{time.monotonic_ns() % 10**6}")
    work.mkdir()
    override = work / "override.ini"
    override.write_text("[uwsgi]\n")
    opts = base_options(work, processes=2, cheaper=1, cheaper_initial=1, cheaper_algo="manual")
    opts.update({"listen": 8, "pidfile": str(work / "pid"), "disable-logging": None})
    opts["ini"] = str(override)
    ini = work / "app.ini"
    ini.write_text(render_ini(opts))
    script, runs = work / "restart.sh", work / "runs"
    script.write_text(RESTART.format(pidfile=work / "pid", uwsgi=find_uwsgi(), ini=ini, runs=runs))
    script.chmod(0o755)
    port = int(str(opts["http-socket"]).rsplit(":", 1)[1])
    b = Background(work, ini, override, work / "pid", str(work / "stats.sock"), port, script, runs)
    subprocess.run(
        [str(script)],
        check=True,
        timeout=30,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        assert wait_for(lambda: b.pid() is not None and b.poll()().ok, 20), "no start"
        runs.write_text("")
        yield b
    finally:
        pid = b.pid()
        if pid is not None:
            stop_pid(pid)
        subprocess.run(["rm", "-rf", str(work)], check=False)


@pytest.mark.uwsgi
def test_a_uwsgi_started_in_the_background_is_a_success_not_a_timeout(
    background: Background,
) -> None:
    b = background
    poll = b.poll()
    before = poll()
    assert b.backlog() == 8
    restart = RestartCommand((str(b.script),), timeout=20)
    applier = ListenApplier(b.override, b.ini, restart, poll)
    start = time.monotonic()
    out = applier.apply(32, before, deadline=40)
    took = time.monotonic() - start
    assert out.ok, out.detail
    assert took < 20, f"{took:.1f}s: waited for the output the new uWSGI holds"
    assert len(b.runs.read_text().split()) == 1  # restarted once, no rollback restart
    new = b.pid()
    assert new is not None and new != before.master_pid
    assert read_keys(b.override) == {"listen": "32"} and b.backlog() == 32
    # It logs every request to the pipe uwsgitune closed: EPIPE, ignored; it keeps serving.
    result = run_closed(f"http://127.0.0.1:{b.port}/io/5", 2, 2.0)
    assert result.errors == 0 and result.ok > 10
    assert b.pid() == new and poll().master_pid == new


def test_an_exception_running_the_command_restores_the_override(tmp_path: Path) -> None:
    """Anything raised once the override is written (here Popen's ValueError for a NUL in
    the argv) used to escape `apply` and leave the new override in place."""
    override = tmp_path / "override.ini"
    override.write_text("[uwsgi]\n")
    ini = tmp_path / "app.ini"
    ini.write_text(f"[uwsgi]\nprocesses = 2\ncheaper = 1\nlisten = 8\nini = {override}\n")
    before = Instance().frame(0, Load())
    bad = RestartCommand(("/bin/true\0",))
    applier = ListenApplier(override, ini, bad, lambda: before, sleep=lambda _s: None)
    out = applier.apply(32, before, deadline=1)
    assert not out.ok and out.restored
    assert "ValueError: embedded null byte" in out.detail
    assert override.read_text() == "[uwsgi]\n"
