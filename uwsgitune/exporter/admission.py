"""Who may hold a connection to the metrics endpoint: at most `total` at once, at most
`per_peer` from one IP address.

A connection that has not sent its request head yet (idle: a TLS handshake, a slow or
silent client) gives way to a new one: when a cap is reached, the oldest idle connection
(of the same peer for the per-peer cap, of anyone for the global one) is aborted to make
room. So idle sockets, however many, never deny a scrape; only connections being answered
count against capacity, and those are bounded in time by the server's write deadline.
Over capacity with nothing idle to drop, the newcomer is refused (the server answers 503).
No I/O here: `abort` is the connection's own callable.
"""

from __future__ import annotations

from collections.abc import Callable


class Conn:
    """One accepted connection: its peer IP, whether it is still idle, how to drop it."""

    __slots__ = ("abort", "idle", "peer")

    def __init__(self, peer: str, abort: Callable[[], object]) -> None:
        self.peer = peer
        self.idle = True
        self.abort = abort


class Slots:
    def __init__(self, total: int, per_peer: int) -> None:
        if total < 1 or per_peer < 1:
            raise ValueError("connection caps must be at least 1")
        self.total = total
        self.per_peer = per_peer
        self._conns: dict[Conn, None] = {}  # insertion order: oldest first
        self.evicted = 0
        self.refused = 0

    def __len__(self) -> int:
        return len(self._conns)

    def busy(self) -> int:
        return sum(1 for c in self._conns if not c.idle)

    def admit(self, conn: Conn) -> bool:
        """Take a slot for `conn`, dropping an idle connection if a cap is reached."""
        mine = [c for c in self._conns if c.peer == conn.peer]
        if len(mine) >= self.per_peer and not self._evict(mine):
            self.refused += 1
            return False
        if len(self._conns) >= self.total and not self._evict(list(self._conns)):
            self.refused += 1
            return False
        self._conns[conn] = None
        return True

    def release(self, conn: Conn) -> None:
        self._conns.pop(conn, None)

    def _evict(self, among: list[Conn]) -> bool:
        for old in among:  # oldest first
            if old.idle:
                self.release(old)
                self.evicted += 1
                old.abort()
                return True
        return False
