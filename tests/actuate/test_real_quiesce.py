"""The pause before a reload against a real uWSGI: the workers pause, the reload ends the
pause, a long request is waited for and served, a threaded pool is not paused, a pause
whose `r` could not be sent is undone, and a pool a killed tuner left paused (its reload's
intent in the audit log, no change after it) is resumed by the next one, in apply mode,
also when the next one is another tool with another audit log (the apply lock's mark)."""

from __future__ import annotations

import threading
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.actuate.test_real_scale import QUICK
from tests.support.tuned import doc, drive, manual, poller, service, tuned, wait_for
from tests.uwsgi_harness import url
from uwsgitune.actuate.audit import AuditLog
from uwsgitune.actuate.fifo import FifoError, MasterFifo
from uwsgitune.actuate.lock import ApplyLock
from uwsgitune.actuate.override import Override
from uwsgitune.actuate.reload import LONGEST, Limits, Reloader, statuses_at
from uwsgitune.actuate.service import Mode
from uwsgitune.core.address import parse_address
from uwsgitune.core.frame import Frame
from uwsgitune.launch import UwsgiProcess
from uwsgitune.loadgen import LoadResult, run_closed
from uwsgitune.tuner.result import AuditRecord

pytestmark = pytest.mark.uwsgi
PAUSED = b"*** PAUSE"  # what uWSGI logs on `p`
RESUMED = b"resuming workers"


def _setup(
    uwsgi: Callable[..., UwsgiProcess], tmp_path: Path, **kw: object
) -> tuple[UwsgiProcess, Reloader, Callable[[], Frame]]:
    override = tmp_path / "override.ini"
    proc = uwsgi(**kw, **manual(override, processes=4, initial=2))  # the include stays last
    poll = poller(proc.stats)
    poll()
    statuses = statuses_at(parse_address(proc.stats))
    reloader = Reloader(MasterFifo(proc.fifo), override, proc.ini, poll, statuses=statuses)
    return proc, reloader, poll


def _serves(proc: UwsgiProcess) -> bool:
    """A request answered 200. False on a connection error: a plain `r` (the resume test's
    rollback) can still reset one, which `wait_for` then tries again."""
    try:
        with urllib.request.urlopen(url(proc, "/io/1"), timeout=5) as r:
            return bool(r.status == 200)
    except OSError:
        return False


def test_a_reload_pauses_the_workers_first_and_the_new_ones_are_not_paused(
    uwsgi: Callable[..., UwsgiProcess], tmp_path: Path
) -> None:
    proc, reloader, poll = _setup(uwsgi, tmp_path)
    result: list[LoadResult] = []
    load = threading.Thread(target=lambda: result.append(run_closed(url(proc, "/cpu/2"), 8, 6.0)))
    load.start()
    out = reloader.apply(Override(6, 1, 3), poll(), Limits(4096), deadline=15)
    load.join()
    assert out.ok and "workers paused first" in out.detail, out.detail
    assert PAUSED in proc.log.read_bytes()
    d = doc(proc)
    assert len(d.live_workers) == 3 and all(w.status != "pause" for w in d.live_workers)
    assert _serves(proc) and result[0].errors == 0 and result[0].ok > 50


def test_a_long_request_is_served_and_the_reload_goes_after_the_longest_wait(
    uwsgi: Callable[..., UwsgiProcess], tmp_path: Path
) -> None:
    proc, reloader, poll = _setup(uwsgi, tmp_path)
    ms = int((LONGEST + 3) * 1000)
    got: list[int] = []

    def long_request() -> None:
        with urllib.request.urlopen(url(proc, f"/io/{ms}"), timeout=30) as r:
            got.append(r.status)

    t = threading.Thread(target=long_request)
    t.start()
    assert wait_for(lambda: any(w.status == "busy" for w in doc(proc).live_workers))
    out = reloader.apply(Override(6, 1, 3), poll(), Limits(4096), deadline=30)
    t.join()
    assert out.ok and "reloaded anyway" in out.detail, out.detail
    assert got == [200] and _serves(proc)
    assert all(w.status != "pause" for w in doc(proc).live_workers)


def test_a_threaded_pool_is_not_paused(uwsgi: Callable[..., UwsgiProcess], tmp_path: Path) -> None:
    proc, reloader, poll = _setup(uwsgi, tmp_path, threads=2)
    out = reloader.apply(Override(6, 1, 3), poll(), Limits(4096), deadline=15)
    assert out.ok and "paused" not in out.detail, out.detail
    assert PAUSED not in proc.log.read_bytes() and _serves(proc)


class NoReload(MasterFifo):
    """A FIFO whose `r` is lost (the master stopped reading between `p` and `r`)."""

    def send(self, command: str, master_pid: int) -> None:
        if command == "r":
            raise FifoError(f"{self.path}: no master reads it (is uWSGI running?)")
        super().send(command, master_pid)


def test_a_pause_whose_reload_was_not_sent_is_undone(
    uwsgi: Callable[..., UwsgiProcess], tmp_path: Path
) -> None:
    override = tmp_path / "override.ini"
    proc, reloader, poll = _setup(uwsgi, tmp_path)
    reloader.fifo = NoReload(proc.fifo)
    out = reloader.apply(Override(6, 1, 3), poll(), Limits(4096), deadline=15)
    assert not out.ok and out.restored and "pause sent before it was undone" in out.detail
    assert override.read_text() == "[uwsgi]\n"
    log = proc.log.read_bytes()
    assert PAUSED in log and RESUMED in log
    assert wait_for(lambda: all(w.status != "pause" for w in doc(proc).live_workers))
    assert _serves(proc) and len(doc(proc).workers) == 4


def test_new_workers_that_start_paused_are_resumed(
    uwsgi: Callable[..., UwsgiProcess], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `lazy` set where it is not seen (here: both checks turned off): the workers `r`
    # respawns start paused, and the wait resumes them.
    monkeypatch.setattr("uwsgitune.actuate.reload.pause_unsafe", lambda *a: False)
    monkeypatch.setattr("uwsgitune.actuate.reload.lazy_where", lambda *a: None)
    proc, reloader, poll = _setup(uwsgi, tmp_path, lazy=True)
    out = reloader.apply(Override(6, 1, 3), poll(), Limits(4096), deadline=5)
    assert "the new workers started paused: resumed" in out.detail, out.detail
    log = proc.log.read_bytes()
    assert PAUSED in log and RESUMED in log
    assert wait_for(lambda: all(w.status != "pause" for w in doc(proc).live_workers))
    assert _serves(proc)


@pytest.mark.parametrize(
    ("mode", "ago", "resumed"),
    [("apply", 5.0, True), ("observe", 5.0, False), ("apply", 3600.0, False)],
)
def test_a_pool_a_killed_reload_left_paused_is_resumed_in_apply_mode(
    uwsgi: Callable[..., UwsgiProcess], tmp_path: Path, mode: Mode, ago: float, resumed: bool
) -> None:
    override = tmp_path / "override.ini"
    proc, _, poll = _setup(uwsgi, tmp_path)
    first = poll()
    pid = first.master_pid
    # What a tuner killed between its `p` and its `r` leaves: the intent, and a pool paused
    # but for a worker still in a long request (it reads `busy` until that ends).
    audit = AuditLog(tmp_path / "audit.jsonl")
    t = time.time() - ago
    audit.append(AuditRecord("intent", t, first.source, "apply", "down", "reload", 2, 1, pid=pid))
    codes: list[int] = []
    long = threading.Thread(target=lambda: codes.append(_status(url(proc, "/io/5000"))))
    long.start()
    assert wait_for(lambda: any(w.status == "busy" for w in doc(proc).live_workers))
    MasterFifo(proc.fifo).send("p", pid)
    assert wait_for(lambda: [w.status for w in doc(proc).live_workers].count("pause") == 1)
    driver = tuned(
        proc.stats,
        proc.fifo,
        settings=QUICK,
        mode=mode,
        override=override,
        ini=proc.ini,
        audit=audit,
        locks=tmp_path / "locks",
    )
    lines: list[str] = []
    drive(driver, 3, lines)
    said = [line for line in lines if "a reload cut short left paused" in line]
    assert len(said) == (1 if resumed else 0), "\n".join(lines)
    if resumed:
        assert said[0].startswith("apply: resumed (`p`) the 1 workers")
        assert any("[paused] resumed after this poll" in line for line in lines), lines
        assert not any("resume it with `p`" in line for line in lines), lines
        assert wait_for(lambda: all(w.status != "pause" for w in doc(proc).live_workers))
        assert RESUMED in proc.log.read_bytes() and _serves(proc)
        assert [r.action for r in audit.records()][-1] == "resume"
    else:
        assert RESUMED not in proc.log.read_bytes()
        assert any(w.status == "pause" for w in doc(proc).live_workers)
        assert any("paused (1 workers read `pause`)" in line for line in lines), lines
    long.join()
    assert codes == [200]  # the long request is served either way
    if not resumed:  # after its request, that worker pauses too
        assert wait_for(lambda: all(w.status == "pause" for w in doc(proc).live_workers))


def _status(address: str) -> int:
    with urllib.request.urlopen(address, timeout=15) as r:
        return int(r.status)


@pytest.mark.parametrize("marked", [True, False])
def test_a_pool_another_tools_killed_reload_left_paused_is_resumed_from_the_lock(
    uwsgi: Callable[..., UwsgiProcess],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    marked: bool,
) -> None:
    """`tune` killed between its `p` and its `r`, the daemon next: the daemon's audit log
    holds nothing of it, but the apply lock they share says a reload of that master was
    under way, and the daemon resumes the pool. A lock with no mark: a pause someone else
    made, left alone."""
    monkeypatch.setenv("UWSGITUNE_LOCK_DIR", str(tmp_path / "locks"))
    proc, _, poll = _setup(uwsgi, tmp_path)
    pid = poll().master_pid
    killed = ApplyLock(Path(proc.fifo), "uwsgitune tune")
    assert killed.acquire() is None
    if marked:
        killed.mark_reload(pid, time.time() - 5)
    MasterFifo(proc.fifo).send("p", pid)
    killed.release()  # what its death does: the flock dropped, the file as it was
    assert wait_for(lambda: all(w.status == "pause" for w in doc(proc).live_workers))
    driver = tuned(  # the daemon's tuner: its lock in $UWSGITUNE_LOCK_DIR, as the tool's
        proc.stats,
        proc.fifo,
        settings=QUICK,
        override=tmp_path / "override.ini",
        ini=proc.ini,
        audit=AuditLog(tmp_path / "daemon.audit.jsonl"),
        role="uwsgitune daemon, instance app",
    )
    tuner = service(driver)
    lines: list[str] = []
    try:
        drive(driver, 3, lines, close=False)
        assert tuner.lock is not None and tuner.lock.held and tuner.lock.path == killed.path
    finally:
        driver.close()
    assert tuner.lock is None
    said = [line for line in lines if "a reload cut short left paused" in line]
    if marked:
        assert len(said) == 1 and said[0].startswith("apply: resumed (`p`) the 2 workers"), lines
        assert wait_for(lambda: all(w.status != "pause" for w in doc(proc).live_workers))
        assert RESUMED in proc.log.read_bytes() and _serves(proc)
    else:
        assert not said, lines
        assert RESUMED not in proc.log.read_bytes()
        assert all(w.status == "pause" for w in doc(proc).live_workers)
