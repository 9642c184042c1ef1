"""Whose stats socket is this? Checked before anything is applied, never while observing.

A unix stats socket path can be taken by another process (a stale path in a shared
directory, a hostile local user): its documents could then name any master pid, and
uwsgitune would reload or scale an instance on a stranger's word. The kernel says who
serves the socket (SO_PEERCRED, read at every poll by `sources/stats.py`); that uid must be
the one the named master runs as.
"""

from __future__ import annotations

import os

from uwsgitune.core.samples import Poll


def _owner(pid: int) -> int | None:
    try:
        return os.stat(f"/proc/{pid}").st_uid
    except OSError:
        return None


def peer_refusal(address: str, poll: Poll | None) -> str | None:
    """Why applying is refused (one line naming the fix), or None. Only a unix stats socket
    has a peer uid to compare; elsewhere (TCP, a replay) there is nothing to check."""
    if poll is None or poll.doc is None or poll.peer_uid is None:
        return None
    pid = poll.doc.pid
    master = _owner(pid) if pid > 0 else None
    if master is None:
        return (
            f"{address}: the stats name master pid {pid}, which is not running here; "
            "check that the stats address is this instance's `stats =` socket"
        )
    if poll.peer_uid == master:
        return None
    return (
        f"{address}: the stats socket is served by uid {poll.peer_uid}, but the master "
        f"(pid {pid}) runs as uid {master}; not applying. Point the stats address at the "
        "instance's own `stats =` socket (another process may hold this path)"
    )
