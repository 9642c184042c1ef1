"""`TunerService`: the tuner of one instance, built from plain inputs, stepped once per poll.

Theory of operation
-------------------
Built with what it acts on (`TunerSetup`: the FIFO, the override and the user's ini, the
audit log, the mode, the settings, the restart command, its role in the apply lock, the
peer check) and the function it polls through while an apply waits (the driver's, which
publishes each of those polls: pipeline/driver.py). Nothing assigns its attributes from
outside; `uwsgitune tune`, the TUI's `watch --fifo` and the daemon build it the same way
(`tuner_factory`).

The driver calls `step(state)` once per poll, with the published state: the frame, the
window of frames and the rules' findings of that poll. The tuner never reads a live object:
everything it decides on is in that state, or in the states its own polls return.

1. **Open**, on the first good poll: the FIFO is checked against the master the stats
   name, the settings take the instance's `processes` as the ceiling when none was given,
   the user's ini is found in /proc when not given, the audit log is read back (pacing,
   limits, a stop, a reload cut short), and in apply mode the apply lock is taken. What kept
   the tuner from its mode is in the step's `opened` (`tune` exits on it, the daemon logs
   it and observes, retrying the lock every `lock_retry` seconds).
2. **Decide**: a pool a reload cut short left paused is resumed first (actuate/leftpaused.py);
   a change sent earlier is verified; `decide` (tuner/policy.py) gives the worker count and
   `decide_listen` (tuner/backlog.py) the backlog.
3. **Act as the mode allows**: observe says the decision; recommend says it with the exact
   command; apply sends it by its route (tuner/moves.py: fifo, reload, restart), each
   change audited with the phases it went through. A failed reload or restart, or a setup
   error no retry can fix, stops applying until `resume_apply`.
4. **An apply asked by hand** (the TUI's `a`, `request` from the UI thread): served at the
   next step, after the advice: under the apply lock, taken for that apply only, a pool a
   killed reload left paused is resumed first; else the decision is made afresh and applied
   only if it is still the one the user confirmed. What became of it is `requested`.

`halt` (from any thread or a signal handler) ends an apply in flight within its grace
(verified, else rolled back and audited `interrupted`); `close` releases the lock, in the
driver's thread, after the last step.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from uwsgitune.actuate.audit import AuditError, AuditLog, interrupted, last_listen, resume
from uwsgitune.actuate.fifo import FifoError, FifoSetupError, MasterFifo
from uwsgitune.actuate.leftpaused import LEFT_PAUSED_S, STOPS, LeftPaused, Resume
from uwsgitune.actuate.lock import ApplyLock
from uwsgitune.actuate.override import (
    IniError,
    Override,
    OverrideError,
    SetupError,
    as_int,
    ini_from_proc,
    read_keys,
)
from uwsgitune.actuate.peer import PeerCheck
from uwsgitune.actuate.reload import Halt, Limits, Reloader, reload_deadline_for, statuses_at
from uwsgitune.actuate.restart import ListenApplier, RestartCommand
from uwsgitune.core.address import StatsAddress
from uwsgitune.core.frame import Frame
from uwsgitune.pipeline.state import InstanceState
from uwsgitune.sources.hostfiles import somaxconn
from uwsgitune.tuner import Decision, TunerSettings, TunerState, decide
from uwsgitune.tuner.backlog import ListenDecision, ListenGate, ListenWish, decide_listen
from uwsgitune.tuner.moves import Move, Phase, Route
from uwsgitune.tuner.policy import last_hour
from uwsgitune.tuner.result import (
    Asked,
    AuditRecord,
    Event,
    Level,
    Note,
    NoteKind,
    Opened,
    Outcome,
    Requested,
    Result,
    StepResult,
    Waiting,
)

Mode = Literal["observe", "recommend", "apply"]
MODES: tuple[Mode, ...] = ("observe", "recommend", "apply")
REPEAT_SECONDS = 30.0  # an unchanged decision is said again (a fresh note) after this long
RESUME = "check the instance, then resume"
StatePoll = Callable[[], InstanceState]  # a poll from inside a step: the state it published


@dataclass(frozen=True)
class OverrideTarget:
    path: Path  # the override ini uwsgitune owns
    user_ini: Path | None  # the instance's ini, which ends with `ini = <path>`


@dataclass(frozen=True)
class TunerSetup:
    """What a tuner acts on, and how: plain values from the CLI's flags or the daemon's
    config. `settings(slots)`: the tuner's settings once the instance's `processes` is
    known (the ceiling when none was given)."""

    stats: StatsAddress  # whose stats: the peer check and the reload's pause read it
    fifo: Path
    settings: Callable[[int | None], TunerSettings]
    mode: Mode = "observe"
    override: Path | None = None
    ini: Path | None = None  # the instance's ini (None: from /proc)
    audit: AuditLog | None = None
    restart: RestartCommand | None = None
    role: str = "uwsgitune"  # in the apply lock: who holds it
    peer: PeerCheck = field(default_factory=PeerCheck)
    lock_retry: float | None = None  # seconds between tries of a held lock; None: one try
    lock_dir: Path | None = None  # the apply lock's directory (None: actuate/lock.py's)
    resume_apply: bool = False  # clear a stop the audit log holds (`--resume-apply`)


def tuner_factory(setup: TunerSetup) -> Callable[[Callable[[], InstanceState]], TunerService]:
    """What a driver builds its tuner with (`InstanceDriver(tuner=...)`): the one way the
    CLI, the TUI and the daemon make one."""
    return lambda poll: TunerService(setup, poll)


class TunerService:
    def __init__(
        self,
        setup: TunerSetup,
        poll: StatePoll,
        *,
        mono: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.setup = setup
        self._poll_state = poll
        self._mono, self._wall = mono, wall
        self.mode: Mode = setup.mode if setup.mode != "apply" else "observe"  # until opened
        self.halt_flag = Halt()
        self.fifo = MasterFifo(setup.fifo)
        self.audit = setup.audit
        self.peer = setup.peer
        self.restart = setup.restart
        self.override: OverrideTarget | None = None
        self.settings: TunerSettings | None = None
        self.lock: ApplyLock | None = None
        self.state = TunerState()
        self.stopped: str | None = None
        self.moves = {"fifo": 0, "reload": 0, "restart": 0}
        self.instance = ""
        self.left = LeftPaused(self.fifo, refusal=self._peer_refused)
        self._opened = False
        self._lock_retry_at: float | None = None
        self._now: InstanceState | None = None  # the latest state: the step's, or a poll's
        self._said: tuple[tuple[str, str, int, int], float] | None = None
        self._listen_said: tuple[int, int | None] | None = None
        self._listen_last: float | None = None
        self._listen: ListenDecision | None = None
        self._notes: list[Note] = []
        self._records: list[AuditRecord] = []
        self._outcome: Outcome | None = None
        self._move: Move | None = None  # the change of this step (or verified in it)
        self._sent: Move | None = None  # a FIFO change sent, not yet verified
        self._opening: Opened | None = None
        self._requested: Requested | None = None
        self._request: tuple[str, int] | None = None
        self._guard = threading.Lock()
        self.waiting: Waiting | None = None  # an apply in flight waits for this (in a step)

    # -- what other threads may call -----------------------------------------------------

    def request(self, action: str, desired: int) -> None:
        """From the UI thread: apply (action, desired) at the next step, if still advised."""
        with self._guard:
            self._request = (action, desired)

    def halt(self) -> None:
        """An apply in flight ends within its grace; none starts after (any thread)."""
        self.halt_flag.set()

    # -- the driver's ------------------------------------------------------------------

    def close(self) -> None:
        """After the last step, in the driver's thread: the lock goes."""
        if self.lock is not None:
            self.lock.release()
            self.lock = None

    @property
    def lock_held(self) -> bool:
        return self.lock is not None and self.lock.held

    def step(self, state: InstanceState) -> StepResult | None:
        """One poll: decide, and act as the mode allows (see the module's docstring).
        None before the first good poll (nothing is known to act on yet)."""
        frame = state.frame
        if frame is None:
            return None
        self._now = state
        if not self._opened:
            if not frame.ok:
                return None
            self._open(state, frame)
        self._retry_lock()
        now = self._mono()
        resumed = self._left_paused(frame, now)
        self._verify(frame, now)
        d = self._decide(state, now)
        if resumed and d.code == "paused":  # the poll before the `p`: not how to resume it
            d = replace(d, reason="resumed after this poll; the next one measures the workers")
        advice = self._act(d, frame, now)
        if frame.ok and not (d.is_change and self.mode == "apply"):
            self._listen_step(state, frame, d, now)
        result = self._result(d, advice)
        with self._guard:
            asked, self._request = self._request, None
        return result if asked is None else self._serve(asked, result)

    def resume_apply(self) -> None:
        """Clear a stop; the record is in the next step's result."""
        self.stopped = None
        self._audit("resume", reason="applying resumed by the user")

    # -- opening -------------------------------------------------------------------------

    def _open(self, state: InstanceState, frame: Frame) -> None:
        setup = self.setup
        self._opened = True
        self.instance = frame.source
        self.settings = setup.settings(frame.workers_max)
        fifo_problem = None
        try:
            self.fifo.check(frame.master_pid)
        except FifoError as exc:
            fifo_problem = str(exc)
        if setup.override is not None:
            user_ini = setup.ini or ini_from_proc(frame.master_pid)
            self.override = OverrideTarget(setup.override, user_ini)
        audit_problem = self._read_audit()
        lock_problem = None
        if setup.mode == "apply" and audit_problem is None:
            lock_problem = self._take_lock()
        if setup.resume_apply:
            self.resume_apply()
        self._opening = self._opened_as(fifo_problem, lock_problem, audit_problem)

    def _opened_as(
        self, fifo: str | None = None, lock: str | None = None, audit: str | None = None
    ) -> Opened:
        s = self._tuning()
        return Opened(self.mode, s.min_workers, s.max_workers, fifo, lock, audit)

    def _read_audit(self) -> str | None:
        """Pacing, limits and a stop from the audit log. One that cannot be read is said
        (`opened.audit_problem`), whatever the mode, and leaves the tuner observing:
        applying without its history would reset the hourly and listen limits."""
        if self.audit is None:
            return None
        try:
            records = list(self.audit.records(self.instance))
        except AuditError as exc:
            self.audit = None
            return str(exc)
        wall, mono = self._wall(), self._mono()
        self.state, self.stopped = resume(records, self.state, wall, mono)
        self._listen_last = last_listen(records, wall, mono)
        if self.stopped:
            self._note("warning", "stop", f"APPLY STOPPED (from the audit log): {self.stopped}")
        cut = interrupted(records)
        if cut is not None:
            ago = max(0.0, wall - cut.t)
            self._note(
                "warning",
                "resume",
                f"INTERRUPTED APPLY (from the audit log, {ago:.0f}s ago): {cut.action} "
                f"{cut.before}->{cut.after} via {cut.via} on master pid {cut.pid} never "
                "finished; counted against the limits, and nothing is applied before fresh "
                "polls show the instance",
            )
            if cut.via == "reload" and cut.pid is not None and ago <= LEFT_PAUSED_S:
                self.left.expect(cut.pid, mono)
        return None

    def _take_lock(self) -> str | None:
        """The apply lock, held from here on; else observing (retried if `lock_retry`)."""
        lock = ApplyLock(self.setup.fifo, self.setup.role, self.setup.lock_dir)
        problem = lock.acquire()
        if problem is None:
            self.lock, self.mode = lock, "apply"
            return None
        if self.setup.lock_retry is not None:
            self._lock_retry_at = self._mono() + self.setup.lock_retry
        return problem

    def _retry_lock(self) -> None:
        at = self._lock_retry_at
        if at is None or self._mono() < at:
            return
        self._lock_retry_at = None
        if self._take_lock() is None:  # opened again, in apply mode
            self._opening = self._opened_as()
            self._note("info", "apply", "apply: the apply lock is free: applying from now on")

    # -- deciding ------------------------------------------------------------------------

    def _tuning(self) -> TunerSettings:
        assert self.settings is not None, "opened on the first good poll"
        return self.settings

    def _decide(self, state: InstanceState, now: float) -> Decision:
        return decide(state.frames, self.state, self._tuning(), now, state.latency)

    def _act(self, d: Decision, frame: Frame, now: float) -> str | None:
        """Say `d`, and apply it in apply mode; the recommend-mode command."""
        if not d.is_change:
            self.state = d.state
            self._say(f"{self.mode}: {d.line()}", d, now)
            return None
        if self.mode != "apply":
            # A dry run changes nothing, so it spends no pacing: the advice stands until
            # the numbers change, and the TUI's apply key can still act on it.
            self.state = self._dry(d)
            advice = self._advice(d, frame)
            self._say(f"{self.mode}: {d.line()}" + (f" || {advice}" if advice else ""), d, now)
            return advice
        if self.stopped:
            line = f"apply STOPPED ({self.stopped}); not applying: {d.line()}"
            self._say(line, d, now, "warning", "stop")
            return None
        self._note("info", "apply", f"apply: {d.line()}")
        self._said = None
        self._apply(d, frame, now)
        return None

    def _dry(self, d: Decision) -> TunerState:
        """The next state of a change that was only advised: what was learned, no pacing."""
        old = self.state
        return replace(
            d.state,
            last_change=old.last_change,
            changes=old.changes,
            expect_live=None,
            expect_since=None,
            probe=old.probe,
            last_reload=old.last_reload,
        )

    def _say(
        self, text: str, d: Decision, now: float, level: Level = "info", kind: NoteKind = "decision"
    ) -> None:
        """A decision's note: fresh when it differs from the last one said, or after
        `REPEAT_SECONDS`."""
        key = (d.action, d.code, d.live, d.desired)
        said = self._said
        fresh = said is None or said[0] != key or now - said[1] >= REPEAT_SECONDS
        if fresh:
            self._said = (key, now)
        self._note(level, kind, text, fresh)

    def _advice(self, d: Decision, frame: Frame | None) -> str | None:
        """Recommend mode: the exact command that would apply the change `d`."""
        if self.mode != "recommend":
            return None
        if d.via == "fifo":
            sign = "+" if d.desired > d.live else "-"
            return f"run: printf '{sign * abs(d.desired - d.live)}' > {self.fifo.path}"
        ov = self._override_for(d, frame)
        target = self.override.path if self.override else "<override.ini>"
        return f"write {target}: {' '.join(f'{k}={v}' for k, v in ov.keys().items())}; then r"

    # -- a pool a reload cut short left paused ---------------------------------------------

    def _left_paused(self, frame: Frame, now: float) -> bool:
        """A reload sends `p` before its `r` (actuate/reload.py): one cut short by a kill
        in between leaves the workers paused. The marks the lock's last holder left (it may
        have been another tool, with another audit log) and the audit log's own cut reload
        are watched, and the pool resumed in apply mode, as `LeftPaused` rules (the same
        code `sweep` runs). Whether it resumed them (this frame then shows them as they
        were)."""
        said = self.left.take(self.lock, now, self._wall())
        said += self.left.on_frame(frame, now, self.lock, acting=self.mode == "apply")
        for r in said:
            self._say_resume(r)
        return any(r.kind == "resumed" for r in said)

    def _resume_left(self) -> Resume | None:
        """For the TUI's `a`, which has just taken the lock: the marks its earlier holders
        left, acted on before anything else, waiting for the workers to read `pause`. The
        resume (or its refusal) when there was one: nothing else is applied then."""
        said = self.left.settle(
            self.lock,
            self._poll,
            say=self._say_resume,
            wait=lambda seconds: self.halt_flag.pause(seconds, time.sleep),
            mono=self._mono,
            wall=self._wall,
            halted=self.halt_flag.is_set,
        )
        return next((r for r in said if r.kind in STOPS), None)

    def _say_resume(self, r: Resume) -> None:
        """A note, and for a `p` sent or not sent, an audit record."""
        if r.kind in STOPS:
            result: Result = "sent" if r.kind == "resumed" else "refused"
            self._audit(
                "change",
                action="resume",
                via="fifo",
                before=r.live,
                after=r.live,
                result=result,
                detail=r.detail,
                pid=r.pid,
            )
        head = {"resumed": "apply: ", "waiting": "apply: ", "refused": "ERROR: "}
        self._note(r.level, "resume", head.get(r.kind, "WARNING: ") + r.text)

    # -- an apply asked by hand (the TUI's `a`) --------------------------------------------

    def _serve(self, expect: tuple[str, int], advised: StepResult) -> StepResult:
        """Apply what the user confirmed, under the apply lock taken for it (already held in
        apply mode), on fresh stats: the outcome is `requested`."""
        held = self.lock is not None
        if not held:
            lock = ApplyLock(self.setup.fifo, self.setup.role, self.setup.lock_dir)
            problem = lock.acquire()
            if problem is not None:
                return replace(advised, requested=Requested("locked", f"not applied: {problem}"))
            self.lock = lock
        try:
            now = self._apply_now(expect)
        finally:
            if not held and self.lock is not None:
                self.lock.release()
                self.lock = None
        return _merged(advised, now)

    def _apply_now(self, expect: tuple[str, int]) -> StepResult:
        """Decide afresh on the latest state and apply a change through the same guards,
        whatever the mode, only if it is still (action, count) the user confirmed."""
        state = self._now
        resumed = self._resume_left()
        if resumed is not None:
            if resumed.kind == "resumed":
                text = f"not applied: {resumed.text}; the advice comes from the next poll"
                return self._result(None, asked=Requested("resumed", text))
            return self._result(None, asked=Requested("refused", f"not applied: {resumed.text}"))
        state = self._now or state
        frame = state.frame if state is not None else None
        if state is None or frame is None or not frame.ok:
            return self._result(None, asked=Requested("no-stats", "not applied: no stats yet"))
        now = self._mono()
        d = self._decide(state, now)
        if (d.action, d.desired) != expect:
            why = f"the advice is now {d.headline()} ({d.reason})"
            return self._result(d, asked=Requested("changed", f"not applied: {why}"))
        if not d.is_change or self.stopped:
            why = f"applying is stopped ({self.stopped})"
            return self._result(d, asked=Requested("stopped", f"not applied: {why}"))
        self._note("info", "apply", f"apply (by hand): {d.line()}")
        self._apply(d, frame, now)
        out = self._outcome
        if out is not None and out.ok:
            text = f"applied: {d.headline()} ({out.detail})"
            return self._result(d, asked=Requested("applied", text))
        kind: Asked = "failed" if out is not None and out.result == "failed" else "refused"
        text = f"not applied: {out.result}: {out.detail}" if out else "not applied"
        return self._result(d, asked=Requested(kind, text))

    # -- applying ------------------------------------------------------------------------

    def _poll(self) -> Frame:
        """A poll from inside a wait: the driver publishes it; the tuner keeps its state."""
        self._now = self._poll_state()
        assert self._now.frame is not None
        return self._now.frame

    @contextmanager
    def _waiting(self, what: str, seconds: float) -> Iterator[None]:
        now = self._mono()
        self.waiting = Waiting(what, now, now + seconds)
        try:
            yield
        finally:
            self.waiting = None

    def _peer_refused(self) -> str | None:
        """Why nothing may be written now: the stats are not proved to be the master's
        (actuate/peer.py), checked before every change and every resume."""
        state = self._now
        return None if state is None else self.peer.refusal(self.setup.stats, state.poll)

    def _note(self, level: Level, kind: NoteKind, text: str, fresh: bool = True) -> None:
        self._notes.append(Note(level, kind, text, fresh))

    def _audit(self, event: Event, **fields: Any) -> None:
        rec = AuditRecord(event, self._wall(), self.instance, self.mode, **fields)
        self._records.append(rec)
        if self.audit is not None:
            self.audit.append(rec)

    def _intent(
        self, move: Move, what: str, before: int | None, after: int, pid: int
    ) -> str | None:
        """The `intent` record, before a reload or a restart acts; why not (None: written,
        and the move is at `intent`)."""
        rec = AuditRecord(
            "intent",
            self._wall(),
            self.instance,
            self.mode,
            action=what,
            via=move.route,
            before=before,
            after=after,
            pid=pid,
        )
        try:
            if self.audit is not None:
                self.audit.append(rec)
        except AuditError as exc:
            return f"no intent record written: {exc}"
        self._records.append(rec)
        move.to("intent")
        return None

    def _stop(self, why: str, said: str | None = None, fix: str = RESUME) -> None:
        """Stop applying: audited, and said (`said`, else `why`) with the fix."""
        self.stopped = why
        self._audit("stop", reason=why)
        self._note("error", "stop", f"ERROR: {said or why}. STOPPED APPLYING; {fix}.")

    def _verify(self, frame: Frame, now: float) -> None:
        if frame.ok:
            self.fifo.observe(frame.live)
        st = self.state
        if st.expect_live is None or st.expect_since is None or not frame.ok:
            return
        if frame.live == st.expect_live:
            self.state = st.confirmed()
            self._verified("verified")
            self._audit("verify", result="verified", after=frame.live)
        elif now - st.expect_since > self._tuning().verify_deadline:
            detail = f"live {frame.live}, expected {st.expect_live}"
            if self.fifo.pending is not None:
                try:
                    sent = self.fifo.cancel_pending(frame.live, frame.master_pid)
                    detail += f"; pending `-` cancelled with {sent!r}"
                except FifoError as exc:
                    detail += f"; cancel failed: {exc}"
            deadline = self._tuning().verify_deadline
            self._note(
                "warning", "verify", f"WARNING: change not seen within {deadline:g}s: {detail}"
            )
            self.state = st.failed()
            self._verified("unconfirmed")
            self._audit("verify", result="unconfirmed", detail=detail)

    def _verified(self, phase: Phase) -> None:
        """The FIFO move sent at an earlier poll ends here: in this step's result."""
        sent, self._sent = self._sent, None
        if sent is not None and sent.phase == "sent":
            self._move = sent.to(phase)

    def _apply(self, d: Decision, frame: Frame, now: float) -> None:
        route: Route = "fifo" if d.via == "fifo" else "reload"
        move = self._move = Move(route)
        if self.halt_flag.is_set():
            self._note("warning", "apply", f"stopping: not applying {d.line()}")
            return
        refused = self._peer_refused()
        if refused:
            self._setup_stop(move, d, refused)
        elif route == "fifo":
            self._apply_fifo(move, d, frame, now)
        else:
            self._apply_reload(move, d, frame)

    def _apply_fifo(self, move: Move, d: Decision, frame: Frame, now: float) -> None:
        floor = self._tuning().min_workers
        try:
            sent = self.fifo.scale(frame.live, d.desired, floor, frame.master_pid, now)
        except FifoSetupError as exc:
            return self._setup_stop(move, d, str(exc))
        except FifoError as exc:
            return self._refused(move, d, str(exc))
        self.state = d.state
        self.moves["fifo"] += 1
        self._sent = move  # verified (or not) at a later poll
        self._change(move.to("sent"), d, f"wrote {sent!r} to {self.fifo.path}")
        return None

    def _override_for(self, d: Decision, frame: Frame | None) -> Override:
        settings = self._tuning()
        slots = frame.workers_max if frame else d.desired
        processes = settings.max_workers if d.desired > slots else max(slots, d.desired)
        cheaper = max(min(settings.min_workers, processes - 1), 1)
        listen = None  # a listen applied by a restart stays in the file
        if self.override is not None:
            try:
                listen = as_int(read_keys(self.override.path), "listen")
            except IniError:
                listen = None
        return Override(processes, cheaper, max(d.desired, cheaper), listen=listen)

    def _apply_reload(self, move: Move, d: Decision, frame: Frame) -> None:
        if self.override is None:
            return self._setup_stop(move, d, "a reload needs --fifo and --override")
        settings = self._tuning()
        ov = self._override_for(d, frame)
        target = self.override
        reloader = Reloader(
            self.fifo,
            target.path,
            target.user_ini,
            self._poll,
            halt=self.halt_flag,
            statuses=statuses_at(self.setup.stats),  # the statuses alone: see actuate/reload.py
            lock=self.lock,
        )
        limits = Limits(  # somaxconn read now: a poll's is up to SETTINGS_SECONDS old
            somaxconn() or frame.somaxconn, frame.mem_per_worker, settings.memory_budget
        )
        deadline = reload_deadline_for(settings.reload_deadline, target.user_ini)

        def intent() -> str | None:
            return self._intent(move, d.action, d.live, d.desired, frame.master_pid)

        what = f"the reload: master {frame.master_pid} back with {ov.cheaper_initial} live workers"
        try:
            with self._waiting(what, deadline):
                out = reloader.apply(ov, frame, limits, deadline, intent)
        except (SetupError, FifoSetupError) as exc:
            return self._setup_stop(move, d, str(exc))
        except (OverrideError, FifoError, OSError) as exc:
            return self._refused(move, d, f"override not written: {exc}")
        self.moves["reload"] += 1
        move.to("sent")
        if out.ok:
            self.state = replace(d.state.confirmed(), last_reload=self._mono())
            self._change(move.to("verified"), d, out.detail, ov)
            self._note("info", "apply", f"apply: reload verified: {out.detail}")
            return None
        if out.interrupted:
            self.state = replace(d.state.failed(), last_reload=self._mono())
            self._change(move.to("interrupted"), d, out.detail, ov)
            self._note("warning", "apply", f"WARNING: reload interrupted by a stop: {out.detail}")
            return None
        self.state = d.state.failed()
        self._change(move.to("failed"), d, out.detail, ov)
        self._stop(f"reload failed: {out.detail}")
        return None

    def _refused(self, move: Move, d: Decision, why: str) -> None:
        self._note("error", "apply", f"ERROR: {d.headline()} refused: {why}")
        # Paced like a change (no retry storm), but nothing was reloaded: nothing settles.
        self.state = replace(d.state.failed(), last_reload=self.state.last_reload)
        self._change(move.to("refused"), d, why)

    def _setup_stop(self, move: Move, d: Decision, why: str) -> None:
        """A setup error: no retry can succeed, so stop applying now and name the fix."""
        self.state = replace(d.state.failed(), last_reload=self.state.last_reload)
        self._change(move.to("refused"), d, why)
        fix = f"check the setup with `{self.doctor_command()}`, then resume"
        self._stop(f"setup: {why}", f"{d.headline()} refused: {why}", fix)

    def doctor_command(self) -> str:
        parts = ["uwsgitune", "doctor", self.instance, "--fifo", str(self.fifo.path)]
        if self.override is not None:
            parts += ["--override", str(self.override.path)]
            if self.override.user_ini is not None:
                parts += ["--ini", str(self.override.user_ini)]
        return " ".join(parts)

    def _change(self, move: Move, d: Decision, detail: str, ov: Override | None = None) -> None:
        """Audit a change applied to the worker count; it is also the step's outcome."""
        result = _result_of(move)
        self._outcome = Outcome(result, detail)
        self._audit(
            "change",
            action=d.action,
            via=d.via,
            before=d.live,
            after=d.desired,
            code=d.code,
            reason=d.reason,
            evidence=d.evidence,
            result=result,
            detail=detail,
            moves=dict(self.moves),
            override=ov.keys() if ov is not None else None,
        )

    # -- listen ------------------------------------------------------------------------

    def _listen_step(self, state: InstanceState, frame: Frame, d: Decision, now: float) -> None:
        """The tuner's listen decision: said once per new value; applied only by a restart."""
        applying = self.mode == "apply" and self.restart is not None
        gate = ListenGate(applying, self.override is not None, self.stopped, self._listen_last)
        ld = decide_listen(state.findings, frame, d, self.state, self._tuning(), now, gate)
        self._listen = ld
        if ld is None:
            self._listen_said = None
            return
        wish = ld.wish
        key = (wish.wanted, wish.target)
        fresh = key != self._listen_said
        if ld.kind == "apply" and wish.target is not None:
            return self._apply_listen(wish, wish.target, frame, now)
        self._listen_said = key
        if ld.kind == "held":
            text = f"apply: listen {wish.current} -> {wish.target} [held] {ld.why}"
        else:
            text = (
                f"{self.mode}: listen {wish.current} -> {wish.target or wish.wanted} "
                f"[{wish.finding}] {wish.why}{self._listen_advice(wish)}"
            )
        self._note("info", "listen", text, fresh)
        return None

    def _listen_advice(self, wish: ListenWish) -> str:
        if wish.target is None:
            return ""
        if not wish.appliable:
            return "; advice only (uwsgitune applies listen for bursts, not for a short pool)"
        if self.restart is None:
            return "; a reload keeps the bound socket: give a restart command to apply it"
        if self.mode == "recommend":
            target = self.override.path if self.override else "<override.ini>"
            return f" || write listen = {wish.target} to {target}; then run: {self.restart}"
        return ""

    def _apply_listen(self, wish: ListenWish, target: int, frame: Frame, now: float) -> None:
        assert self.override is not None and self.restart is not None
        if self.halt_flag.is_set():
            return None
        move = self._move = Move("restart")
        self._listen_last = now
        changes = (*last_hour(self.state.changes, now), now)
        self.state = replace(self.state, last_change=now, changes=changes)
        head = f"listen {wish.current} -> {target}"
        refused = self._peer_refused()
        if refused:  # paced like a restart: said once per attempt, not at every poll
            self._note("error", "listen", f"ERROR: {head} [refused] {refused}")
            return self._listen_change(move.to("refused"), wish, target, refused)
        self._note("info", "listen", f"apply: {head} via restart [{wish.finding}] {wish.why}")
        self._note("info", "listen", f"apply: listen [restart] running: {self.restart}")
        applier = ListenApplier(
            self.override.path,
            self.override.user_ini,
            self.restart,
            self._poll,
            halt=self.halt_flag,
        )

        def intent() -> str | None:
            return self._intent(move, "listen", wish.current, target, frame.master_pid)

        deadline = self._tuning().restart_deadline
        try:
            with self._waiting(f"the restart: every backlog at {target}", deadline):
                out = applier.apply(target, frame, deadline, intent)
        except (OverrideError, OSError) as exc:
            self._note("error", "listen", f"ERROR: {head} [refused] {exc}")
            return self._listen_change(move.to("refused"), wish, target, str(exc))
        self.state = replace(self.state.failed(), last_reload=self._mono())
        self.moves["restart"] += 1
        self._listen_last = self._mono()
        move.to("sent")
        if out.ok:
            self._note("info", "listen", f"apply: listen [verified] {out.detail}")
            return self._listen_change(move.to("verified"), wish, target, out.detail)
        if out.interrupted:
            self._note("warning", "listen", f"WARNING: {head} interrupted by a stop: {out.detail}")
            return self._listen_change(move.to("interrupted"), wish, target, out.detail)
        self._listen_change(move.to("failed"), wish, target, out.detail)
        self._stop(f"listen restart failed: {out.detail}")
        return None

    def _listen_change(self, move: Move, wish: ListenWish, target: int, detail: str) -> None:
        result = _result_of(move)
        self._outcome = Outcome(result, detail)
        self._audit(
            "change",
            action="listen",
            via="restart",
            before=wish.current,
            after=target,
            code=wish.finding,
            reason=wish.why,
            result=result,
            detail=detail,
        )

    # -- the result ------------------------------------------------------------------------

    def _result(
        self, d: Decision | None, advice: str | None = None, asked: Requested | None = None
    ) -> StepResult:
        """What this step said and did; the collected notes and records start afresh."""
        out = StepResult(
            d,
            self.mode,
            tuple(self._notes),
            tuple(self._records),
            self.stopped,
            advice,
            self._outcome,
            dict(self.moves),
            self._listen,
            self._listen_last,
            move=self._move.record() if self._move is not None else None,
            opened=self._opening,
            requested=asked,
        )
        self._notes, self._records, self._outcome, self._listen = [], [], None, None
        self._move = self._opening = None
        return out


RESULTS: dict[str, Result] = {
    "sent": "sent",
    "verified": "verified",
    "unconfirmed": "unconfirmed",
    "refused": "refused",
    "failed": "failed",
    "interrupted": "interrupted",
}


def _result_of(move: Move) -> Result:
    """What the audit log says of a change whose move is at its phase (sent or final)."""
    return RESULTS[move.phase]


def _merged(advised: StepResult, now: StepResult) -> StepResult:
    """The poll's advice with what the apply asked by hand did (`now`)."""
    return replace(
        now,
        decision=now.decision or advised.decision,
        advice=advised.advice,
        notes=(*advised.notes, *now.notes),
        records=(*advised.records, *now.records),
        listen=advised.listen,
        listen_since=advised.listen_since,
        opened=advised.opened,
    )
