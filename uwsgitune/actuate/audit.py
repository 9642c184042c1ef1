"""The audit log: one JSON line per action, fsynced, read back on start.

Each record names the instance, the action (`+`/`-` or reload), before/after, the reason
and evidence, and the verification result. A restarted tuner resumes from it: its last
changes (for the cool-down and the hourly limit) and whether applying was stopped after a
failed reload (until the user says `--resume-apply`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path

from uwsgitune.tuner.policy import HOUR
from uwsgitune.tuner.result import AuditRecord
from uwsgitune.tuner.state import TunerState


class AuditLog:
    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)

    def append(self, record: AuditRecord) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        line = json.dumps(record.to_json(), sort_keys=True, default=str) + "\n"
        fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o640)
        try:
            size = os.fstat(fd).st_size
            if size and os.pread(fd, 1, size - 1) != b"\n":
                line = "\n" + line  # a torn last line (a crash mid-write) stays apart
            os.write(fd, line.encode())
            os.fsync(fd)
        finally:
            os.close(fd)

    def records(self, instance: str | None = None) -> Iterator[AuditRecord]:
        """Every readable record (a torn last line, or one that is not a record, is
        skipped), optionally of one instance."""
        try:
            text = self.path.read_text()
        except FileNotFoundError:
            return
        for line in text.splitlines():
            try:
                raw = json.loads(line)
            except json.JSONDecodeError:
                continue
            rec = AuditRecord.from_json(raw) if isinstance(raw, dict) else None
            if rec is not None and (instance is None or rec.instance == instance):
                yield rec


def resume(
    records: Sequence[AuditRecord], state: TunerState, now_wall: float, now_mono: float
) -> tuple[TunerState, str | None]:
    """The state a restarted tuner starts from, and why applying is stopped (None: it is not).

    Wall-clock times in the log are mapped onto this process's monotonic clock.
    """
    changes: list[float] = []
    last_reload: float | None = None
    stopped: str | None = None
    for rec in records:
        mono = now_mono - (now_wall - rec.t)
        if rec.event == "change" and rec.result in ("sent", "verified"):
            if now_wall - rec.t < HOUR:
                changes.append(mono)
            if rec.via in ("reload", "restart"):
                last_reload = mono
        if rec.event == "stop":
            stopped = rec.reason if rec.reason is not None else "a reload failed"
        if rec.event == "resume":
            stopped = None
    st = replace(
        state,
        changes=tuple(changes),
        last_change=changes[-1] if changes else state.last_change,
        last_reload=last_reload if last_reload is not None else state.last_reload,
    )
    return st, stopped


def last_listen(records: Sequence[AuditRecord], now_wall: float, now_mono: float) -> float | None:
    """When the last listen restart was tried, on this process's monotonic clock."""
    times = [r.t for r in records if r.action == "listen"]
    return now_mono - (now_wall - times[-1]) if times else None
