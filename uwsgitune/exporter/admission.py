"""Who may hold a connection to the metrics endpoint: at most `total` at once, at most
`per_peer` from one peer, and, while basic auth has let someone in, room kept for them.

Peers. A peer is an IPv4 address, or an IPv6 /64 (`peer_key`): a single host is commonly
given a whole /64, so counting its addresses apart would let one host take every slot. An
IPv4-mapped IPv6 address (`::ffff:192.0.2.1`) is its IPv4 address. The password checks'
queue (`auth.py`) counts per peer the same way.

Idle connections give way. A connection whose request head has not come yet (idle: a TLS
handshake, a slow or silent client, a kept-alive connection between requests; also one
whose refused login waits out its delay, `site.py`) gives way to a new one: when a cap is
reached, the oldest idle connection (of the same peer for the per-peer cap, of anyone for
the others) is aborted to make room. (The server lets each new connection read what it was
sent before it accepts the next: a request that came with its connection is never taken for
an idle one.) So idle sockets, however
many, never deny a scrape; only connections being answered count against capacity, and
those are bounded in time by the server's write deadline. Over capacity with nothing to
drop, the newcomer is refused (the server answers 503).

Authenticated peers keep their room (issue 36.4). With basic auth on, a connection is
*authenticated* once a request on it passed the password check (`site.py` calls
`authenticated`), and its peer is *trusted* for `TRUST_SECONDS` after that. A connection is
*protected* when it is authenticated, or when its peer was trusted as it was accepted:
Prometheus, once it has logged in, comes back from the same address every scrape.
- Unprotected connections never evict protected ones, even idle (a scraper's kept-alive
  connection between scrapes is idle): only a newcomer from a trusted peer may.
- While some peer is trusted, unprotected connections hold at most `total - reserve` slots
  (`reserve`: an eighth of `total`, 8 of 64): the rest is kept for trusted peers. A flood of
  connections that never log in is refused there, and cannot take the last slots.
- A newcomer from a trusted peer may evict, oldest first: an idle unprotected connection,
  then a busy unprotected one (a request still waiting for its password check, say), then
  an idle protected one. So it gets in unless protected connections fill every slot.
Nothing is reserved while no peer is trusted (basic auth off, or no one logged in yet):
then the rules are the ones above for idle connections alone. A peer that shares the
scraper's address (the same host, NAT) shares its standing; the per-peer cap still holds.

No I/O here: `abort` is the connection's own callable, and the clock is injected.
"""

from __future__ import annotations

import contextvars
import ipaddress
import time
from collections.abc import Callable

TRUST_SECONDS = 600.0  # a peer stays trusted this long after its last successful login
MAX_TRUSTED = 256  # peers remembered as trusted (the oldest forgotten first)


def peer_key(address: str) -> str:
    """The peer an address counts as: IPv4 as itself, IPv6 by its /64, an IPv4-mapped IPv6
    address as the IPv4 one. Anything else (a unix socket's name, "") as it is."""
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])  # a scope (fe80::1%eth0) aside
    except ValueError:
        return address
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return str(ipaddress.IPv6Network((ip, 64), strict=False))
    return str(ip)


class Conn:
    """One accepted connection: its peer, whether it is still idle, its standing, how to
    drop it."""

    __slots__ = ("abort", "authed", "idle", "key", "peer", "slots", "vip")

    def __init__(self, peer: str, abort: Callable[[], object]) -> None:
        self.peer = peer
        self.key = peer_key(peer)
        self.idle = True
        self.abort = abort
        self.authed = False  # a request on it passed basic auth
        self.vip = False  # its peer was trusted when it was accepted
        self.slots: Slots | None = None  # the slots that admitted it

    @property
    def protected(self) -> bool:
        return self.authed or self.vip

    def authenticated(self) -> None:
        """A request on this connection passed basic auth: it and its peer gain standing."""
        self.authed = True
        if self.slots is not None:
            self.slots.trust(self.key)


# The connection whose request is being answered: set by the server in each connection's
# task, read by the site (which sees only the request) for its standing and its peer.
CURRENT: contextvars.ContextVar[Conn | None] = contextvars.ContextVar("conn", default=None)


class Slots:
    def __init__(
        self,
        total: int,
        per_peer: int,
        reserve: int | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if total < 1 or per_peer < 1:
            raise ValueError("connection caps must be at least 1")
        self.total = total
        self.per_peer = per_peer
        self.reserve = min(total - 1, max(1, total // 8) if reserve is None else reserve)
        self.clock = clock
        self._conns: dict[Conn, None] = {}  # insertion order: oldest first
        self._trusted: dict[str, float] = {}  # peer -> last login; oldest first
        self.evicted = 0
        self.refused = 0

    def __len__(self) -> int:
        return len(self._conns)

    def busy(self) -> int:
        return sum(1 for c in self._conns if not c.idle)

    def trust(self, key: str) -> None:
        """`key`'s peer has just logged in."""
        self._trusted.pop(key, None)
        self._trusted[key] = self.clock()
        while len(self._trusted) > MAX_TRUSTED:
            del self._trusted[next(iter(self._trusted))]

    def trusted(self, key: str | None = None) -> bool:
        """Whether `key`'s peer is trusted (None: whether any peer is)."""
        horizon = self.clock() - TRUST_SECONDS
        while self._trusted and next(iter(self._trusted.values())) < horizon:
            del self._trusted[next(iter(self._trusted))]
        return bool(self._trusted) if key is None else key in self._trusted

    def admit(self, conn: Conn) -> bool:
        """Take a slot for `conn`, dropping another connection where a cap is reached."""
        conn.vip = self.trusted(conn.key)
        mine = [c for c in self._conns if c.key == conn.key]
        if len(mine) >= self.per_peer and not self._evict(mine, conn.vip):
            return self._refuse()
        if len(self._conns) >= self.total and not self._evict(list(self._conns), conn.vip):
            return self._refuse()
        if not conn.vip and self.trusted():
            others = [c for c in self._conns if not c.protected]
            if len(others) >= self.total - self.reserve and not self._evict(others, False):
                return self._refuse()
        conn.slots = self
        self._conns[conn] = None
        return True

    def release(self, conn: Conn) -> None:
        self._conns.pop(conn, None)

    def _refuse(self) -> bool:
        self.refused += 1
        return False

    def _evict(self, among: list[Conn], vip: bool) -> bool:
        """Drop the first of `among` (oldest first) that the newcomer may displace."""
        tiers: list[Callable[[Conn], bool]] = [lambda c: c.idle and not c.protected]
        if vip:
            tiers += [lambda c: not c.protected, lambda c: c.idle]
        for may_go in tiers:
            for old in among:
                if may_go(old):
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
