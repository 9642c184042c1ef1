"""Where a sweep writes its results (`sweep.json`, `sweep.svg`): a directory only we write.

Root may run `sweep` from /tmp, or from any directory another user can write, so nothing
there is trusted (uwsgitune/nofollow.py):

- without `--out`, a new directory `./uwsgitune-sweep-<time>` is made, 0700; a name already
  taken (by an earlier sweep, or planted) is never reused: `-2`, `-3`, ... are tried;
- a `--out` that does not exist is made the same way; one that exists is accepted only when
  it is a real directory (not a link), ours, not writable by group or others, and empty;
- its files are created relative to the directory's fd, O_CREAT|O_EXCL|O_NOFOLLOW: a name
  that appeared meanwhile fails the write, it is never written through.

`check` runs before the sweep touches the instance, so a bad `--out` costs nothing; the
directory is made (or checked again) only when there is something to write.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from uwsgitune.nofollow import Directory, UnsafeFile, new_dir, own_dir

FIX = (
    "a sweep writes only into a new directory, or an empty one of yours that nobody else "
    "can write: give another --out"
)
NAMES = 100  # `-2` .. `-99` after the first


def check(out: Path | None) -> None:
    """Refuse (UnsafeFile) an existing `--out` the sweep could not write into."""
    if out is not None and os.path.lexists(out):
        _existing(out).close()


def _existing(out: Path) -> Directory:
    d = own_dir(out, fix=FIX)
    if d.names():
        d.close()
        raise UnsafeFile(f"{out} is not empty: refused; {FIX}")
    return d


def open_out(out: Path | None, now: float | None = None) -> Directory:
    """The results directory: `out` (made, or existing and checked), else a new one."""
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)  # the path the user gave, as before
        try:
            return new_dir(out, fix=FIX)
        except FileExistsError:
            return _existing(out)
    when = time.localtime(time.time() if now is None else now)
    base = f"uwsgitune-sweep-{time.strftime('%Y%m%d-%H%M%S', when)}"
    for i in range(1, NAMES):
        try:
            return new_dir(Path(base if i == 1 else f"{base}-{i}"), fix=FIX)
        except FileExistsError:
            continue
    raise UnsafeFile(f"{base}: {NAMES - 1} names taken in {os.getcwd()}: refused; {FIX}")


def write(d: Directory, name: str, text: str) -> None:
    """A new file `name` in `d` holding `text` (O_CREAT|O_EXCL|O_NOFOLLOW)."""
    fd = d.create(name, os.O_WRONLY, 0o644)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
