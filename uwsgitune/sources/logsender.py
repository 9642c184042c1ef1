"""Who sent a request log datagram: the instance's master, proved by the kernel, or not.

Any local process can send datagrams to the receiver's port (sources/reqlog.py). Lines from
a stranger may be shown, but must never drive an apply, so each source (address, port) is
proved to be the master's before its lines count:

1. the kernel lists the UDP sockets with their local address, port and inode (inet_diag,
   sources/netlink.py `Diag.udp_sockets`);
2. the sockets that could have sent it are those bound to the source port, on the source's
   address or on the wildcard (uWSGI's `logsocket` never binds: the kernel gives its socket
   an ephemeral port on 0.0.0.0 at the first send; measured on 2.0.31);
3. there must be at least one, and every one must be among the sockets `/proc/<master
   pid>/fd` holds (`socket:[INODE]`).

What it proves: the datagram left through a socket the master holds. uWSGI creates that
socket lazily in the master; workers spawned after the first line inherit it (a respawned
worker lists it too, measured on 2.0.31), so "the master's" means "uWSGI's own logger socket",
which the user's app code could reach as well. It does not prove the line is true; the parser
bounds what a line may say.

Cost and caching: a dump lists every UDP socket of the host, so it is not made per line. A
proof is cached per (port, master pid) for `reprove_after` seconds: the master's socket lives
until the master re-executes (a reload), when its port changes, and a new port is proved
afresh; proving it retires the master's old port, so a stranger that binds the old port is
not trusted on the old proof (between the master closing its old socket and its first line
from the new one, a stranger on the old port is trusted for at most `reprove_after`). A
source that fails the proof is remembered as unproven for `min_interval` seconds only (a new
master port may be younger than the last dump), and dumps are at most one per
`min_interval`, so a foreign flood from many ports costs one dump per interval, not one per
datagram. When the proof cannot be made (no netlink answer, `/proc/<pid>/fd` unreadable:
uwsgitune not root and the master another user's), the source is unproven, with the reason.

Public API:
    SenderCheck(*, diag=None, proc=PROC, clock=time.monotonic, reprove_after=10.0,
                min_interval=1.0)
        .proven(source, master_pid) -> bool
        .verdict(source, master_pid) -> Verdict(proven, reason)
        .close()
    sending_sockets(source, table) -> list[UdpSocket]   # pure: step 2
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from uwsgitune.sources.netlink import Diag, UdpSocket
from uwsgitune.sources.procfs import PROC, socket_inodes

WILDCARDS = ("0.0.0.0", "::")
MAX_REMEMBERED = 256  # sources remembered; a flood from more ports just re-proves later

Source = tuple[str, int]


@dataclass(frozen=True)
class Verdict:
    proven: bool
    reason: str  # why not, in one line; "" when proven
    # proved NOT the master's (no socket sends from that port, or one the master does not
    # hold), as against a proof that could not be made (no netlink, /proc unreadable)
    foreign: bool = False


def sending_sockets(source: Source, table: list[UdpSocket]) -> list[UdpSocket]:
    """The UDP sockets of `table` a datagram from `source` may have left through: bound to
    its port, on its address or on a wildcard. Pure."""
    host, port = source
    mapped = f"::ffff:{host}"
    return [s for s in table if s.port == port and s.address in (host, mapped, *WILDCARDS)]


class SenderCheck:
    """Proves request log sources to be a master's, with a cache (see the module docstring).
    Not thread-safe: the receiver's reader calls it."""

    def __init__(
        self,
        *,
        diag: Diag | None = None,
        proc: Path = PROC,
        clock: Callable[[], float] = time.monotonic,
        reprove_after: float = 10.0,
        min_interval: float = 1.0,
    ) -> None:
        self._diag = diag if diag is not None else Diag()
        self._proc = proc
        self._clock = clock
        self.reprove_after = reprove_after
        self.min_interval = min_interval
        self._known: dict[tuple[Source, int], tuple[float, Verdict]] = {}
        self._table: list[UdpSocket] | None = None
        self._table_at = float("-inf")
        self.dumps = 0  # how many dumps were made (cost, for tests and benchmarks)

    def proven(self, source: Source, master_pid: int) -> bool:
        return self.verdict(source, master_pid).proven

    def verdict(self, source: Source, master_pid: int) -> Verdict:
        now = self._clock()
        key = (source, master_pid)
        known = self._known.get(key)
        if known is not None:
            at, verdict = known
            if now - at < (self.reprove_after if verdict.proven else self.min_interval):
                return verdict
        verdict = self._prove(source, master_pid, now)
        if len(self._known) >= MAX_REMEMBERED:
            self._known.clear()
        if verdict.proven:  # the master's new port retires its old ones (a reload)
            for (src, pid), (_, old) in list(self._known.items()):
                if pid == master_pid and old.proven and src != source:
                    del self._known[(src, pid)]
        self._known[key] = (now, verdict)
        return verdict

    def _sockets(self, now: float) -> list[UdpSocket] | str:
        """The host's UDP sockets, dumped at most once per min_interval; or why not."""
        if self._table is None or now - self._table_at >= self.min_interval:
            self._table_at = now
            try:
                self._table = self._diag.udp_sockets()
                self.dumps += 1
            except OSError as exc:
                self._table = None
                return f"no netlink answer ({exc.strerror or exc})"
        return self._table

    def _prove(self, source: Source, master_pid: int, now: float) -> Verdict:
        where = f"{source[0]}:{source[1]}"
        if master_pid <= 0:
            return Verdict(False, f"{where}: the master's pid is unknown")
        table = self._sockets(now)
        if isinstance(table, str):
            return Verdict(False, f"{where}: {table}")
        found = sending_sockets(source, table)
        if not found:
            return Verdict(
                False, f"{where}: no UDP socket of this host sends from that port", foreign=True
            )
        try:
            held = socket_inodes(master_pid, self._proc)
        except OSError as exc:
            return Verdict(
                False, f"{where}: /proc/{master_pid}/fd unreadable ({exc.strerror or exc})"
            )
        if all(s.inode in held for s in found):
            return Verdict(True, "")
        return Verdict(
            False, f"{where}: the sending socket is not the master's ({master_pid})", foreign=True
        )

    def close(self) -> None:
        self._diag.close()
