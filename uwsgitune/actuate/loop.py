"""`TuneLoop`: the tuner for one instance: policy decisions, applied through the guarded path.

The caller polls (`watch.step()`) and hands each frame to `step`; the daemon does this per
instance, `uwsgitune tune` in the foreground. Modes: observe (log decisions), recommend
(also say the exact command), apply (act). Every change is audited with its verification;
a failed reload restores the previous override and stops applying until `resume_apply`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

from uwsgitune.actuate.audit import AuditLog, last_listen, resume
from uwsgitune.actuate.fifo import FifoError, FifoSetupError, MasterFifo
from uwsgitune.actuate.listen import ListenApplier, ListenWish, RestartCommand, listen_wish
from uwsgitune.actuate.override import (
    IniError,
    Override,
    OverrideError,
    SetupError,
    as_int,
    read_keys,
)
from uwsgitune.actuate.reload import Limits, Reloader
from uwsgitune.core.frame import Frame
from uwsgitune.rules.engine import EngineState, evaluate
from uwsgitune.rules.finding import Finding
from uwsgitune.sources.host import somaxconn
from uwsgitune.sources.watcher import InstanceWatch
from uwsgitune.tuner import Decision, TunerSettings, TunerState, decide

Mode = Literal["observe", "recommend", "apply"]
REPEAT_SECONDS = 30.0  # an unchanged decision is logged again after this long
MODES: tuple[Mode, ...] = ("observe", "recommend", "apply")


@dataclass(frozen=True)
class OverrideTarget:
    path: Path  # the override ini uwsgitune owns
    user_ini: Path | None  # the instance's ini, which ends with `ini = <path>`


class TuneLoop:
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
        log: Callable[[str], None] = print,
        mono: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.watch, self.fifo, self.override = watch, fifo, override
        self.settings, self.mode, self.audit = settings, mode, audit
        self.restart = restart
        self.log, self._mono, self._wall = log, mono, wall
        self._rules = EngineState()
        self._said: tuple[tuple[str, str, int, int], float] | None = None
        self._listen_said: tuple[int, int | None] | None = None
        self._listen_last: float | None = None
        self.instance = str(watch.address)
        self.state = TunerState()
        self.stopped: str | None = None
        self.last: Decision | None = None
        self.outcome: tuple[str, str] | None = None  # (result, detail) of the last change
        self.moves: dict[str, int] = {"fifo": 0, "reload": 0, "restart": 0}  # changes applied
        if audit is not None:
            records = list(audit.records(self.instance))
            self.state, self.stopped = resume(records, self.state, wall(), mono())
            self._listen_last = last_listen(records, wall(), mono())
            if self.stopped:
                self.log(f"APPLY STOPPED (from the audit log): {self.stopped}")

    def step(self, frame: Frame, findings: Sequence[Finding] | None = None) -> Decision:
        """One poll: decide, and act as the mode allows. `findings`: the rules' findings
        for this poll when the caller already ran them (the daemon); else the loop runs
        the rules itself for its listen advice."""
        now = self._mono()
        self._verify(frame, now)
        d = decide(self.watch.window.frames(), self.state, self.settings, now)
        self.last = d
        if not d.is_change:
            self.state = d.state
            self._say(f"{self.mode}: {d.line()}", d, now)
        elif self.mode != "apply":
            # A dry run changes nothing, so it spends no pacing: the advice stands until
            # the numbers change, and the TUI's apply key can still act on it.
            self.state = self._dry(d)
            self._say(f"{self.mode}: {d.line()}{self._advice(d)}", d, now)
        elif self.stopped:
            self._say(f"apply STOPPED ({self.stopped}); not applying: {d.line()}", d, now)
        else:
            self.log(f"apply: {d.line()}")
            self._said = None
            self._apply(d, frame, now)
        if frame.ok and not (d.is_change and self.mode == "apply"):
            self._listen_step(frame, d, now, findings)
        return d

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

    def _say(self, line: str, d: Decision, now: float) -> None:
        """Log a decision when it differs from the last one said, or after `REPEAT_SECONDS`."""
        key = (d.action, d.code, d.live, d.desired)
        if self._said is not None and self._said[0] == key and now - self._said[1] < REPEAT_SECONDS:
            return
        self._said = (key, now)
        self.log(line)

    def _listen_step(
        self, frame: Frame, d: Decision, now: float, findings: Sequence[Finding] | None
    ) -> None:
        """The rules' listen advice: said once per new value; applied only by a restart."""
        if findings is None:
            frames = self.watch.window.frames()
            if self._listen_last is not None:  # nothing from before the last restart counts
                frames = tuple(f for f in frames if f.mono > self._listen_last)
            findings, self._rules = evaluate(frames, state=self._rules)
        wish = listen_wish(findings, frame)
        if wish is None:
            self._listen_said = None
            return
        key = (wish.wanted, wish.target)
        applying = self.mode == "apply" and self.restart is not None and wish.appliable
        if key != self._listen_said and not applying:
            self._listen_said = key
            self.log(
                f"{self.mode}: listen {wish.current} -> {wish.target or wish.wanted} "
                f"[{wish.finding}] {wish.why}{self._listen_advice(wish)}"
            )
        if not applying or wish.target is None:
            return
        why = self._listen_held(d, now)
        if why:
            if key != self._listen_said:
                self._listen_said = key
                self.log(f"apply: listen {wish.current} -> {wish.target} [held] {why}")
            return
        self._apply_listen(wish, wish.target, frame, now)

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

    def _listen_held(self, d: Decision, now: float) -> str | None:
        if self.stopped:
            return f"apply STOPPED ({self.stopped})"
        if self.override is None:
            return "no --override to write listen to"
        if d.code in ("stale", "settling", "in-flight", "no-rates", "unreachable", "emperor"):
            return d.reason
        hour = [c for c in self.state.changes if now - c < 3600]
        if len(hour) >= self.settings.max_changes_per_hour:
            return f"{len(hour)} changes in the last hour"
        if (
            self._listen_last is not None
            and now - self._listen_last < self.settings.listen_cooldown
        ):
            cool = self.settings.listen_cooldown
            return f"a listen change {now - self._listen_last:.0f}s ago (cool-down {cool:g}s)"
        return None

    def _apply_listen(self, wish: ListenWish, target: int, frame: Frame, now: float) -> None:
        assert self.override is not None and self.restart is not None
        self._listen_last = now
        self.state = replace(
            self.state,
            last_change=now,
            changes=(*(c for c in self.state.changes if now - c < 3600), now),
        )
        rec: dict[str, Any] = {
            "event": "change",
            "action": "listen",
            "via": "restart",
            "before": wish.current,
            "after": target,
            "code": wish.finding,
            "reason": wish.why,
        }
        self.log(
            f"apply: listen {wish.current} -> {target} via restart [{wish.finding}] {wish.why}"
        )
        self.log(f"apply: listen [restart] running: {self.restart}")
        applier = ListenApplier(
            self.override.path, self.override.user_ini, self.restart, self.watch.step
        )
        try:
            out = applier.apply(target, frame, self.settings.restart_deadline)
        except (OverrideError, OSError) as exc:
            self.log(f"ERROR: listen {wish.current} -> {target} [refused] {exc}")
            self._audit({**rec, "result": "refused", "detail": str(exc)})
            return
        self.state = replace(self.state.failed(), last_reload=self._mono())
        self.moves["restart"] += 1
        self._listen_last, self._rules = self._mono(), EngineState()
        if out.ok:
            self.log(f"apply: listen [verified] {out.detail}")
            self._audit({**rec, "result": "verified", "detail": out.detail})
            return
        self.stopped = f"listen restart failed: {out.detail}"
        self._audit({**rec, "result": "failed", "detail": out.detail})
        self._audit({"event": "stop", "reason": self.stopped})
        self.log(f"ERROR: {self.stopped}. STOPPED APPLYING; check the instance, then resume.")

    def apply_now(self, expect: tuple[str, int] | None = None) -> Decision | None:
        """The TUI's apply key (after its confirmation): decide afresh on the latest frame
        and apply a change through the same guards, whatever the mode. With `expect`
        (the action and count the user confirmed), a different fresh decision is not
        applied. None: no frame yet."""
        frame = self.watch.frame
        if frame is None:
            return None
        now = self._mono()
        d = decide(self.watch.window.frames(), self.state, self.settings, now)
        self.last = d
        if expect is not None and (d.action, d.desired) != expect:
            return d
        if d.is_change and not self.stopped:
            self.log(f"apply (by hand): {d.line()}")
            self._apply(d, frame, now)
        return d

    def resume_apply(self) -> None:
        self.stopped = None
        self._audit({"event": "resume", "reason": "applying resumed by the user"})

    def _advice(self, d: Decision) -> str:
        if self.mode != "recommend":
            return ""
        fifo = self.fifo.path if self.fifo else "<master-fifo>"
        if d.via == "fifo":
            sign = "+" if d.desired > d.live else "-"
            return f" || run: printf '{sign * abs(d.desired - d.live)}' > {fifo}"
        ov = self._override_for(d, self.watch.frame)
        target = self.override.path if self.override else "<override.ini>"
        return f" || write {target}: {' '.join(f'{k}={v}' for k, v in ov.keys().items())}; then r"

    def _verify(self, frame: Frame, now: float) -> None:
        if self.fifo is not None and frame.ok:
            self.fifo.observe(frame.live)
        st = self.state
        if st.expect_live is None or st.expect_since is None or not frame.ok:
            return
        if frame.live == st.expect_live:
            self.state = st.confirmed()
            self._audit({"event": "verify", "result": "verified", "after": frame.live})
        elif now - st.expect_since > self.settings.verify_deadline:
            detail = f"live {frame.live}, expected {st.expect_live}"
            if self.fifo is not None and self.fifo.pending is not None:
                try:
                    sent = self.fifo.cancel_pending(frame.live, frame.master_pid)
                    detail += f"; pending `-` cancelled with {sent!r}"
                except FifoError as exc:
                    detail += f"; cancel failed: {exc}"
            self.log(
                f"WARNING: change not seen within {self.settings.verify_deadline:g}s: {detail}"
            )
            self.state = st.failed()
            self._audit({"event": "verify", "result": "unconfirmed", "detail": detail})

    def _apply(self, d: Decision, frame: Frame, now: float) -> None:
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
        self._audit(self._change(d, "sent", f"wrote {sent!r} to {self.fifo.path}"))

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
        reloader = Reloader(self.fifo, self.override.path, self.override.user_ini, self.watch.step)
        limits = Limits(
            frame.somaxconn or somaxconn(), frame.mem_per_worker, self.settings.memory_budget
        )
        try:
            out = reloader.apply(ov, frame, limits, self.settings.reload_deadline)
        except (SetupError, FifoSetupError) as exc:
            return self._setup_stop(d, str(exc))
        except (OverrideError, FifoError, OSError) as exc:
            return self._refused(d, f"override not written: {exc}")
        self.moves["reload"] += 1
        if out.ok:
            self.state = replace(d.state.confirmed(), last_reload=self._mono())
            self._audit(self._change(d, "verified", out.detail, ov))
            self.log(f"apply: reload verified: {out.detail}")
            return None
        self.stopped = f"reload failed: {out.detail}"
        self.state = d.state.failed()
        self._audit(self._change(d, "failed", out.detail, ov))
        self._audit({"event": "stop", "reason": self.stopped})
        self.log(f"ERROR: {self.stopped}. STOPPED APPLYING; check the instance, then resume.")
        return None

    def _refused(self, d: Decision, why: str) -> None:
        self.log(f"ERROR: {d.action} {d.live}->{d.desired} refused: {why}")
        # Paced like a change (no retry storm), but nothing was reloaded: nothing settles.
        self.state = replace(d.state.failed(), last_reload=self.state.last_reload)
        self._audit(self._change(d, "refused", why))

    def _setup_stop(self, d: Decision, why: str) -> None:
        """A setup error: no retry can succeed, so stop applying now and name the fix."""
        self.stopped = f"setup: {why}"
        self.state = replace(d.state.failed(), last_reload=self.state.last_reload)
        self._audit(self._change(d, "refused", why))
        self._audit({"event": "stop", "reason": self.stopped})
        self.log(
            f"ERROR: {d.action} {d.live}->{d.desired} refused: {why}. STOPPED APPLYING; "
            f"check the setup with `{self.doctor_command()}`, then resume."
        )

    def doctor_command(self) -> str:
        parts = ["uwsgitune", "doctor", self.instance]
        if self.fifo is not None:
            parts += ["--fifo", str(self.fifo.path)]
        if self.override is not None:
            parts += ["--override", str(self.override.path)]
            if self.override.user_ini is not None:
                parts += ["--ini", str(self.override.user_ini)]
        return " ".join(parts)

    def _change(
        self, d: Decision, result: str, detail: str, ov: Override | None = None
    ) -> dict[str, Any]:
        """The audit record of a change, which is also its `outcome`."""
        self.outcome = (result, detail)
        rec: dict[str, Any] = {
            "event": "change",
            "action": d.action,
            "via": d.via,
            "before": d.live,
            "after": d.desired,
            "code": d.code,
            "reason": d.reason,
            "evidence": d.evidence,
            "result": result,
            "detail": detail,
            "moves": dict(self.moves),  # changes applied so far, by route
        }
        if ov is not None:
            rec["override"] = ov.keys()
        return rec

    def _audit(self, record: dict[str, Any]) -> None:
        if self.audit is not None:
            self.audit.append(
                {"t": self._wall(), "instance": self.instance, "mode": self.mode, **record}
            )
