"""One actor per instance: an `flock` on a lock file keyed by the FIFO's real path.

Two daemons, or a daemon and `uwsgitune tune --mode apply`, acting on the same master
would fight (each sees the other's `+`/`-` as the load moving). Whoever applies holds an
exclusive, non-blocking `flock` on `<lock dir>/<sanitised real FIFO path>.lock` and writes
its pid and role there; the kernel drops the lock when the holder dies, so a stale file
never blocks anyone. The lock dir is `$UWSGITUNE_LOCK_DIR`, else `/run/uwsgitune` for root
and `/tmp/uwsgitune-<uid>` for others: the same for every uwsgitune of one user.
"""

from __future__ import annotations

import fcntl
import os
import re
from pathlib import Path


def lock_dir() -> Path:
    env = os.environ.get("UWSGITUNE_LOCK_DIR")
    if env:
        return Path(env)
    uid = os.getuid()
    return Path("/run/uwsgitune") if uid == 0 else Path(f"/tmp/uwsgitune-{uid}")


def lock_path(fifo: Path, directory: Path | None = None) -> Path:
    real = os.path.realpath(fifo)
    name = re.sub(r"[^A-Za-z0-9._-]", "_", real.strip("/")) or "root"
    return (directory or lock_dir()) / f"{name[-200:]}.lock"


class ApplyLock:
    """`acquire()` returns None when held by us, else one line naming the holder."""

    def __init__(self, fifo: Path, role: str, directory: Path | None = None) -> None:
        self.path = lock_path(fifo, directory)
        self.fifo = fifo
        self.role = role
        self.fd: int | None = None

    def acquire(self) -> str | None:
        if self.fd is not None:
            return None
        try:
            self.path.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
        except OSError as exc:
            return f"cannot open the lock {self.path} ({exc.strerror}); not applying"
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = os.pread(fd, 200, 0).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            return f"{self.fifo} is already tuned by {holder} (lock {self.path})"
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()} ({self.role})\n".encode(), 0)
        self.fd = fd
        return None

    def release(self) -> None:
        if self.fd is not None:
            os.close(self.fd)  # closing drops the flock; the file stays (harmless)
            self.fd = None

    @property
    def held(self) -> bool:
        return self.fd is not None
