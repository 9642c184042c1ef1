"""Find a vassal's stats socket, for the Emperor drill-down. Best effort, read-only.

The Emperor's stats name a vassal by its config file (`id`) and pid, not by its stats
socket. The vassal's command line and working directory (`/proc/<pid>/cmdline`, `cwd`) lead
to its ini, whose `stats` line gives the address. Anything unreadable means "unknown".
"""

from __future__ import annotations

from pathlib import Path

STATS_KEYS = ("stats", "stats-server", "stats_server")


def ini_stats(text: str) -> str | None:
    """The last `stats = ...` value of the [uwsgi] section of an ini, if any."""
    found = None
    section = ""
    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith("[") and line.endswith("]"):
            section = line[1:-1].strip()
            continue
        key, sep, value = line.partition("=")
        if sep and section == "uwsgi" and key.strip() in STATS_KEYS:
            found = value.strip() or None
    return found


def _candidates(pid: int, name: str, proc: Path) -> list[Path]:
    base = proc / str(pid)
    try:
        cwd = (base / "cwd").resolve(strict=True)
        argv = (base / "cmdline").read_bytes().split(b"\0")
    except OSError:
        return []
    out = [cwd / a.decode(errors="replace") for a in argv if a.endswith(b".ini")]
    if name.endswith(".ini"):
        out.append(cwd / name)
    return out


def vassal_stats_address(pid: int, name: str, proc: Path = Path("/proc")) -> str | None:
    """The vassal's stats address as written in its ini, resolved against its cwd."""
    if pid <= 0:
        return None
    for ini in _candidates(pid, name, proc):
        try:
            stats = ini_stats(ini.read_text(errors="replace"))
        except OSError:
            continue
        if stats is None:
            continue
        if not stats.startswith(("/", "@")) and ":" not in stats:  # a relative path
            stats = str(ini.parent / stats)
        return stats
    return None
