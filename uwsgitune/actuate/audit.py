"""The audit log: one JSON line per action, fsynced, read back on start.

Each record names the instance, the action (`+`/`-` or reload), before/after, the reason
and evidence, and the verification result. A restarted tuner resumes from it: its last
changes (for the cool-down and the hourly limit) and whether applying was stopped after a
failed reload (until the user says `--resume-apply`).

A reload or a restart writes an `intent` record before it acts and its `change` record
after. An intent with no change after it is an apply the process did not live to finish:
it counts as a change (it may have happened), and the tuner says so once.

A log that cannot be read, or written in full, is an `AuditError`: one line naming the
file and the fix. Applying never starts from a history it could not read (the hourly and
listen limits would silently reset).

The daemon keeps the log in its state directory, which may belong to uWSGI's user (the
unit's `StateDirectory=`), and runs as root: a link planted there would have root append
JSON to whatever it points at (a sudoers drop-in, and sudo breaks). So the log is opened
relative to its directory's fd with O_NOFOLLOW (uwsgitune/nofollow.py), and read or written
only when it is a regular file with one link, owned by uwsgitune's user or root; anything
else is refused in one line, for reading too (a history someone else wrote is not ours to
resume from).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

from uwsgitune.errors import UwsgituneError
from uwsgitune.nofollow import UnsafeFile, open_dir
from uwsgitune.tuner.decision import TunerState
from uwsgitune.tuner.policy import HOUR
from uwsgitune.tuner.result import AuditRecord

WRITE_FIX = "free space or fix the permissions of its directory"
READ_FIX = (
    "make it a file readable by uwsgitune (or move it away to start a new history): applying "
    "resumes its hourly and listen limits from it"
)


class AuditError(UwsgituneError):
    """The audit log cannot be read or written: one line, the file and the fix."""


def write_all(fd: int, data: bytes) -> None:
    """`os.write` until every byte is written (a write may be short: a signal, a full disk);
    a write that makes no progress raises OSError."""
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        if n <= 0:
            raise OSError(28, "No space left on device (a write made no progress)")
        view = view[n:]


class AuditLog:
    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)

    def append(self, record: AuditRecord) -> None:
        """Append one record, fsynced; AuditError when it cannot."""
        line = json.dumps(record.to_json(), sort_keys=True, default=str) + "\n"
        with self._failing("write", WRITE_FIX):
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open_dir(self.path.parent) as d:
                flags = os.O_RDWR | os.O_APPEND | os.O_CREAT
                fd, _ = d.open(self.path.name, flags, fix=self.fix, owners=self.owners, mode=0o640)
            try:
                size = os.fstat(fd).st_size
                if size and os.pread(fd, 1, size - 1) != b"\n":
                    line = "\n" + line  # a torn last line (a crash mid-write) stays apart
                write_all(fd, line.encode())
                os.fsync(fd)
            finally:
                os.close(fd)

    @contextmanager
    def _failing(self, doing: str, fix: str) -> Iterator[None]:
        """A refused file (UnsafeFile) or an OSError as one AuditError line: the file, what
        could not be done and why, the fix."""
        try:
            yield
        except UnsafeFile as exc:
            raise AuditError(f"audit log {exc}") from None
        except OSError as exc:
            why = exc.strerror or str(exc)
            raise AuditError(f"audit log {self.path}: cannot {doing} ({why}); {fix}") from None

    @property
    def owners(self) -> frozenset[int]:
        return frozenset({os.geteuid(), 0})

    @property
    def fix(self) -> str:
        who = f"uid {os.geteuid()} or root" if os.geteuid() else "root"
        return (
            f"it must be a regular file with one name, owned by {who} (a link could make "
            "uwsgitune write anywhere): give the real file as the audit log, or move it away "
            "to start a new history"
        )

    def records(self, instance: str | None = None) -> Iterator[AuditRecord]:
        """Every readable record (a torn last line, or one that is not a record, is
        skipped), optionally of one instance. AuditError when the file cannot be read."""
        for line in self._lines():
            try:
                raw = json.loads(line)
            except json.JSONDecodeError:
                continue
            rec = AuditRecord.from_json(raw) if isinstance(raw, dict) else None
            if rec is not None and (instance is None or rec.instance == instance):
                yield rec

    def _lines(self) -> list[str]:
        with self._failing("read", READ_FIX):
            try:
                with open_dir(self.path.parent) as d:
                    found = d.read(self.path.name, fix=self.fix, owners=self.owners)
            except FileNotFoundError:
                return []
        if found is None:
            return []
        data = found[0]
        # Lines are ASCII JSON; a line that is not UTF-8 is not a record (skipped, like a
        # torn one), and never costs the records around it.
        return [line.decode("utf-8", "replace") for line in data.split(b"\n")]


def resume(
    records: Sequence[AuditRecord], state: TunerState, now_wall: float, now_mono: float
) -> tuple[TunerState, str | None]:
    """The state a restarted tuner starts from, and why applying is stopped (None: it is not).

    Wall-clock times in the log are mapped onto this process's monotonic clock.
    """
    changes: list[float] = []
    last_reload: float | None = None
    stopped: str | None = None
    for rec in _unfinished_as_changes(records):
        mono = now_mono - (now_wall - rec.t)
        if rec.event == "change" and rec.result in ("sent", "verified", "interrupted"):
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


def interrupted(records: Sequence[AuditRecord]) -> AuditRecord | None:
    """The last intent that no change record followed: an apply cut short by a kill."""
    pending: AuditRecord | None = None
    for rec in records:
        if rec.event == "intent":
            pending = rec
        elif rec.event == "change" and pending is not None and rec.via == pending.via:
            pending = None
    return pending


def _unfinished_as_changes(records: Sequence[AuditRecord]) -> list[AuditRecord]:
    """The records, with an unfinished intent counted as the change it may have made."""
    cut = interrupted(records)
    if cut is None:
        return list(records)
    return [replace(r, event="change", result="interrupted") if r is cut else r for r in records]


def last_listen(records: Sequence[AuditRecord], now_wall: float, now_mono: float) -> float | None:
    """When the last listen restart was tried, on this process's monotonic clock."""
    times = [r.t for r in records if r.action == "listen"]
    return now_mono - (now_wall - times[-1]) if times else None
