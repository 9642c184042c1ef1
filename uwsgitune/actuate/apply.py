"""The applying half of `TuneLoop`: a decided change, through the guarded path, audited.

`Applier` holds no policy: the tuner decided (tuner/policy.py for the worker count,
tuner/listen.py for `listen`); this sends `+`/`-` through the FIFO, reloads through the
override ini, restarts for `listen`, verifies, and says what happened as typed `Note`s and
`AuditRecord`s collected for the step's `StepResult`. A failed reload or restart, or a setup
error no retry can fix, stops applying until the user resumes.

A reload or a restart is announced by an `intent` record before anything is written; one
that cannot be written refuses the change. A stop (`halt`) during its wait ends it here, in
the applying thread: verified within the grace, else rolled back and audited `interrupted`.
The waits poll through `poll` (the pipeline's, which publishes each poll at once).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

from uwsgitune.actuate.audit import AuditError, AuditLog
from uwsgitune.actuate.fifo import FifoError, FifoSetupError, MasterFifo
from uwsgitune.actuate.halt import Halt
from uwsgitune.actuate.listen import ListenApplier, RestartCommand
from uwsgitune.actuate.lock import ApplyLock
from uwsgitune.actuate.mercy import reload_deadline_for
from uwsgitune.actuate.override import (
    IniError,
    Override,
    OverrideError,
    SetupError,
    as_int,
    read_keys,
)
from uwsgitune.actuate.peer import PeerCheck
from uwsgitune.actuate.quiesce import statuses_at
from uwsgitune.actuate.reload import Limits, Reloader
from uwsgitune.core.frame import Frame
from uwsgitune.sources.hostfiles import somaxconn
from uwsgitune.sources.watcher import InstanceWatch
from uwsgitune.tuner import Decision, TunerSettings, TunerState
from uwsgitune.tuner.listen import ListenWish
from uwsgitune.tuner.policy import last_hour
from uwsgitune.tuner.result import AuditRecord, Event, Level, Note, NoteKind, Outcome, Result

Mode = Literal["observe", "recommend", "apply"]
MODES: tuple[Mode, ...] = ("observe", "recommend", "apply")
RESUME = "check the instance, then resume"


@dataclass(frozen=True)
class OverrideTarget:
    path: Path  # the override ini uwsgitune owns
    user_ini: Path | None  # the instance's ini, which ends with `ini = <path>`


class Applier:
    """Applies decided changes for `TuneLoop`, which owns this state."""

    watch: InstanceWatch
    fifo: MasterFifo | None
    override: OverrideTarget | None
    settings: TunerSettings
    mode: Mode
    audit: AuditLog | None
    restart: RestartCommand | None
    lock: ApplyLock | None  # held while applying: a pause under way is marked there
    peer: PeerCheck  # whether the stats are proved to be the master's (and the opt-in)
    instance: str
    state: TunerState
    stopped: str | None
    moves: dict[str, int]  # changes applied, by route
    halt: Halt  # a stop asked: the wait in flight ends, no new change starts
    poll: Callable[[], Frame]  # a poll from inside a wait (default: the watch's step)
    _mono: Callable[[], float]
    _wall: Callable[[], float]
    _listen_last: float | None  # the last listen restart tried (monotonic)
    _notes: list[Note]  # what this step said, so far
    _records: list[AuditRecord]  # what this step audited, so far
    _outcome: Outcome | None  # a change this step applied

    def _note(self, level: Level, kind: NoteKind, text: str, fresh: bool = True) -> None:
        self._notes.append(Note(level, kind, text, fresh))

    def _audit(self, event: Event, **fields: Any) -> None:
        rec = AuditRecord(event, self._wall(), self.instance, self.mode, **fields)
        self._records.append(rec)
        if self.audit is not None:
            self.audit.append(rec)

    def _poll_watch(self) -> Frame:
        return self.watch.step()

    def _peer_refused(self) -> str | None:
        """Why nothing may be written now: the stats are not proved to be the master's
        (actuate/peer.py), checked before every change and every resume."""
        return self.peer.refusal(self.watch.address, self.watch.last_poll)

    def _intent(self, what: str, via: str, before: int | None, after: int, pid: int) -> str | None:
        """The `intent` record, before a reload or a restart acts; why not (None: written)."""
        rec = AuditRecord("intent", self._wall(), self.instance, self.mode, action=what,
                          via=via, before=before, after=after, pid=pid)  # fmt: skip
        try:
            if self.audit is not None:
                self.audit.append(rec)
        except AuditError as exc:
            return f"no intent record written: {exc}"
        self._records.append(rec)
        return None

    def _stop(self, why: str, said: str | None = None, fix: str = RESUME) -> None:
        """Stop applying: audited, and said (`said`, else `why`) with the fix."""
        self.stopped = why
        self._audit("stop", reason=why)
        self._note("error", "stop", f"ERROR: {said or why}. STOPPED APPLYING; {fix}.")

    def _verify(self, frame: Frame, now: float) -> None:
        if self.fifo is not None and frame.ok:
            self.fifo.observe(frame.live)
        st = self.state
        if st.expect_live is None or st.expect_since is None or not frame.ok:
            return
        if frame.live == st.expect_live:
            self.state = st.confirmed()
            self._audit("verify", result="verified", after=frame.live)
        elif now - st.expect_since > self.settings.verify_deadline:
            detail = f"live {frame.live}, expected {st.expect_live}"
            if self.fifo is not None and self.fifo.pending is not None:
                try:
                    sent = self.fifo.cancel_pending(frame.live, frame.master_pid)
                    detail += f"; pending `-` cancelled with {sent!r}"
                except FifoError as exc:
                    detail += f"; cancel failed: {exc}"
            deadline = self.settings.verify_deadline
            self._note(
                "warning", "verify", f"WARNING: change not seen within {deadline:g}s: {detail}"
            )
            self.state = st.failed()
            self._audit("verify", result="unconfirmed", detail=detail)

    def _apply(self, d: Decision, frame: Frame, now: float) -> None:
        if self.halt.is_set():
            return self._note("warning", "apply", f"stopping: not applying {d.line()}")
        refused = self._peer_refused()
        if refused:
            return self._setup_stop(d, refused)
        if d.via == "fifo":
            self._apply_fifo(d, frame, now)
        else:
            self._apply_reload(d, frame)

    def _apply_fifo(self, d: Decision, frame: Frame, now: float) -> None:
        if self.fifo is None:
            return self._setup_stop(d, "no FIFO given; pass --fifo")
        try:
            sent = self.fifo.scale(
                frame.live, d.desired, self.settings.min_workers, frame.master_pid, now
            )
        except FifoSetupError as exc:
            return self._setup_stop(d, str(exc))
        except FifoError as exc:
            return self._refused(d, str(exc))
        self.state = d.state
        self.moves["fifo"] += 1
        self._change(d, "sent", f"wrote {sent!r} to {self.fifo.path}")
        return None

    def _override_for(self, d: Decision, frame: Frame | None) -> Override:
        slots = frame.workers_max if frame else d.desired
        processes = self.settings.max_workers if d.desired > slots else max(slots, d.desired)
        cheaper = max(min(self.settings.min_workers, processes - 1), 1)
        listen = None  # a listen applied by a restart stays in the file
        if self.override is not None:
            try:
                listen = as_int(read_keys(self.override.path), "listen")
            except IniError:
                listen = None
        return Override(processes, cheaper, max(d.desired, cheaper), listen=listen)

    def _apply_reload(self, d: Decision, frame: Frame) -> None:
        if self.fifo is None or self.override is None:
            return self._setup_stop(d, "a reload needs --fifo and --override")
        ov = self._override_for(d, frame)
        target = self.override
        reloader = Reloader(
            self.fifo, target.path, target.user_ini, self.poll, halt=self.halt,
            statuses=statuses_at(self.watch.address), lock=self.lock,
        )  # fmt: skip
        limits = Limits(  # somaxconn read now: a poll's is up to SETTINGS_SECONDS old
            somaxconn() or frame.somaxconn, frame.mem_per_worker, self.settings.memory_budget
        )
        deadline = reload_deadline_for(self.settings.reload_deadline, self.override.user_ini)

        def intent() -> str | None:
            return self._intent(d.action, "reload", d.live, d.desired, frame.master_pid)

        try:
            out = reloader.apply(ov, frame, limits, deadline, intent)
        except (SetupError, FifoSetupError) as exc:
            return self._setup_stop(d, str(exc))
        except (OverrideError, FifoError, OSError) as exc:
            return self._refused(d, f"override not written: {exc}")
        self.moves["reload"] += 1
        if out.ok:
            self.state = replace(d.state.confirmed(), last_reload=self._mono())
            self._change(d, "verified", out.detail, ov)
            self._note("info", "apply", f"apply: reload verified: {out.detail}")
            return None
        if out.interrupted:
            return self._interrupted(d, out.detail, ov)
        self.state = d.state.failed()
        self._change(d, "failed", out.detail, ov)
        self._stop(f"reload failed: {out.detail}")
        return None

    def _interrupted(self, d: Decision, detail: str, ov: Override) -> None:
        """A stop came during the reload's wait: rolled back, audited; not a failure."""
        self.state = replace(d.state.failed(), last_reload=self._mono())
        self._change(d, "interrupted", detail, ov)
        self._note("warning", "apply", f"WARNING: reload interrupted by a stop: {detail}")

    def _refused(self, d: Decision, why: str) -> None:
        self._note("error", "apply", f"ERROR: {d.action} {d.live}->{d.desired} refused: {why}")
        # Paced like a change (no retry storm), but nothing was reloaded: nothing settles.
        self.state = replace(d.state.failed(), last_reload=self.state.last_reload)
        self._change(d, "refused", why)

    def _setup_stop(self, d: Decision, why: str) -> None:
        """A setup error: no retry can succeed, so stop applying now and name the fix."""
        self.state = replace(d.state.failed(), last_reload=self.state.last_reload)
        self._change(d, "refused", why)
        fix = f"check the setup with `{self.doctor_command()}`, then resume"
        self._stop(f"setup: {why}", f"{d.action} {d.live}->{d.desired} refused: {why}", fix)

    def doctor_command(self) -> str:
        parts = ["uwsgitune", "doctor", self.instance]
        if self.fifo is not None:
            parts += ["--fifo", str(self.fifo.path)]
        if self.override is not None:
            parts += ["--override", str(self.override.path)]
            if self.override.user_ini is not None:
                parts += ["--ini", str(self.override.user_ini)]
        return " ".join(parts)

    def _change(self, d: Decision, result: Result, detail: str, ov: Override | None = None) -> None:
        """Audit a change applied to the worker count; it is also the step's outcome."""
        self._outcome = Outcome(result, detail)
        self._audit("change", action=d.action, via=d.via, before=d.live, after=d.desired,
                    code=d.code, reason=d.reason, evidence=d.evidence, result=result,
                    detail=detail, moves=dict(self.moves),
                    override=ov.keys() if ov is not None else None)  # fmt: skip

    def _apply_listen(self, wish: ListenWish, target: int, frame: Frame, now: float) -> None:
        assert self.override is not None and self.restart is not None
        if self.halt.is_set():
            return None
        self._listen_last = now
        changes = (*last_hour(self.state.changes, now), now)
        self.state = replace(self.state, last_change=now, changes=changes)
        head = f"listen {wish.current} -> {target}"
        refused = self._peer_refused()
        if refused:  # paced like a restart: said once per attempt, not at every poll
            self._note("error", "listen", f"ERROR: {head} [refused] {refused}")
            return self._listen_change(wish, target, "refused", refused)
        self._note("info", "listen", f"apply: {head} via restart [{wish.finding}] {wish.why}")
        self._note("info", "listen", f"apply: listen [restart] running: {self.restart}")
        applier = ListenApplier(
            self.override.path, self.override.user_ini, self.restart, self.poll, halt=self.halt
        )

        def intent() -> str | None:
            return self._intent("listen", "restart", wish.current, target, frame.master_pid)

        try:
            out = applier.apply(target, frame, self.settings.restart_deadline, intent)
        except (OverrideError, OSError) as exc:
            self._note("error", "listen", f"ERROR: {head} [refused] {exc}")
            return self._listen_change(wish, target, "refused", str(exc))
        self.state = replace(self.state.failed(), last_reload=self._mono())
        self.moves["restart"] += 1
        self._listen_last = self._mono()
        if out.ok:
            self._note("info", "listen", f"apply: listen [verified] {out.detail}")
            return self._listen_change(wish, target, "verified", out.detail)
        if out.interrupted:
            self._note("warning", "listen", f"WARNING: {head} interrupted by a stop: {out.detail}")
            return self._listen_change(wish, target, "interrupted", out.detail)
        self._listen_change(wish, target, "failed", out.detail)
        self._stop(f"listen restart failed: {out.detail}")
        return None

    def _listen_change(self, wish: ListenWish, target: int, result: Result, detail: str) -> None:
        self._outcome = Outcome(result, detail)
        self._audit("change", action="listen", via="restart", before=wish.current, after=target,
                    code=wish.finding, reason=wish.why, result=result, detail=detail)  # fmt: skip
