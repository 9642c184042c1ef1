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


class Budget:
    """Bytes of answers held by connections being written, each distinct body counted once
    (scrapes sharing a render share its body). A body that would take the total past
    `limit` is not sent (the server answers 503): the memory that slow readers can pin is
    bounded whatever the exposition's size. Bodies of `small` bytes or less are not counted.
    """

    def __init__(self, limit: int, small: int) -> None:
        self.limit = limit
        self.small = small
        self.held = 0
        self.refused = 0
        self._bodies: dict[int, list[int]] = {}  # id(body) -> [users, size]; bodies are alive

    def take(self, body: bytes) -> bool:
        if len(body) <= self.small:
            return True
        entry = self._bodies.get(id(body))
        if entry is not None:
            entry[0] += 1
            return True
        if self.held + len(body) > self.limit:
            return False
        self._bodies[id(body)] = [1, len(body)]
        self.held += len(body)
        return True

    def give(self, body: bytes) -> None:
        entry = self._bodies.get(id(body))
        if entry is None or len(body) <= self.small:
            return
        entry[0] -= 1
        if entry[0] == 0:
            del self._bodies[id(body)]
            self.held -= entry[1]
