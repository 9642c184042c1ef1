"""Options a running master was given outside its ini: on its command line (`--key` or
`--key=value`) and in its environment (`UWSGI_KEY=value`, which uWSGI reads as `key`).
Pure but for the two reads of /proc.

`lazy` (not `lazy-apps`) is the one that matters to a reload: under it, uWSGI's `r`
(`grace_them_all`, core/uwsgi.c) only sends each worker SIGHUP and returns. The master is
not executed again and never reads its ini again, so an override written for a reload
changes nothing: processes and cheaper stay as they were (measured). `lazy-apps`
loads the app in each worker the same way and reloads normally.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

PROC = Path("/proc")
OFF = ("false", "off", "no")  # uwsgi_opt_true: these (any case) or "0" turn a flag off


def flag_on(value: str) -> bool:
    """A boolean option's value as uWSGI reads it: on unless false/off/no/0 (bare: on)."""
    value = value.strip()
    return value != "0" and value.lower() not in OFF


def master_options(pid: int, proc: Path = PROC) -> dict[str, tuple[str, str]] | None:
    """{key: (value, as given)} from the master's command line and environment ("" for a
    bare flag; "as given": `--key` or `UWSGI_KEY`); None when /proc cannot be read."""
    try:
        words = (proc / str(pid) / "cmdline").read_bytes().split(b"\0")
        env = (proc / str(pid) / "environ").read_bytes().split(b"\0")
    except OSError:
        return None
    out: dict[str, tuple[str, str]] = {}
    for word in (w.decode(errors="replace") for w in words if w.startswith(b"--")):
        key, _, value = word[2:].partition("=")
        out[key] = (value, f"--{key}")
    for entry in (e.decode(errors="replace") for e in env if e.startswith(b"UWSGI_")):
        key, _, value = entry.partition("=")
        out[key[6:].lower().replace("_", "-")] = (value, key)
    return out


def lazy_where(config: Mapping[str, str] | None, pid: int, proc: Path = PROC) -> str | None:
    """Where `lazy` is turned on for this master (its ini, its command line or its
    environment), else None. Unreadable places count as not setting it."""
    if config and "lazy" in config and flag_on(config["lazy"]):
        return "`lazy` in its ini"
    given = (master_options(pid, proc) or {}).get("lazy") if pid else None
    if given and flag_on(given[0]):
        return f"`{given[1]}` on master {pid}"
    return None


def lazy_refusal(where: str) -> str:
    """The one line that refuses a reload under `lazy`, with the fix."""
    return (
        f"{where}: uWSGI's `r` then respawns the workers without reading the ini again, so "
        "no reload can change processes or cheaper; use `lazy-apps = true` in its "
        "place and restart uWSGI"
    )
