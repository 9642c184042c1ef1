"""`TuneLoop`: the tuner for one instance: policy decisions, applied through the guarded path.

The caller polls (`watch.step()`), runs the rules once on the window and hands the frame
and the findings to `step`; the daemon does this per instance, `uwsgitune tune` in the
foreground, the TUI beside its screen. Modes: observe (decisions only), recommend (also
the exact command), apply (act). The tuner decides (tuner/policy.py, tuner/listen.py);
this applies (actuate/apply.py). Each step returns a `StepResult` (tuner/result.py): the
decision, its notes, the audit records written, the outcome; callers format it. Every
change is audited with its verification; a failed reload restores the previous override
and stops applying until `resume_apply`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import replace

from uwsgitune.actuate.apply import MODES, Applier, Mode, OverrideTarget
from uwsgitune.actuate.audit import AuditLog, interrupted, last_listen, resume
from uwsgitune.actuate.fifo import MasterFifo
from uwsgitune.actuate.halt import Halt
from uwsgitune.actuate.leftpaused import LEFT_PAUSED_S, STOPS, LeftPaused, Resume
from uwsgitune.actuate.listen import RestartCommand
from uwsgitune.actuate.lock import ApplyLock
from uwsgitune.actuate.peer import PeerCheck
from uwsgitune.core.frame import Frame
from uwsgitune.rules.finding import Finding
from uwsgitune.sources.watcher import InstanceWatch
from uwsgitune.tuner import Decision, TunerSettings, TunerState, decide
from uwsgitune.tuner.listen import ListenDecision, ListenGate, ListenWish, decide_listen
from uwsgitune.tuner.result import Level, NoteKind, Outcome, Result, StepResult

__all__ = ["MODES", "REPEAT_SECONDS", "Mode", "OverrideTarget", "TuneLoop"]
REPEAT_SECONDS = 30.0  # an unchanged decision is said again (a fresh note) after this long


class TuneLoop(Applier):
    def __init__(
        self,
        watch: InstanceWatch,
        fifo: MasterFifo | None,
        override: OverrideTarget | None,
        settings: TunerSettings,
        mode: Mode = "observe",
        audit: AuditLog | None = None,
        *,
        restart: RestartCommand | None = None,
        peer: PeerCheck | None = None,
        mono: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.watch, self.fifo, self.override = watch, fifo, override
        self.settings, self.mode, self.audit = settings, mode, audit
        self.restart = restart
        self.peer = peer or PeerCheck()
        self._mono, self._wall = mono, wall
        self._said: tuple[tuple[str, str, int, int], float] | None = None
        self._listen_said: tuple[int, int | None] | None = None
        self._listen_last = None
        self._listen: ListenDecision | None = None
        self._notes, self._records, self._outcome = [], [], None
        self.instance = str(watch.address)
        self.state = TunerState()
        self.stopped = None
        self.moves = {"fifo": 0, "reload": 0, "restart": 0}
        self.halt, self.poll = Halt(), self._poll_watch
        # pools a reload cut short may have left paused (the audit log, the lock's marks)
        self.left = LeftPaused(fifo, refusal=self._peer_refused)
        self.lock: ApplyLock | None = None  # set by whoever holds it for this loop
        if audit is not None:
            self._resume(audit)

    def _resume(self, audit: AuditLog) -> None:
        """Pacing, limits and a stop from the audit log (AuditError: it cannot be read)."""
        records = list(audit.records(self.instance))
        wall, mono = self._wall(), self._mono()
        self.state, self.stopped = resume(records, self.state, wall, mono)
        self._listen_last = last_listen(records, wall, mono)
        if self.stopped:
            self._note("warning", "stop", f"APPLY STOPPED (from the audit log): {self.stopped}")
        cut = interrupted(records)
        if cut is not None:
            ago = max(0.0, wall - cut.t)
            self._note("warning", "resume", f"INTERRUPTED APPLY (from the audit log, {ago:.0f}s "
                       f"ago): {cut.action} {cut.before}->{cut.after} via {cut.via} on master "
                       f"pid {cut.pid} never finished; counted against the limits, and nothing "
                       "is applied before fresh polls show the instance")  # fmt: skip
            if cut.via == "reload" and cut.pid is not None and ago <= LEFT_PAUSED_S:
                self.left.expect(cut.pid, mono)

    def _left_paused(self, frame: Frame, now: float) -> bool:
        """A reload sends `p` before its `r` (actuate/quiesce.py): one cut short by a kill
        in between leaves the workers paused. The marks the lock's last holder left (it may
        have been another tool, with another audit log) and the audit log's own cut reload
        are watched, and the pool resumed in apply mode, as `LeftPaused` rules (the same
        code `sweep` and the TUI's `a` run). Whether it resumed them (this frame then shows
        them as they were)."""
        said = self.left.take(self.lock, now, self._wall())
        said += self.left.on_frame(frame, now, self.lock, acting=self.mode == "apply")
        for r in said:
            self._say_resume(r)
        return any(r.kind == "resumed" for r in said)

    def resume_left(self) -> bool:
        """For a holder that has just taken the lock and acts at once (the TUI's `a`): the
        marks its earlier holders left, acted on before anything else, waiting for the
        workers to read `pause` (`LeftPaused.settle`). True when a pool was resumed or
        could not be: the step's outcome then says so, and nothing else is applied."""
        said = self.left.settle(
            self.lock,
            self.poll,
            say=self._say_resume,
            wait=self._resume_wait,
            mono=self._mono,
            wall=self._wall,
            halted=self.halt.is_set,
        )
        stop = next((r for r in said if r.kind in STOPS), None)
        if stop is None:
            return False
        if stop.kind == "resumed":
            self._outcome = Outcome("sent", f"{stop.text}; the advice comes from the next poll")
        else:
            self._outcome = Outcome("refused", stop.text)
        return True

    def _resume_wait(self, seconds: float) -> None:
        self.halt.pause(seconds, time.sleep)

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

    def take_notes(self) -> tuple[str, ...]:
        """What the loop said outside a step (a stop resumed from the audit log), taken
        now rather than in the next step's result: for a caller that says it at once."""
        said, self._notes = tuple(n.text for n in self._notes), []
        return said

    def step(self, frame: Frame, findings: Sequence[Finding]) -> StepResult:
        """One poll: decide, and act as the mode allows. `findings`: the rules' findings
        for this poll (the caller runs the rules once per poll, on frames after the last
        result's `listen_since`)."""
        now = self._mono()
        resumed = self._left_paused(frame, now)
        self._verify(frame, now)
        d = decide(self.watch.window.frames(), self.state, self.settings, now)
        if resumed and d.code == "paused":  # the poll before the `p`: not how to resume it
            d = replace(d, reason="resumed after this poll; the next one measures the workers")
        advice = None
        if not d.is_change:
            self.state = d.state
            self._say(f"{self.mode}: {d.line()}", d, now)
        elif self.mode != "apply":
            # A dry run changes nothing, so it spends no pacing: the advice stands until
            # the numbers change, and the TUI's apply key can still act on it.
            self.state = self._dry(d)
            advice = self._advice(d)
            self._say(f"{self.mode}: {d.line()}" + (f" || {advice}" if advice else ""), d, now)
        elif self.stopped:
            line = f"apply STOPPED ({self.stopped}); not applying: {d.line()}"
            self._say(line, d, now, "warning", "stop")
        else:
            self._note("info", "apply", f"apply: {d.line()}")
            self._said = None
            self._apply(d, frame, now)
        if frame.ok and not (d.is_change and self.mode == "apply"):
            self._listen_step(findings, frame, d, now)
        return self._result(d, advice)

    def apply_now(self, expect: tuple[str, int] | None = None) -> StepResult:
        """The TUI's apply key (after its confirmation): decide afresh on the latest frame
        and apply a change through the same guards, whatever the mode. With `expect`
        (the action and count the user confirmed), a different fresh decision is not
        applied. A result without a decision: no frame yet, or a pool a reload cut short
        left paused was resumed first (or could not be): its outcome says which."""
        if self.watch.frame is None or self.resume_left():
            return self._result(None)
        frame = self.watch.frame
        now = self._mono()
        d = decide(self.watch.window.frames(), self.state, self.settings, now)
        wanted = expect is None or (d.action, d.desired) == expect
        if wanted and d.is_change and not self.stopped:
            self._note("info", "apply", f"apply (by hand): {d.line()}")
            self._apply(d, frame, now)
        return self._result(d)

    def resume_apply(self) -> None:
        """Clear a stop; the record is in the next step's result."""
        self.stopped = None
        self._audit("resume", reason="applying resumed by the user")

    def _result(self, d: Decision | None, advice: str | None = None) -> StepResult:
        """What this step said and did; the collected notes and records start afresh."""
        out = StepResult(d, self.mode, tuple(self._notes), tuple(self._records), self.stopped,
                         advice, self._outcome, dict(self.moves), self._listen,
                         self._listen_last)  # fmt: skip
        self._notes, self._records, self._outcome, self._listen = [], [], None, None
        return out

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

    def _listen_step(
        self, findings: Sequence[Finding], frame: Frame, d: Decision, now: float
    ) -> None:
        """The tuner's listen decision: said once per new value; applied only by a restart."""
        applying = self.mode == "apply" and self.restart is not None
        gate = ListenGate(applying, self.override is not None, self.stopped, self._listen_last)
        ld = decide_listen(findings, frame, d, self.state, self.settings, now, gate)
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

    def _advice(self, d: Decision) -> str | None:
        """Recommend mode: the exact command that would apply the change `d`."""
        if self.mode != "recommend":
            return None
        fifo = self.fifo.path if self.fifo else "<master-fifo>"
        if d.via == "fifo":
            sign = "+" if d.desired > d.live else "-"
            return f"run: printf '{sign * abs(d.desired - d.live)}' > {fifo}"
        ov = self._override_for(d, self.watch.frame)
        target = self.override.path if self.override else "<override.ini>"
        return f"write {target}: {' '.join(f'{k}={v}' for k, v in ov.keys().items())}; then r"
