"""The reload route: a change of `processes`, `cheaper-initial` or `threads` goes to uWSGI
through its override ini and a graceful reload, verified, else rolled back.

1. **Validate** the configuration uWSGI would read (the user's ini, the override on top:
   `plan`); a refused one is never written (a bad ini plus `r` kills the instance). Under
   `lazy` (not `lazy-apps`) a reload never reads the ini again: refused as well
   (actuate/override.py).
2. **Write** the override atomically, keeping the previous version.
3. **Pause the workers, then `r`** (`quiesce`, below), to a vassal of the Emperor too: the
   Emperor watches the vassal's own ini, not the files it includes (measured: an edited
   include is not reloaded), so without `r` the override would wait for the next unrelated
   reload; and since the vassal's ini itself is never touched, the Emperor does not reload
   it twice.
4. **Verify**: poll until the same master is back with the new `processes` and
   `cheaper-initial` live workers, before the deadline (below). Otherwise restore the
   previous file, reload it when the master still reads its FIFO, and report a failure: the
   caller stops applying.

The pause before `r`
--------------------
It keeps a worker from dropping a connection it has not read. uWSGI 2.0's SIGHUP handler
in a one-thread worker (`gracefully_kill`, core/uwsgi.c) exits at once unless the worker's
core is `in_request`, and a worker sets that only when it starts to read a connection
`accept()` has returned. A reload that lands in between closes that connection unread: the
client gets a reset (unbit/uwsgi#1375). The window is widest when the workers wait for a
CPU, which is when the tuner reloads: to shrink a saturated pool
(bench/results/reload_race.md).

`p` has every worker finish the request it holds and then wait at the top of its loop
(`wsgi_req_setup`), before it accepts another. A worker waiting there holds no connection,
so the reload's SIGHUP costs nothing; new connections wait in the listen queue for the new
workers. `r` re-executes the master, and the workers it forks are not paused.

The stats read `pause` for a worker that is paused and not in a request, which a worker
that accepted just before the pause also reads until it starts to read. So the pool counts
as paused after two reads in a row, `INTERVAL` apart, in which every live worker reads
`pause`: once the others are paused, the CPUs are free and that window closes at once.
Those reads are of the statuses alone (`statuses_at`), not polls of the instance: a poll's
frame would go into the tuner's window, and its rates would count a pause the tuner made.
If that does not come within `LONGEST` seconds (a long request), `r` goes anyway, as it
would have without the pause. From the `p` until the `r` went, the apply lock holds a mark
naming the master (actuate/lock.py), so that whoever acts next resumes a pool a killed
holder left paused (actuate/leftpaused.py).

No pause for threads: a threaded worker's handler waits for its requests (no race), and a
paused threaded pool does not reload at all (measured: 4 x 4 threads, not reloaded in
30 s). None under `lazy` (not `lazy-apps`): `r` then only respawns the workers, and they
start paused (measured). None for an instance subscribed to a router: a pause unsubscribes
it, and the router would have no node for it meanwhile. None for a pool someone else
paused (a worker reads `pause`).

A worker starting: no `p` or `r` until it is in its loop
--------------------------------------------------------
A worker the master has just forked (a respawn, a FIFO `+`, the cheaper algorithm) runs the
master's signal handlers until it sets its own (core/uwsgi.c `uwsgi_worker_run`), and under
`lazy-apps` it loads the app first. A SIGHUP in that window runs the master's
`grace_them_all` in the worker: it curses the others a second time and lives on, and the
reload waits for it until the worker mercy ends and the master kills it (measured, lazy-apps,
an app that loads in 4 s, `r` 1 s after a respawn: the reload took 65 s, "NO MERCY" in the
log; seen in CI too, without lazy-apps, after a `+` under load). A `p` in that window runs
the master's `suspend_resume_them_all` there. The stats read such a worker `accepting` 0
(set at the respawn, set to 1 when it enters its loop), and the statuses here read it
`starting`. So both wait until no live worker is starting (`Reloader.started`), for at most
the worker mercy, since that is what an `r` sent meanwhile costs; the reload's deadline runs
from the `r`. A stop ends that wait as it ends the others.

The deadline: uWSGI's own mercy, then a margin
----------------------------------------------
A graceful reload lets each old worker finish the request it is serving, for up to
`worker-reload-mercy` seconds (60 by default) before the master kills it. A reload of an
instance serving slow requests is therefore not failed at 20 s: the reload deadline is never
shorter than the longest wait uWSGI itself may take, plus `MARGIN` for the kill, the
re-exec and the app's loading. A larger `reload_deadline` setting wins. From uWSGI 2.0's
source (core/uwsgi.c `grace_them_all`, core/master_utils.c, daemons.c):
- every worker gets `worker-reload-mercy` (default 60), every mule `mule-reload-mercy`
  (default 60), both counted from the same moment;
- before that, the master stops its attached (non-smart) daemons and its Emperor, waiting
  `reload-mercy` seconds (3 when unset; 2 more for the Emperor) for each (counted once
  here: the merged ini keeps one value per key).
The mercy is read from the user's ini as uWSGI would merge it. One given on uWSGI's command
line or in its environment is not seen: set `reload_deadline` to cover it.

A stop in flight (`Halt`)
-------------------------
SIGTERM, SIGINT, Ctrl-C in `tune` or a daemon stopping sets the `Halt` that the waits of a
reload, and of a listen restart (actuate/restart.py), sleep on. Once it is set, a wait has
`grace` more seconds to see the change through; then the change is rolled back as on a
failure and reported as `interrupted` (audited; applying is not stopped: nothing was wrong
with the change). The thread that applies always ends the apply itself, so the audit record
is written and the apply lock released by that thread, never abandoned half-way.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from uwsgitune.actuate.fifo import FifoError, MasterFifo
from uwsgitune.actuate.lock import ApplyLock
from uwsgitune.actuate.override import (
    IniError,
    Override,
    OverrideError,
    SetupError,
    check_override,
    last_include,
    lazy_refusal,
    lazy_where,
    load_config,
    master_options,
    read_ini,
    restore,
    validate,
    write_atomic,
)
from uwsgitune.core.address import StatsAddress
from uwsgitune.core.frame import Frame
from uwsgitune.core.model import parse_stats
from uwsgitune.sources.procfs import PROC
from uwsgitune.sources.stats import StatsError, read_stats

# Seconds a wait in flight still has after a stop, before it rolls back. With the rollback
# itself (restore the file, send `r`) and a poll in flight, a stop ends well within 20 s:
# what the daemon waits for (daemon/runtime.py), below the unit's TimeoutStopSec.
STOP_GRACE_SECONDS = 10.0

LONGEST = 3.0  # seconds to wait for every worker to pause; `r` goes anyway after
INTERVAL = 0.05  # between stats reads while waiting (a read of 64 workers costs ~1 ms)
UNDONE = "; the pause sent before it was undone"  # what `undo` says when it did
STARTING = "starting"  # the status read for a live worker not yet in its loop (`accepting` 0)

WORKER_MERCY = 60  # uWSGI's default worker-reload-mercy and mule-reload-mercy, seconds
DAEMON_MERCY = 3  # what uWSGI waits for an attached daemon or the Emperor when reload-mercy is 0
MARGIN = 15.0  # past the mercy: the kill (checked once a second), the re-exec, the app's load


# The deadline: uWSGI's mercy, then a margin ------------------------------------------------------


def _seconds(config: Mapping[str, str], key: str, default: int) -> int:
    value = config.get(key)
    if value is None:
        return default
    try:
        return max(int(value.strip()), 0)
    except ValueError:  # uWSGI's atoi would read something; assume the longer default
        return default


def mercy(config: Mapping[str, str]) -> int:
    """Seconds uWSGI may spend stopping the old processes of a graceful reload of `config`."""
    wait = _seconds(config, "worker-reload-mercy", WORKER_MERCY)
    if "mule" in config or "mules" in config:
        wait = max(wait, _seconds(config, "mule-reload-mercy", WORKER_MERCY))
    each = _seconds(config, "reload-mercy", 0) or DAEMON_MERCY
    daemons = any("attach" in k and "daemon" in k and "smart" not in k for k in config)
    return wait + (each if daemons else 0) + (each + 2 if "emperor" in config else 0)


def reload_deadline(setting: float, config: Mapping[str, str]) -> float:
    """The reload deadline for an instance of `config`: the `reload_deadline` setting, never
    less than uWSGI's mercy plus `MARGIN`."""
    return max(setting, mercy(config) + MARGIN)


def reload_deadline_for(setting: float, user_ini: Path | None) -> float:
    """`reload_deadline` for the user's ini; an unreadable one (the reload refuses it, and
    says why) or none: uWSGI's defaults."""
    try:
        config = load_config(user_ini) if user_ini is not None else {}
    except (IniError, OSError, UnicodeError):
        config = {}
    return reload_deadline(setting, config)


# A stop in flight --------------------------------------------------------------------------------


class Halt:
    def __init__(
        self, grace: float = STOP_GRACE_SECONDS, mono: Callable[[], float] = time.monotonic
    ) -> None:
        self.grace = grace
        self._mono = mono
        self._event = threading.Event()
        self._at: float | None = None

    def set(self) -> None:
        """Ask the apply in flight (and every later one) to end: from any thread, or a
        signal handler."""
        if self._at is None:
            self._at = self._mono()
        self._event.set()

    def is_set(self) -> bool:
        return self._event.is_set()

    def pause(self, seconds: float, sleep: Callable[[float], None]) -> None:
        """Wait `seconds` between polls, woken at once by the stop (then `sleep` as usual)."""
        if self._event.is_set():
            sleep(seconds)
        else:
            self._event.wait(seconds)

    def until(self, deadline: float) -> float:
        """A wait's deadline, cut to `grace` seconds after the stop once one came."""
        return deadline if self._at is None else min(deadline, self._at + self.grace)


# The pause before `r` ----------------------------------------------------------------------------

Statuses = Callable[[], Sequence[str] | None]  # the live workers' statuses; None: unread


def _unsafe(key: str) -> bool:
    """An option under which a pause harms: `lazy` (not `lazy-apps`), a subscription."""
    return key in ("lazy", "st") or key.startswith("subscribe")


def pause_unsafe(config: Mapping[str, str] | None, master_pid: int, proc: Path = PROC) -> bool:
    """Such an option in the ini, on the master's command line or in its environment (as
    `UWSGI_<KEY>`); True when that cannot be read, so no pause."""
    if config is None or any(_unsafe(k) for k in config):
        return True
    given = master_options(master_pid, proc)
    return given is None or any(_unsafe(k) for k in given)


def can_pause(frame: Frame) -> bool:
    """A pool the pause protects, and that nobody else has paused."""
    return (
        frame.kind != "error"
        and frame.threads == 1
        and frame.live > 0
        and not frame.paused
        and all(len(w.cores_requests) <= 1 for w in frame.workers if w.live)
    )


def statuses_at(address: StatsAddress, timeout: float = 1.0) -> Statuses:
    def read() -> Sequence[str] | None:
        try:
            doc = parse_stats(read_stats(address, timeout=timeout))
        except (StatsError, ValueError):
            return None
        return [w.status if w.accepting else STARTING for w in doc.live_workers]

    return read


def live_statuses(frame: Frame) -> Sequence[str] | None:
    if frame.kind == "error":
        return None
    return [w.status if w.accepting else STARTING for w in frame.workers if w.live]


def statuses_of(poll: Callable[[], Frame]) -> Statuses:
    """The same from full polls (for a caller that has no address)."""
    return lambda: live_statuses(poll())


def all_paused(statuses: Sequence[str] | None) -> bool:
    return bool(statuses) and all(s == "pause" for s in statuses or ())


def all_started(statuses: Sequence[str] | None) -> bool:
    """Read, and no live worker starting (an unread pool is not known to be started)."""
    return statuses is not None and STARTING not in statuses


@dataclass(frozen=True)
class Quiesced:
    settled: bool  # every live worker read `pause` twice in a row
    seconds: float

    def line(self) -> str:
        if self.settled:
            return f"workers paused first ({self.seconds:.1f}s)"
        return f"not every worker paused within {self.seconds:.1f}s; reloaded anyway"


def quiesce(
    fifo: MasterFifo,
    before: Frame,
    statuses: Statuses,
    wait: Callable[[float], None],
    mono: Callable[[], float] = time.monotonic,
) -> Quiesced | None:
    """Send `p` and wait until every worker is paused. None: not paused (the pool is not
    one the pause protects, or `p` could not be sent), so the reload goes as before.
    Whoever calls this must send `r` next, or `resume` when it cannot."""
    if not can_pause(before):
        return None
    try:
        fifo.send("p", before.master_pid)
    except FifoError:
        return None
    start, streak = mono(), 0
    while mono() - start < LONGEST:
        wait(INTERVAL)
        streak = streak + 1 if all_paused(statuses()) else 0
        if streak == 2:
            return Quiesced(True, mono() - start)
    return Quiesced(False, mono() - start)


def resume(fifo: MasterFifo, master_pid: int) -> str | None:
    """A second `p`, which resumes (it toggles). None once sent, else why not."""
    try:
        fifo.send("p", master_pid)
    except FifoError as exc:
        return str(exc)
    return None


def undo(fifo: MasterFifo, master_pid: int) -> str:
    """After `p` and no `r`: resume, and what to say of it."""
    why = resume(fifo, master_pid)
    if why is None:
        return UNDONE
    return f"; the workers are still PAUSED ({why}): send `p` to {fifo.path} to resume"


# The route: validate, write, pause, `r`, verify, else roll back ----------------------------------
@dataclass(frozen=True)
class Limits:
    somaxconn: int | None
    mem_per_worker: int | None = None
    memory_budget: int | None = None


@dataclass(frozen=True)
class ReloadOutcome:
    ok: bool
    detail: str
    seconds: float = 0.0
    restored: bool = False
    frame: Frame | None = None
    interrupted: bool = False  # a stop came during the wait: rolled back, not a failure


def under_emperor(pid: int, proc: Path = PROC) -> bool:
    """A vassal: the Emperor hands its fd down in the environment. It reloads a vassal when
    the vassal's ini changes, not when a file that ini includes does."""
    try:
        return b"UWSGI_EMPEROR_FD=" in (proc / str(pid) / "environ").read_bytes()
    except OSError:
        return False


def check_include(user_ini: Path, override: Path) -> None:
    """The user's ini must end with `ini = <override>`, or writing it changes nothing."""
    target = last_include(read_ini(user_ini))
    resolved = None if target is None else (user_ini.parent / target).resolve()
    if resolved != override.resolve():
        raise SetupError(
            f"{user_ini} does not end with `ini = {override}`; add it as its last line"
        )


def plan(
    user_ini: Path | None, override_path: Path, ov: Override, limits: Limits, master_pid: int = 0
) -> dict[str, str]:
    """Raise OverrideError unless writing `ov` and reloading is safe (SetupError when the
    setup is wrong, which no later attempt can change: the files, or `lazy` on, under which
    a reload never reads them). The user's config."""
    if user_ini is None:
        raise SetupError("the instance's ini is unknown; pass --ini so it can be validated")
    try:
        check_include(user_ini, override_path)
    except OSError as exc:
        raise SetupError(f"{user_ini}: cannot read ({exc.strerror})") from None
    if not os.path.lexists(override_path):
        raise SetupError(
            f"{override_path} is included by {user_ini} but missing; create it with "
            f"`printf '[uwsgi]\\n' > {override_path}` (owned by uWSGI's user)"
        )
    try:
        check_override(override_path)  # not a link, one name, a directory none can swap
    except OSError as exc:
        raise SetupError(f"{override_path}: cannot read ({exc.strerror})") from None
    try:
        config = load_config(user_ini)
    except (IniError, OSError) as exc:
        raise SetupError(str(exc)) from None
    lazy = lazy_where(config, master_pid)
    if lazy:
        raise SetupError(lazy_refusal(lazy))
    validate(
        config,
        ov,
        somaxconn=limits.somaxconn,
        mem_per_worker=limits.mem_per_worker,
        memory_budget=limits.memory_budget,
    )
    return config


def _live_pids(frame: Frame) -> set[int]:
    return {w.pid for w in frame.workers if w.pid > 0 and w.status != "cheap"}


def reloaded_since(before: Frame, frame: Frame, threads: int | None, processes: int) -> bool:
    """Whether `frame` shows a reload since `before`. The counters say so, or they missed it
    (a poll that caught the workers not yet spawned hides their reset) and a value only a
    reload changes now reads as wanted, or every live worker is new while we sent only `r`."""
    if frame.kind in ("reload", "restart") or frame.reloads_seen > before.reloads_seen:
        return True
    threads_now = threads is not None and before.threads != threads == frame.threads
    processes_now = before.workers_max != processes == frame.workers_max
    now, then = _live_pids(frame), _live_pids(before)
    return threads_now or processes_now or bool(now and then and not now & then)


class Reloader:
    def __init__(
        self,
        fifo: MasterFifo,
        override_path: Path,
        user_ini: Path | None,
        poll: Callable[[], Frame],
        *,
        interval: float = 0.25,
        sleep: Callable[[float], None] = time.sleep,
        mono: Callable[[], float] = time.monotonic,
        halt: Halt | None = None,
        statuses: Statuses | None = None,
        lock: ApplyLock | None = None,
    ) -> None:
        self.fifo = fifo
        self.lock = lock  # held: marks a pause under way, for a next holder (actuate/lock.py)
        self.statuses = statuses or statuses_of(poll)
        self.said = ""  # what the last reload's wait did beside waiting
        self.waited = 0.0  # seconds the last reload waited for a starting worker (`started`)
        self.halt = halt
        self.path = Path(override_path)
        self.user_ini = user_ini
        self.poll = poll
        self.interval = interval
        self._sleep = sleep
        self._mono = mono

    def apply(
        self,
        ov: Override,
        before: Frame,
        limits: Limits,
        deadline: float,
        intent: Callable[[], str | None] = lambda: None,
    ) -> ReloadOutcome:
        """Validate, write, reload, verify. Raises OverrideError before writing anything.
        `intent()` is called once validated, just before the write (the audit's intent
        record); what it returns stops the change there, as an OverrideError."""
        config = plan(self.user_ini, self.path, ov, limits, before.master_pid)
        self.fifo.check(before.master_pid)  # before writing: the `r` must be deliverable
        problem = intent()
        if problem:
            raise OverrideError(problem)
        write_atomic(self.path, ov.render())
        start, self.said = self._mono(), ""
        vassal = under_emperor(before.master_pid)
        try:
            paused = self.reload(before, config)
        except FifoError as exc:
            restore(self.path)
            return ReloadOutcome(False, f"`r` not delivered ({exc}); override restored", 0, True)
        # the deadline runs from the `r`: a wait for a starting worker came before it
        frame = self._wait(ov, before, start + self.waited + deadline, paused is not None)
        took = self._mono() - start
        if frame is not None:
            what = f"reloaded in {took:.1f}s" + (" (an Emperor vassal)" if vassal else "")
            what += (f"; {paused.line()}" if paused else "") + self.said
            return ReloadOutcome(True, what, took, frame=frame)
        return self._roll_back(ov, before, took, deadline)

    def started(self, config: Mapping[str, str] | None) -> float:
        """Wait until no live worker is starting, for at most uWSGI's worker mercy (what a
        reload sent meanwhile would cost). Returns the seconds waited."""
        start = self._mono()
        done = all_started(self.statuses())
        if done:
            return 0.0
        until = start + mercy(config or {})
        while not done and self._mono() < self._until(until):
            self._nap(INTERVAL)
            done = all_started(self.statuses())
        waited = self._mono() - start
        self.said += f"; waited {waited:.1f}s for a starting worker" + ("" if done else ", in vain")
        return waited

    def reload(self, before: Frame, config: dict[str, str] | None = None) -> Quiesced | None:
        """`r`, the workers paused first where that protects them. Raises FifoError when
        `r` was not delivered, once the pause is undone. `config`: the user's, if known."""
        paused, left, sent = None, False, False
        pid = before.master_pid
        # a mark an earlier holder left for this master, not yet acted on: only an `r` ends it
        had = self.lock is not None and pid in self.lock.marks
        config = config if config is not None else self._config()
        self.waited = self.started(config)
        try:
            if not pause_unsafe(config, pid):
                if self.lock is not None:  # killed from here to the `r`: the pool stays paused
                    self.lock.mark_reload(pid, time.time())
                paused = quiesce(self.fifo, before, self.statuses, self._nap, self._mono)
            self.fifo.send("r", pid)
            sent = True
        except FifoError as exc:
            if paused is None:
                raise
            why = undo(self.fifo, pid)
            left = why != UNDONE  # still paused: the mark stays for a next holder
            raise FifoError(f"{exc}{why}") from None
        finally:
            if self.lock is not None and (sent or not (left or had)):
                self.lock.clear_reload(pid)
        return paused

    def _config(self) -> dict[str, str] | None:
        try:
            return None if self.user_ini is None else load_config(self.user_ini)
        except (IniError, OSError):
            return None

    def _wait(
        self, ov: Override, before: Frame, until: float, paused: bool = False
    ) -> Frame | None:
        reloaded = False
        while self._mono() < self._until(until):
            self._nap()
            frame = self.poll()
            if frame.kind == "error":
                continue
            reloaded = reloaded or reloaded_since(before, frame, ov.threads, ov.processes)
            if paused and reloaded and 0 < frame.live == frame.paused:
                # New workers that start paused (`lazy` where it was not seen): resume.
                paused = resume(self.fifo, frame.master_pid) is not None
                self.said += "" if paused else "; the new workers started paused: resumed"
            if (
                reloaded
                and frame.master_pid == before.master_pid
                and frame.workers_max == ov.processes
                and frame.live == ov.cheaper_initial
                and (ov.threads is None or frame.threads == ov.threads)
            ):
                return frame
        return None

    def _nap(self, seconds: float | None = None) -> None:
        seconds = self.interval if seconds is None else seconds
        if self.halt is None:
            self._sleep(seconds)
        else:
            self.halt.pause(seconds, self._sleep)

    def _until(self, until: float) -> float:
        return until if self.halt is None else self.halt.until(until)

    def _roll_back(
        self, ov: Override, before: Frame, took: float, deadline: float
    ) -> ReloadOutcome:
        restored = restore(self.path)
        what = f"not back with processes={ov.processes}, {ov.cheaper_initial} live"
        halted = self.halt is not None and self.halt.is_set()
        what += f" within {deadline:g}s" if not halted else " when uwsgitune was stopped"
        what += self.said
        try:
            if restored:  # a plain `r`: no pause whose end this path would not see
                self.fifo.send("r", before.master_pid)
                what += "; previous override restored and reloaded"
        except FifoError as exc:
            what += f"; previous override restored, reload impossible ({exc})"
        return ReloadOutcome(False, what, took, restored, interrupted=halted)
