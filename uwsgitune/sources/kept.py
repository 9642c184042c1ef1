"""Small kernel files read every poll, kept open and read again from offset 0.

A /proc or cgroup file regenerates its text on each read at offset 0 (they are seq_files), so
the descriptor can be kept and read with `pread(fd, n, 0)`: one system call a file instead of
three (open, read, close). At 64 workers a poll reads about 200 such files; kept, the host
sample costs a third of what it did (bench/results/poll_cost.md). Each process's own three
are kept by pid (procfiles.py), under the same bound; these keep the rest.

Kept descriptors stay right through a process's life and beyond it: a descriptor on
`/proc/PID/stat` belongs to that process, and once it is gone a read fails (ESRCH), even if
the pid was reused. Then the path is opened again, which finds the new process or nothing:
the same answer a fresh open would give. Files not read in a whole sample are closed at its
end (`sweep`), so cheaped or exited workers leave nothing open.

The number kept is bounded, process-wide, by half the soft RLIMIT_NOFILE: past it, files are
opened and closed as before, so a watcher of 1,000 workers never runs out of descriptors.
Not thread-safe: each `KeptFiles` is used by one polling thread (`HostSampler` locks it).
"""

from __future__ import annotations

import contextlib
import os
import resource
import threading
from typing import Generic, TypeVar

CHUNK = 65536
_FLAGS = os.O_RDONLY | os.O_CLOEXEC


def _budget() -> int:
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return 4096 if soft == resource.RLIM_INFINITY else max(0, soft // 2)


class _Budget:
    """Descriptors kept by every `KeptFiles` of this process, against one bound."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.limit = _budget()
        self.used = 0

    def take(self, n: int = 1) -> bool:
        with self.lock:
            if self.used + n > self.limit:
                return False
            self.used += n
            return True

    def give(self, n: int) -> None:
        with self.lock:
            self.used -= n


BUDGET = _Budget()
K = TypeVar("K")


def _read_all(fd: int, limit: int) -> bytes:
    """The file from offset 0: one pread when it is under 64 KiB."""
    first = os.pread(fd, CHUNK, 0)
    if len(first) < CHUNK:
        return first
    chunks = [first]
    while len(chunks[-1]) == CHUNK and len(chunks) * CHUNK < limit:
        chunks.append(os.pread(fd, CHUNK, len(chunks) * CHUNK))
    return b"".join(chunks)


def read_once(path: str, limit: int = 1 << 20) -> bytes | None:
    """A small file's bytes (at most about `limit`), or None when it cannot be read."""
    try:
        fd = os.open(path, _FLAGS)
    except OSError:
        return None
    try:
        return _read_all(fd, limit)
    except OSError:
        return None
    finally:
        os.close(fd)


class Kept(Generic[K]):
    """Descriptors kept by key (a path, a pid), each key's counted against `budget`; those
    not used since the last `sweep` close at it. Subclasses say what a key's files are."""

    def __init__(self, budget: _Budget = BUDGET) -> None:
        self._budget = budget
        self._fds: dict[K, tuple[int, ...]] = {}
        self._used: set[K] = set()  # keys used since the last sweep

    def __len__(self) -> int:
        return len(self._fds)

    def sweep(self) -> None:
        """Close what was not used since the last sweep (processes no longer sampled)."""
        for key in [k for k in self._fds if k not in self._used]:
            self._close(key)
        self._used.clear()

    def close(self) -> None:
        for key in list(self._fds):
            self._close(key)

    def _close(self, key: K) -> None:
        fds = self._fds.pop(key)
        self._budget.give(len(fds))
        for fd in fds:
            with contextlib.suppress(OSError):
                os.close(fd)

    def __del__(self) -> None:
        with contextlib.suppress(Exception):  # at interpreter exit the OS closes them
            self.close()


class KeptFiles(Kept[str]):
    """Reads files by path, keeping their descriptors open between reads (see above)."""

    def read(self, path: str, limit: int = 1 << 20) -> bytes | None:
        """The file's bytes now, or None when it cannot be read (gone, or never there)."""
        fds = self._fds.get(path)
        if fds is not None:
            self._used.add(path)
            try:
                data = os.pread(fds[0], CHUNK, 0)  # the whole file, almost always
                return data if len(data) < CHUNK else _read_all(fds[0], limit)
            except OSError:  # its process is gone (ESRCH), or its cgroup: open it again
                self._close(path)
        try:
            fd = os.open(path, _FLAGS)
        except OSError:
            return None
        try:
            data = _read_all(fd, limit)
        except OSError:
            os.close(fd)
            return None
        if self._budget.take():
            self._fds[path] = (fd,)
            self._used.add(path)
        else:
            os.close(fd)
        return data
