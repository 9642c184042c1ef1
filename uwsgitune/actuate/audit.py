"""The audit log: one JSON line per action, fsynced, read back on start.

Each record names the instance, the action (`+`/`-` or reload), before/after, the reason
and evidence, and the verification result. A restarted tuner resumes from it: its last
changes (for the cool-down and the hourly limit) and whether applying was stopped after a
failed reload (until the user says `--resume-apply`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

from uwsgitune.tuner.state import TunerState

Record = dict[str, Any]


class AuditLog:
    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)

    def append(self, record: Record) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        line = json.dumps(record, sort_keys=True, default=str) + "\n"
        fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o640)
        try:
            size = os.fstat(fd).st_size
            if size and os.pread(fd, 1, size - 1) != b"\n":
                line = "\n" + line  # a torn last line (a crash mid-write) stays apart
            os.write(fd, line.encode())
            os.fsync(fd)
        finally:
            os.close(fd)

    def records(self, instance: str | None = None) -> Iterator[Record]:
        """Every readable record (a torn last line is skipped), optionally of one instance."""
        try:
            text = self.path.read_text()
        except FileNotFoundError:
            return
        for line in text.splitlines():
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(rec, dict) and (instance is None or rec.get("instance") == instance):
                yield rec


def resume(
    records: list[Record], state: TunerState, now_wall: float, now_mono: float
) -> tuple[TunerState, str | None]:
    """The state a restarted tuner starts from, and why applying is stopped (None: it is not).

    Wall-clock times in the log are mapped onto this process's monotonic clock.
    """
    changes: list[float] = []
    last_reload: float | None = None
    stopped: str | None = None
    for rec in records:
        t = rec.get("t")
        if not isinstance(t, int | float):
            continue
        mono = now_mono - (now_wall - float(t))
        if rec.get("event") == "change" and rec.get("result") in ("sent", "verified"):
            if now_wall - t < 3600:
                changes.append(mono)
            if rec.get("via") in ("reload", "restart"):
                last_reload = mono
        if rec.get("event") == "stop":
            stopped = str(rec.get("reason", "a reload failed"))
        if rec.get("event") == "resume":
            stopped = None
    st = replace(
        state,
        changes=tuple(changes),
        last_change=changes[-1] if changes else state.last_change,
        last_reload=last_reload if last_reload is not None else state.last_reload,
    )
    return st, stopped


def last_listen(records: list[Record], now_wall: float, now_mono: float) -> float | None:
    """When the last listen restart was tried, on this process's monotonic clock."""
    times = [
        float(r["t"])
        for r in records
        if r.get("action") == "listen" and isinstance(r.get("t"), int | float)
    ]
    return now_mono - (now_wall - times[-1]) if times else None
