"""The real daemon in apply mode through master faults: SIGSTOP (stats hang), kill -9, a new
master on the same paths, and a second uwsgitune on the same instance."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.daemon.conftest import DaemonProc
from tests.daemon.helpers import wait_for
from tests.daemon.test_apply import apply_config
from tests.support.tuned import live, manual
from tests.uwsgi_harness import url
from uwsgitune.launch import UwsgiProcess
from uwsgitune.loadgen import LoadResult, run_closed

pytestmark = pytest.mark.uwsgi
UWSGITUNE = str(Path(sys.executable).parent / "uwsgitune")


def test_stop_kill_restart_and_a_second_actor(
    uwsgi: Callable[..., UwsgiProcess], start_daemon: Callable[..., DaemonProc], tmp_path: Path
) -> None:
    override = tmp_path / "override.ini"
    proc = uwsgi(**manual(override, processes=4, initial=2))
    env = {"UWSGITUNE_LOCK_DIR": str(tmp_path / "locks")}
    text = apply_config(proc, override, tmp_path).replace("interval = 0.5", "interval = 0.2")
    text = text.replace("[[instance]]", "[[instance]]\ntimeout = 1.0")
    d = start_daemon(config=text, env=env)
    wait_for(lambda: d.events("tuner_started"))
    second = start_daemon(config=text, env={**env, "UWSGITUNE_LOCK_DIR": env["UWSGITUNE_LOCK_DIR"]})
    (locked,) = wait_for(lambda: second.events("apply_locked"))
    assert f"pid {d.proc.pid} (uwsgitune daemon, instance app)" in locked
    assert "mode=observe" in wait_for(lambda: second.events("tuner_started"))[0]
    tune = subprocess.run(
        [UWSGITUNE, "tune", proc.stats, "--fifo", proc.fifo, "--mode", "apply", "--duration", "1"],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        timeout=30,
    )
    assert tune.returncode == 2 and "already tuned by pid" in tune.stderr, tune.stderr
    second.stop(signal.SIGINT)

    result: list[LoadResult] = []
    load = threading.Thread(target=lambda: result.append(run_closed(url(proc, "/io/20"), 2, 6.0)))
    load.start()
    audit = tmp_path / "app.audit.jsonl"
    stopped = time.time()
    os.kill(proc.pid, signal.SIGSTOP)  # the stats hang; the workers keep serving
    try:
        (down,) = wait_for(lambda: d.events("disconnected"), timeout=8)
        assert "no answer within 1s" in down, down
        time.sleep(1.0)
    finally:
        resumed = time.time()
        os.kill(proc.pid, signal.SIGCONT)
    load.join()
    assert result[0].errors == 0 and result[0].ok > 50
    records = [json.loads(x) for x in audit.read_text().splitlines()] if audit.exists() else []
    assert not [r for r in records if stopped < r["t"] < resumed]  # no action while hung
    wait_for(lambda: len(d.events("connected")) >= 2, timeout=8)

    assert proc.proc is not None
    os.kill(proc.pid, signal.SIGKILL)  # mid-poll at 5 Hz: the next poll is refused
    proc.proc.wait(5)
    proc._reap_group()
    wait_for(lambda: len(d.events("disconnected")) >= 2, timeout=8)
    proc.start()  # a new master on the same paths
    wait_for(lambda: len(d.events("connected")) >= 3, timeout=10)
    assert live(proc) >= 1 and d.proc.poll() is None
    log = d.log.read_text()
    assert "Traceback" not in log and "tuner_error" not in log
