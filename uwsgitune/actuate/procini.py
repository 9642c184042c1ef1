"""The ini a running master was started with, read from /proc. Pure but for the reads."""

from __future__ import annotations

import os
from pathlib import Path


def _launch_dirs(base: Path) -> list[Path]:
    """Where a relative ini path may be relative to: the master's cwd, and the directory
    it was started from (`PWD` in its environment). An ini with `chdir` moves the cwd:
    `uwsgi --ini examples/uwsgi.ini` from a checkout, `chdir = %d`, runs in examples/."""
    dirs = [Path(os.readlink(base / "cwd"))]
    try:
        env = (base / "environ").read_bytes().split(b"\0")
    except OSError:
        env = []
    for entry in env:
        if entry.startswith(b"PWD=") and len(entry) > 4:
            dirs.append(Path(entry[4:].decode(errors="replace")))
    return dirs


def ini_from_proc(pid: int, proc: Path = Path("/proc")) -> Path | None:
    """The ini the master was started with, from its command line: a relative path from its
    cwd, or else from the directory it was started in (the first that exists)."""
    try:
        args = (proc / str(pid) / "cmdline").read_bytes().split(b"\0")
        dirs = _launch_dirs(proc / str(pid))
    except OSError:
        return None
    words = [a.decode(errors="replace") for a in args if a]
    for i, word in enumerate(words):
        value = words[i + 1] if word == "--ini" and i + 1 < len(words) else None
        value = value or (word if word.endswith(".ini") and not word.startswith("-") else None)
        if value:
            path = Path(value)
            if path.is_absolute():
                return path
            found = [d / path for d in dirs if (d / path).is_file()]
            return found[0] if found else dirs[0] / path
    return None
