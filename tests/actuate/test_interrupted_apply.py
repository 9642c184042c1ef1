"""A stop signal while a reload of a slow app is waited on, against a real uWSGI: the daemon
(SIGTERM) and `uwsgitune tune` (Ctrl-C) end the apply themselves: an intent record before,
the reload rolled back and audited `interrupted` after, the lock released, the exit bounded.
While the reload waits, /metrics keeps publishing fresh polls.

The reload cannot finish: every worker serves a 60 s request, and uWSGI's graceful reload
waits for them (worker-reload-mercy, 60 s by default)."""

from __future__ import annotations

import fcntl
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.daemon.conftest import DaemonProc
from tests.daemon.helpers import scrape, value, wait_for
from tests.support.tuned import manual
from tests.uwsgi_harness import http_port
from uwsgitune.actuate.lock import lock_path
from uwsgitune.launch import UwsgiProcess

pytestmark = pytest.mark.uwsgi
UWSGITUNE = str(Path(sys.executable).parent / "uwsgitune")

# A ceiling below the live count, every worker busy: the tuner shrinks by a reload.
CONFIG = """
[daemon]
metrics_listen = "127.0.0.1:@PORT@"
state_dir = "{state}"

[[instance]]
name = "app"
stats = "{stats}"
fifo = "{fifo}"
override = "{override}"
mode = "apply"
min_workers = 1
max_workers = 2
interval = 0.5
"""


@contextmanager
def busy_workers(proc: UwsgiProcess, n: int, ms: int = 60000) -> Iterator[None]:
    """`n` requests of `ms` (60 s), held open: the workers stay busy, a reload waits on them."""
    socks = []
    try:
        for _ in range(n):
            s = socket.create_connection(("127.0.0.1", http_port(proc)), timeout=5)
            s.sendall(f"GET /io/{ms} HTTP/1.0\r\nHost: x\r\n\r\n".encode())
            socks.append(s)
        yield
    finally:
        for s in socks:
            s.close()


def records(path: Path) -> list[dict[str, object]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def intent_seen(path: Path) -> bool:
    return any(r["event"] == "intent" for r in records(path))


def lock_free(fifo: str, locks: Path) -> bool:
    fd = os.open(lock_path(Path(fifo), locks), os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


def check_interrupted(audit: Path, override: Path) -> None:
    recs = records(audit)
    events = [(r["event"], r.get("result")) for r in recs]
    i = events.index(("intent", None))
    assert events[i + 1] == ("change", "interrupted"), events
    intent, change = recs[i], recs[i + 1]
    assert intent["via"] == change["via"] == "reload" and intent["pid"]
    assert "when uwsgitune was stopped" in str(change["detail"])
    assert "previous override restored" in str(change["detail"])
    assert ("stop", None) not in events  # a stop signal is not a failure: nothing to resume
    assert override.read_text() == "[uwsgi]\n"  # rolled back


def test_daemon_sigterm_during_a_reload_wait_rolls_back_audits_and_releases(
    uwsgi: Callable[..., UwsgiProcess], start_daemon: Callable[..., DaemonProc], tmp_path: Path
) -> None:
    override = tmp_path / "override.ini"
    proc = uwsgi(**manual(override, processes=4, initial=4))
    locks = tmp_path / "locks"
    text = CONFIG.format(stats=proc.stats, fifo=proc.fifo, override=override, state=tmp_path)
    audit = tmp_path / "app.audit.jsonl"
    with busy_workers(proc, 4):
        d = start_daemon(config=text, env={"UWSGITUNE_LOCK_DIR": str(locks)})
        wait_for(lambda: intent_seen(audit), timeout=40, step=0.2)
        time.sleep(2.0)  # well inside the reload's wait
        uri = f"unix://{proc.stats}"
        first = value(scrape(d.port), "uwsgitune_last_poll_timestamp_seconds", stats_uri=uri)
        # The wait polls, and each of its polls is published: the timestamp moves on.
        wait_for(
            lambda: (
                (value(scrape(d.port), "uwsgitune_last_poll_timestamp_seconds", stats_uri=uri) or 0)
                > (first or 0) + 0.4
            ),
            timeout=10,
        )
        assert not lock_free(proc.fifo, locks)  # held while it applies
        sent = time.monotonic()
        d.proc.send_signal(signal.SIGTERM)
        code = d.proc.wait(25)  # the grace (10 s) and the rollback: below TimeoutStopSec
        took = time.monotonic() - sent
    assert code == 0 and took < 20, took
    check_interrupted(audit, override)
    assert lock_free(proc.fifo, locks)
    log = d.log.read_text()
    assert "Traceback" not in log and "apply_abandoned" not in log, log
    assert proc.alive()


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGHUP])  # Ctrl-C; the terminal closed
def test_tune_stopped_during_a_reload_wait_rolls_back_audits_and_exits_128_plus_signal(
    uwsgi: Callable[..., UwsgiProcess], tmp_path: Path, sig: signal.Signals
) -> None:
    override = tmp_path / "override.ini"
    proc = uwsgi(**manual(override, processes=4, initial=4))
    locks, audit = tmp_path / "locks", tmp_path / "audit.jsonl"
    argv = [UWSGITUNE, "tune", proc.stats, "--fifo", proc.fifo, "--override", str(override)]
    argv += ["--mode", "apply", "--min-workers", "1", "--max-workers", "2", "--interval", "0.5"]
    argv += ["--audit", str(audit), "--duration", "120"]
    env = {**os.environ, "UWSGITUNE_LOCK_DIR": str(locks)}
    with busy_workers(proc, 4):
        tune = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        try:
            wait_for(lambda: intent_seen(audit), timeout=40, step=0.2)
            time.sleep(2.0)
            sent = time.monotonic()
            tune.send_signal(sig)
            out, err = tune.communicate(timeout=25)
            took = time.monotonic() - sent
        finally:
            if tune.poll() is None:
                tune.kill()
                tune.wait(5)
    assert tune.returncode == 128 + sig and took < 20, (took, err)
    assert b"Traceback" not in err and err == b"", err
    last = out.decode().strip().splitlines()[-1]
    assert f"stopped by {sig.name}; applied: 0 FIFO moves, 1 reloads" in last, out
    check_interrupted(audit, override)
    assert lock_free(proc.fifo, locks)
    assert proc.alive()


def test_tune_with_an_unreadable_audit_log_says_so_in_one_line(
    uwsgi: Callable[..., UwsgiProcess], tmp_path: Path
) -> None:
    override = tmp_path / "override.ini"
    proc = uwsgi(**manual(override, processes=2, initial=1))
    audit = tmp_path / "audit.jsonl"
    audit.mkdir()  # EISDIR: the history cannot be read
    argv = [UWSGITUNE, "tune", proc.stats, "--fifo", proc.fifo, "--mode", "apply"]
    argv += ["--audit", str(audit), "--duration", "1"]
    env = {**os.environ, "UWSGITUNE_LOCK_DIR": str(tmp_path / "locks")}
    out = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=30)
    assert out.returncode == 1, out
    (line,) = out.stderr.splitlines()
    assert line.startswith(f"uwsgitune: audit log {audit}: cannot read (Is a directory)"), line
    assert "hourly and listen limits" in line
