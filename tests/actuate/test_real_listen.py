"""`listen` against a real uWSGI: applied only through a restart command the user gave,
never above somaxconn, rolled back when the restart does not come back with it.

The instance runs daemonized (`daemonize2`, `pidfile`) so that a restart script can stop it
(SIGINT: SIGTERM would be a reload) and start it again, as `systemctl restart` would.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.tuned import PidfileUwsgi, stop_pid, wait_for
from tests.uwsgi_harness import base_options
from uwsgitune.actuate.override import OverrideError, read_keys
from uwsgitune.actuate.restart import ListenApplier, RestartCommand
from uwsgitune.launch import find_uwsgi, render_ini
from uwsgitune.loadgen import LoadRun

pytestmark = pytest.mark.uwsgi

RESTART = """#!/bin/sh
# Stop the instance by its pidfile with SIGINT and start it again from the same ini.
set -u
pid=$(cat {pidfile})
kill -INT "$pid"
i=0
while kill -0 "$pid" 2>/dev/null; do
  i=$((i + 1)); [ "$i" -gt 150 ] && exit 3; sleep 0.1
done
rm -f {pidfile}
exec {uwsgi} --ini {ini}
"""


@dataclass
class Daemonized(PidfileUwsgi):
    workdir: Path
    ini: Path
    override: Path
    pidfile: Path
    stats: str
    fifo: Path
    port: int
    restart: Path


@pytest.fixture
def daemonized(tmp_path: Path) -> Iterator[Daemonized]:
    work = Path(f"/tmp/uwt-listen-{os.getpid()}-{time.monotonic_ns() % 10**6}")
    work.mkdir()
    override = work / "override.ini"
    override.write_text("[uwsgi]\n")
    opts = base_options(work, processes=2, cheaper=1, cheaper_initial=1, cheaper_algo="manual")
    opts.update({"listen": 8, "pidfile": str(work / "pid"), "daemonize2": str(work / "log")})
    opts["ini"] = str(override)
    ini = work / "app.ini"
    ini.write_text(render_ini(opts))
    script = work / "restart.sh"
    script.write_text(RESTART.format(pidfile=work / "pid", uwsgi=find_uwsgi(), ini=ini))
    script.chmod(0o755)
    port = int(str(opts["http-socket"]).rsplit(":", 1)[1])
    d = Daemonized(
        work, ini, override, work / "pid", str(work / "stats.sock"), work / "fifo", port, script
    )
    subprocess.run([find_uwsgi(), "--ini", str(ini)], check=True, timeout=30)
    try:
        assert wait_for(lambda: d.pid() is not None and d.poll()().ok, 15), "no start"
        yield d
    finally:
        pid = d.pid()
        if pid is not None:
            stop_pid(pid)
        subprocess.run(["rm", "-rf", str(work)], check=False)


def test_listen_is_applied_by_the_restart_and_verified(daemonized: Daemonized) -> None:
    d = daemonized
    poll = d.poll()
    before = poll()
    assert wait_for(lambda: d.backlog() == 8)
    applier = ListenApplier(d.override, d.ini, RestartCommand((str(d.restart),)), poll)
    out = applier.apply(32, before, deadline=30)
    assert out.ok, out.detail
    assert read_keys(d.override) == {"listen": "32"}
    assert "listen = 8" in d.ini.read_text()  # the user's ini is never edited
    assert d.backlog() == 32 and d.pid() != before.master_pid


def test_listen_above_somaxconn_is_refused_before_anything_is_written(
    daemonized: Daemonized,
) -> None:
    d = daemonized
    poll = d.poll()
    before = poll()
    assert before.somaxconn
    applier = ListenApplier(d.override, d.ini, RestartCommand((str(d.restart),)), poll)
    with pytest.raises(OverrideError, match=f"> somaxconn = {before.somaxconn}"):
        applier.apply(before.somaxconn + 1, before, deadline=30)
    assert d.override.read_text() == "[uwsgi]\n"
    assert poll().master_pid == before.master_pid  # not restarted


def test_a_failing_restart_restores_the_override(daemonized: Daemonized, tmp_path: Path) -> None:
    d = daemonized
    poll = d.poll()
    before = poll()
    failing = tmp_path / "fail.sh"
    failing.write_text("#!/bin/sh\necho 'unit uwsgi@app not found' >&2\nexit 5\n")
    failing.chmod(0o755)
    applier = ListenApplier(d.override, d.ini, RestartCommand((str(failing),)), poll)
    out = applier.apply(32, before, deadline=5)
    assert not out.ok and out.restored
    assert "exited 5: unit uwsgi@app not found" in out.detail
    assert d.override.read_text() == "[uwsgi]\n"  # back as it was
    assert poll().master_pid == before.master_pid
    assert wait_for(lambda: d.backlog() == 8)


async def _bursts(port: int, seconds: float) -> None:
    """Bursts: 24 clients for 3 s on a slow route keep the backlog of 8 full (one worker
    serves about 7 a second; the connections beyond the backlog wait for SYN retries),
    then 4 s with nothing to do. uWSGI samples a TCP queue about once a second."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        run = LoadRun(f"http://127.0.0.1:{port}/io/150", duration=3.0, max_requests=1000)
        await run.closed_loop(24)
        await asyncio.sleep(4.0)


def test_tune_applies_a_burst_listen_through_the_restart_command(daemonized: Daemonized) -> None:
    """End to end: `uwsgitune tune --mode apply --restart-command`, bursts that overflow a
    listen of 8, the rules' listen_queue.bursts, one restart, the new backlog verified."""
    d = daemonized
    audit = d.workdir / "audit.jsonl"
    flags = (
        f"--fifo {d.fifo} --override {d.override} --ini {d.ini} --mode apply "
        f"--min-workers 1 --max-workers 1 --interval 0.5 --duration 45 --audit {audit} "
        f"--restart-command {d.restart}"
    )
    cmd = [sys.executable, "-m", "uwsgitune", "tune", d.stats, *flags.split()]
    tune = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        asyncio.run(_bursts(d.port, 40))
        out, _ = tune.communicate(timeout=30)
    finally:
        tune.kill()
    assert tune.returncode == 0, out
    assert "listen_queue.bursts" in out and "listen [verified]" in out, out
    new = int(read_keys(d.override)["listen"])
    assert 8 < new <= 4096 and d.backlog() == new
    assert out.count("via restart") == 1  # once: the cool-down holds any second restart


def test_the_deadline_counts_from_the_restart_commands_exit(
    daemonized: Daemonized, tmp_path: Path
) -> None:
    """A restart command slower than the deadline (a slow `systemctl restart`) that succeeds
    is verified, not rolled back (which would restart uWSGI a second time)."""
    d = daemonized
    poll = d.poll()
    before = poll()
    assert wait_for(lambda: d.backlog() == 8)
    slow = tmp_path / "slow.sh"
    slow.write_text(f"#!/bin/sh\nsleep 12\nexec {d.restart}\n")
    slow.chmod(0o755)
    applier = ListenApplier(d.override, d.ini, RestartCommand((str(slow),)), poll)
    out = applier.apply(32, before, deadline=10)
    assert out.ok, out.detail
    assert d.backlog() == 32
