"""Whose stats are these? Checked before anything is applied, never while observing.

Every write (a `+`/`-`, a reload, a listen restart, the `p` that resumes a pool) acts on the
master whose pid the stats name, so the stats must come from that master. Observing is never
refused: a document from a stranger only misleads a screen.

A unix stats socket path can be taken by another process (a stale path in a shared directory,
a hostile local user): its documents could name any master pid, and uwsgitune would reload or
scale an instance on a stranger's word. The kernel says who serves the socket (SO_PEERCRED,
read at every poll by `sources/stats.py`); that uid must be the one the named master runs as.

A TCP stats address (`host:port`, or `--stats-http`'s `http://host:port`) has no such
credential. A local user who binds the stats port while uWSGI is down or restarting can serve
documents naming the real master's pid, and so steer reloads and listen restarts. So the
listener is proved to be the master's: the kernel lists the listening TCP sockets with their
inodes (inet_diag, sources/netlink.py), and every one a connection to the stats address can
reach (that port, on one of the address's IPs or on a wildcard of either family) must be
among the sockets `/proc/<master>/fd` holds (`socket:[INODE]`). Measured on uWSGI 2.0.31: the
master alone holds the stats listener, raw or `--stats-http`, IPv4 or IPv6; no worker does.

When that cannot be proved (no netlink answer; no such listener here: another host or network
namespace; `/proc/<master>/fd` unreadable, e.g. uwsgitune not root and the master another
user's; a listener another process holds), applying over TCP/HTTP is refused in one line that
names the opt-in (`--trust-tcp-stats`, `trust_tcp_stats = true`), which skips this check and
trusts whoever answers on that port. The proof is made at each check, that is before every
write, so a port that changed hands since the last one is caught at the next.
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from uwsgitune.core.address import AddressError, StatsAddress, parse_address
from uwsgitune.core.samples import Poll
from uwsgitune.sources.netlink import Diag, TcpListener
from uwsgitune.sources.procfs import PROC, socket_inodes

TRUST_FLAG = "--trust-tcp-stats"
OPT_IN = f"pass {TRUST_FLAG}"  # how a refusal names the opt-in (the daemon names its key)
WILDCARDS = ("0.0.0.0", "::")


class PeerSettings(BaseModel):
    """The opt-in, declared once: the CLI's flag, the daemon's key and the docs read it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    trust_tcp_stats: bool = Field(
        False,
        description="Apply over a TCP or HTTP stats address even when its listener cannot be "
        "proved to be the master's (whoever answers on that port is trusted).",
    )


def host_listeners() -> list[TcpListener]:
    """Every listening TCP socket of this network namespace (OSError: no netlink answer)."""
    diag = Diag()
    try:
        return diag.tcp_listeners()
    finally:
        diag.close()


def _ips(host: str) -> set[str]:
    """The IPs a connection to `host` may go to, written as inet_ntop writes them."""
    try:
        infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        return set()
    out = set()
    for family, *_, sockaddr in infos:
        ip = str(sockaddr[0]).split("%", 1)[0]
        out.add(socket.inet_ntop(family, socket.inet_pton(family, ip)))
    return out


def reaching(host: str, port: int, table: list[TcpListener], ips: set[str]) -> list[TcpListener]:
    """The listeners of `table` a connection to `host`:`port` (resolved to `ips`) may reach:
    that port on one of those IPs (or one mapped into IPv6), or on a wildcard. Pure."""
    wild = host in WILDCARDS or bool(ips & set(WILDCARDS))
    mapped = {f"::ffff:{ip}" for ip in ips}
    return [
        t
        for t in table
        if t.port == port and (wild or t.address in WILDCARDS or t.address in ips | mapped)
    ]


def _join(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


@dataclass(frozen=True)
class PeerCheck:
    """`refusal(address, poll)`: why applying is refused now (one line naming the fix), or
    None. `trust_tcp`: the opt-in, named `opt_in` in the refusal; `proc` and `listeners` are
    the /proc root and the listener table (injected by tests)."""

    trust_tcp: bool = False
    opt_in: str = OPT_IN
    proc: Path = PROC
    listeners: Callable[[], list[TcpListener]] = host_listeners

    def refusal(self, address: StatsAddress | str, poll: Poll | None) -> str | None:
        if poll is None or poll.doc is None:
            return None  # nothing read: nothing to act on
        addr = _parsed(address)
        if poll.peer_uid is not None:
            return self._unix(str(address), poll.doc.pid, poll.peer_uid)
        if addr is None or addr.kind not in ("tcp", "http") or self.trust_tcp:
            return None  # a replay, a fake: no socket was read
        return self._tcp(addr, str(address), poll.doc.pid)

    def _unix(self, address: str, pid: int, peer_uid: int) -> str | None:
        master = self._owner(pid) if pid > 0 else None
        if master is None:
            return (
                f"{address}: the stats name master pid {pid}, which is not running here; "
                "check that the stats address is this instance's `stats =` socket"
            )
        if peer_uid == master:
            return None
        return (
            f"{address}: the stats socket is served by uid {peer_uid}, but the master "
            f"(pid {pid}) runs as uid {master}; not applying. Point the stats address at the "
            "instance's own `stats =` socket (another process may hold this path)"
        )

    def _tcp(self, addr: StatsAddress, address: str, pid: int) -> str | None:
        """The listener proved to be master `pid`'s, else why not."""
        fix = (
            f"; not applying over {addr.kind.upper()}: use a unix stats socket, or "
            f"{self.opt_in} to trust whoever answers on that port"
        )
        where = _join(addr.host, addr.port)
        try:
            table = self.listeners()
        except OSError as exc:
            why = f"cannot list the TCP listeners (netlink sock_diag: {exc.strerror or exc})"
            return f"{address}: {why} to prove {where} is master {pid}'s" + fix
        found = reaching(addr.host, addr.port, table, _ips(addr.host))
        if not found:
            return (
                f"{address}: no TCP socket listens on {where} in this network namespace, so "
                f"it cannot be proved master {pid}'s" + fix
            )
        try:
            held = socket_inodes(pid, self.proc) if pid > 0 else None
        except FileNotFoundError:
            held = None
        except OSError as exc:
            return (
                f"{address}: cannot read {self.proc / str(pid) / 'fd'} ({exc.strerror}) to "
                f"prove {where} is master {pid}'s (run uwsgitune as root or as the master's "
                "user)" + fix
            )
        if held is None:
            return f"{address}: the stats name master pid {pid}, which is not running here" + fix
        for t in found:
            if t.inode not in held:
                which = f"the listener on {_join(t.address, t.port)}"
                which = "its listener" if t.address == addr.host else which
                return (
                    f"{address}: {which} (socket inode {t.inode}, uid {t.uid}) is not held by "
                    f"master {pid}, whose pid the stats name: another process may have taken "
                    "the stats port" + fix
                )
        return None

    def _owner(self, pid: int) -> int | None:
        try:
            return (self.proc / str(pid)).stat().st_uid
        except OSError:
            return None


def _parsed(address: StatsAddress | str) -> StatsAddress | None:
    if isinstance(address, StatsAddress):
        return address
    try:
        return parse_address(address)
    except AddressError:
        return None
