"""`TuneLoop`: the tuner for one instance: policy decisions, applied through the guarded path.

The caller polls (`watch.step()`) and hands each frame to `step`; the daemon does this per
instance, `uwsgitune tune` in the foreground. Modes: observe (log decisions), recommend
(also say the exact command), apply (act). Every change is audited with its verification;
a failed reload restores the previous override and stops applying until `resume_apply`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

from uwsgitune.actuate.audit import AuditLog, resume
from uwsgitune.actuate.fifo import FifoError, MasterFifo
from uwsgitune.actuate.override import Override, OverrideError
from uwsgitune.actuate.reload import Limits, Reloader
from uwsgitune.core.frame import Frame
from uwsgitune.sources.host import somaxconn
from uwsgitune.sources.watcher import InstanceWatch
from uwsgitune.tuner import Decision, TunerSettings, TunerState, decide

Mode = Literal["observe", "recommend", "apply"]
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
        log: Callable[[str], None] = print,
        mono: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.watch, self.fifo, self.override = watch, fifo, override
        self.settings, self.mode, self.audit = settings, mode, audit
        self.log, self._mono, self._wall = log, mono, wall
        self.instance = str(watch.address)
        self.state = TunerState()
        self.stopped: str | None = None
        self.last: Decision | None = None
        if audit is not None:
            records = list(audit.records(self.instance))
            self.state, self.stopped = resume(records, self.state, wall(), mono())
            if self.stopped:
                self.log(f"APPLY STOPPED (from the audit log): {self.stopped}")

    def step(self, frame: Frame) -> Decision:
        now = self._mono()
        self._verify(frame, now)
        d = decide(self.watch.window.frames(), self.state, self.settings, now)
        self.last = d
        if not d.is_change:
            self.state = d.state
            self.log(f"{self.mode}: {d.line()}")
        elif self.mode != "apply":
            # A dry run paces its advice like real changes but waits for nothing.
            self.state = replace(d.state.failed(), last_reload=self.state.last_reload)
            self.log(f"{self.mode}: {d.line()}{self._advice(d)}")
        elif self.stopped:
            self.log(f"apply STOPPED ({self.stopped}); not applying: {d.line()}")
        else:
            self.log(f"apply: {d.line()}")
            self._apply(d, frame, now)
        return d

    def apply_now(self) -> Decision | None:
        """The TUI's apply key (after its confirmation): decide afresh on the latest frame
        and apply a change through the same guards, whatever the mode. None: no frame."""
        frame = self.watch.frame
        if frame is None:
            return None
        now = self._mono()
        d = decide(self.watch.window.frames(), self.state, self.settings, now)
        self.last = d
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
            return self._refused(d, "no FIFO given")
        try:
            sent = self.fifo.scale(
                frame.live, d.desired, self.settings.min_workers, frame.master_pid, now
            )
        except FifoError as exc:
            return self._refused(d, str(exc))
        self.state = d.state
        self._audit(self._change(d, "sent", f"wrote {sent!r} to {self.fifo.path}"))

    def _override_for(self, d: Decision, frame: Frame | None) -> Override:
        slots = frame.workers_max if frame else d.desired
        processes = self.settings.max_workers if d.desired > slots else max(slots, d.desired)
        cheaper = max(min(self.settings.min_workers, processes - 1), 1)
        return Override(processes, cheaper, max(d.desired, cheaper))

    def _apply_reload(self, d: Decision, frame: Frame) -> None:
        if self.fifo is None or self.override is None:
            return self._refused(d, "a reload needs --fifo and --override")
        ov = self._override_for(d, frame)
        reloader = Reloader(self.fifo, self.override.path, self.override.user_ini, self.watch.step)
        limits = Limits(
            frame.somaxconn or somaxconn(), frame.mem_per_worker, self.settings.memory_budget
        )
        try:
            out = reloader.apply(ov, frame, limits, self.settings.reload_deadline)
        except (OverrideError, FifoError, OSError) as exc:
            return self._refused(d, f"override not written: {exc}")
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
        self.state = d.state.failed()  # paced like a change: no retry storm
        self._audit(self._change(d, "refused", why))

    def _change(
        self, d: Decision, result: str, detail: str, ov: Override | None = None
    ) -> dict[str, Any]:
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
        }
        if ov is not None:
            rec["override"] = ov.keys()
        return rec

    def _audit(self, record: dict[str, Any]) -> None:
        if self.audit is not None:
            self.audit.append(
                {"t": self._wall(), "instance": self.instance, "mode": self.mode, **record}
            )
