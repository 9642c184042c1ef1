"""A SIGHUP while the daemon's reload waits on slow requests, against a real uWSGI: the apply
in flight runs to its own end, and no second tuner acts on the instance meanwhile, whether
the SIGHUP rebuilds the tuner in the same poll thread (a tuner setting changed) or replaces
the whole runner with a new thread (the poll interval changed)."""

from __future__ import annotations

import itertools
import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.actuate.test_interrupted_apply import CONFIG, busy_workers, intent_seen, records
from tests.daemon.conftest import DaemonProc
from tests.daemon.helpers import wait_for
from tests.support.tuned import manual
from uwsgitune.launch import UwsgiProcess

pytestmark = pytest.mark.uwsgi


@pytest.mark.parametrize("change", ["max_workers = 2", "interval = 0.5"])
def test_a_sighup_mid_apply_never_lets_two_tuners_act(
    uwsgi: Callable[..., UwsgiProcess],
    start_daemon: Callable[..., DaemonProc],
    tmp_path: Path,
    change: str,
) -> None:
    override = tmp_path / "override.ini"
    proc = uwsgi(**manual(override, processes=4, initial=4))
    text = CONFIG.format(stats=proc.stats, fifo=proc.fifo, override=override, state=tmp_path)
    audit = tmp_path / "app.audit.jsonl"
    env = {"UWSGITUNE_LOCK_DIR": str(tmp_path / "locks")}
    with busy_workers(proc, 4, ms=20000):  # the reload can finish once these end
        d = start_daemon(config=text, env=env)
        wait_for(lambda: intent_seen(audit), timeout=40, step=0.2)
        new = change.replace("2", "3") if "max" in change else change.replace("0.5", "0.6")
        assert d.config is not None
        d.config.write_text(d.config.read_text().replace(change, new))
        d.proc.send_signal(signal.SIGHUP)
        wait_for(lambda: "reloaded" in d.log.read_text(), timeout=10)
        wait_for(lambda: [r["event"] for r in records(audit)].count("change") >= 1, 90, 0.5)
        time.sleep(3.0)  # room for a second tuner to act, were it let
    events = [(r["event"], r.get("result")) for r in records(audit) if r["event"] != "decision"]
    first = events.index(("intent", None))
    assert events[first + 1] == ("change", "verified"), events  # ran to its own end
    pairs = [e for e in events if e[0] in ("intent", "change")]
    assert all(a[0] != b[0] for a, b in itertools.pairwise(pairs)), pairs  # never two at once
    log = d.log.read_text()
    assert "Traceback" not in log and "apply_abandoned" not in log, log
    assert proc.alive()
