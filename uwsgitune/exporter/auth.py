"""HTTP basic auth against the web config's bcrypt hashes, with the password checks bounded
so that wrong passwords cannot take the CPU, the threads or the endpoint (issue 36.4).

A bcrypt check costs ~80 ms of CPU at cost 10, twice that per step of cost (`config check`
refuses costs above 12). Unbounded, 64 connections sending wrong passwords kept every core
busy and the default thread pool full, and scrapes, renders and probes waited behind them.
The rules:

- Remembered verdicts. Prometheus sends the same credentials every scrape, so a success is
  remembered (as exporter-toolkit does), and so is a failure, for `FAIL_SECONDS` (a
  minute): a client repeating a wrong password costs one bcrypt a minute. A verdict is
  keyed by an HMAC-SHA-256 of (user, password, hash) under a random per-process key: never
  a password, worthless outside the process. Since the hash is in the key, a verdict never
  goes stale (a new hash, a new user, a corrected password: new keys), so the minute only
  bounds how long a failure is kept; both caches are bounded in size too. (At 5 s, 64
  connections each repeating its own wrong password kept the check thread busy as if
  every password were new: bench/results/scrape_abuse.md.)
- One check at a time, on a thread of its own (`Checker`): never asyncio's default pool,
  which renders and probes share, so nothing else waits behind the checks. While checks
  wait, the thread rests as long as it worked (`duty` 0.5): failed logins take at most
  half a core, and leave the rest of the daemon (its event loop, its polls) room.
  Identical checks waiting at once (same key) share one bcrypt.
- A bounded queue. A connection has at most one check waiting (it sends one request at a
  time, and a second is refused). A peer (`admission.peer_key`: an IPv4 address, an IPv6
  /64) has at most `per_peer` (2). A peer's first check is always queued (there are no
  more of those than connections), a further one only while fewer than `total` (16) wait.
  The queue is served round-robin across peers, so a flood from a few addresses delays a
  newcomer's first check by about one check per flooding peer, not by the whole queue.
  A check whose connection is dropped before its turn is never run.
- No room, no work: a check that cannot be queued is refused without bcrypt; the site
  answers 503 with `Retry-After`. Not 401: the password was not found wrong, and a
  scraper's log then says "busy", not "wrong password".
- An unknown user is checked against a dummy hash, and its failure remembered the same
  way, so timing tells nothing about which users exist.

The site answers a refused login a second late and the server then closes the connection
(`site.py`, `server.py`); the connection caps keep room for peers that did log in
(`admission.py`).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import hmac
import secrets
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Hashable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Generic, TypeVar

import bcrypt

# A valid hash of a random string: unknown users are checked against it (constant work).
_DUMMY = b"$2b$10$tWS9VNP.Asi.0c74fgbe7.j430qEUvVrjhVHA0B38XNRky6DAQDw."
MAX_CACHED = 64  # remembered successes (cleared when full: only good passwords get there)
FAIL_SECONDS = 60.0  # a failure is remembered this long
MAX_FAILED = 4096  # remembered failures (the oldest forgotten first): ~0.5 MiB
PER_PEER = 2  # checks one peer may have waiting
TOTAL = 16  # checks waiting in all, beyond each peer's first
DUTY = 0.5  # the share of its time the check thread works while checks wait
T = TypeVar("T")


def credentials(header: str | None) -> tuple[str, str] | None:
    """(user, password) from an `Authorization: Basic ...` value, or None."""
    if not header:
        return None
    scheme, _, token = header.strip().partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        text = base64.b64decode(token.strip(), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return None
    user, sep, password = text.partition(":")
    return (user, password) if sep else None


@dataclass(frozen=True)
class PasswordCheck:
    """What one bcrypt check needs, and the key its verdict is remembered by."""

    key: bytes
    password: bytes
    hashed: bytes  # the user's hash, or the dummy for an unknown user
    known: bool  # the user exists (else the check fails whatever bcrypt says)


class Verdicts:
    """The remembered verdicts: successes until the cache fills, failures for `fail_seconds`."""

    def __init__(
        self,
        clock: Callable[[], float] = time.monotonic,
        fail_seconds: float = FAIL_SECONDS,
        max_failed: int = MAX_FAILED,
    ) -> None:
        self.clock = clock
        self.fail_seconds = fail_seconds
        self.max_failed = max_failed
        self._ok: set[bytes] = set()
        self._failed: dict[bytes, float] = {}  # key -> when it is forgotten; oldest first
        self._lock = threading.Lock()  # `BasicAuth.check` runs in any thread

    def __len__(self) -> int:
        return len(self._ok) + len(self._failed)

    def get(self, key: bytes) -> bool | None:
        with self._lock:
            if key in self._ok:
                return True
            self._forget(self.clock())
            return False if key in self._failed else None

    def put(self, key: bytes, ok: bool) -> None:
        with self._lock:
            if ok:
                if len(self._ok) >= MAX_CACHED:
                    self._ok.clear()
                self._ok.add(key)
                return
            now = self.clock()
            self._failed.pop(key, None)
            self._failed[key] = now + self.fail_seconds
            self._forget(now)

    def _forget(self, now: float) -> None:
        failed = self._failed
        while failed and (len(failed) > self.max_failed or next(iter(failed.values())) <= now):
            del failed[next(iter(failed))]


class PeerQueue(Generic[T]):
    """Waiting items per peer, taken round-robin across peers; the caps of the module's
    docstring. Pure: no I/O, no event loop."""

    def __init__(self, per_peer: int = PER_PEER, total: int = TOTAL) -> None:
        self.per_peer = per_peer
        self.total = total
        self._peers: OrderedDict[str, deque[T]] = OrderedDict()  # next to serve first
        self._count = 0

    def __len__(self) -> int:
        return self._count

    def room(self, peer: str) -> bool:
        waiting = len(self._peers.get(peer, ()))
        return waiting == 0 or (waiting < self.per_peer and self._count < self.total)

    def push(self, peer: str, item: T) -> None:
        self._peers.setdefault(peer, deque()).append(item)
        self._count += 1

    def pop(self) -> T | None:
        """The next item: the oldest of the peer whose turn it is (which goes last)."""
        if not self._peers:
            return None
        peer, items = self._peers.popitem(last=False)
        item = items.popleft()
        if items:
            self._peers[peer] = items
        self._count -= 1
        return item

    def remove(self, peer: str, item: T) -> None:
        items = self._peers.get(peer)
        if items is not None and item in items:
            items.remove(item)
            self._count -= 1
            if not items:
                del self._peers[peer]


class _Job:
    """A check waiting in the queue or running, and how many requests wait for it."""

    __slots__ = ("check", "future", "owners", "peer", "started")

    def __init__(self, check: PasswordCheck, peer: str, future: asyncio.Future[bool]) -> None:
        self.check = check
        self.peer = peer
        self.future = future
        self.owners = 0
        self.started = False


class Checker:
    """The verdicts, the one bcrypt thread and the queue to it. One per process (the daemon's
    sites share it across reloads: keys carry the hash, so a verdict stays true), used from
    one event loop at a time."""

    def __init__(
        self,
        *,
        per_peer: int = PER_PEER,
        total: int = TOTAL,
        verdicts: Verdicts | None = None,
        checkpw: Callable[[bytes, bytes], bool] = bcrypt.checkpw,
        duty: float = DUTY,
    ) -> None:
        self.verdicts = verdicts if verdicts is not None else Verdicts()
        self.checkpw = checkpw
        self.duty = duty
        self.queue: PeerQueue[_Job] = PeerQueue(per_peer, total)
        self.refused = 0  # checks answered 503: no room in the queue
        self.checked = 0  # bcrypt checks run
        self._secret = secrets.token_bytes(32)
        self._jobs: dict[bytes, _Job] = {}  # waiting or running, by key
        self._owners: set[Hashable] = set()  # connections with a check waiting
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="uwsgitune-bcrypt")
        self._pump: asyncio.Task[None] | None = None

    def key(self, user: str, password: str, hashed: bytes) -> bytes:
        fields = (user.encode(), password.encode(), hashed)
        message = b"".join(len(f).to_bytes(4, "big") + f for f in fields)  # unambiguous
        return hmac.new(self._secret, message, hashlib.sha256).digest()

    def verify(self, check: PasswordCheck) -> bool:
        """One bcrypt check, remembered (blocking: on the check thread, or in a test)."""
        self.checked += 1
        try:
            good = self.checkpw(check.password, check.hashed) and check.known
        except ValueError:  # a malformed hash, a password over 72 bytes (bcrypt 5)
            good = False
        self.verdicts.put(check.key, good)
        return good

    async def run(
        self, check: PasswordCheck, peer: str, owner: Hashable | None = None
    ) -> bool | None:
        """The check's verdict, after its turn on the check thread; None when the queue has
        no room for it (then no bcrypt is spent). `owner`: the connection asking."""
        job = self._jobs.get(check.key)
        if job is None:
            if owner in self._owners or not self.queue.room(peer):
                self.refused += 1
                return None
            job = _Job(check, peer, asyncio.get_running_loop().create_future())
            self._jobs[check.key] = job
            self.queue.push(peer, job)
            self._start()
        job.owners += 1
        if owner is not None:
            self._owners.add(owner)
        try:
            return await asyncio.shield(job.future)
        finally:
            self._owners.discard(owner)
            job.owners -= 1
            if job.owners == 0 and not job.started:  # nobody waits for it: never run it
                self.queue.remove(job.peer, job)
                self._drop(job)

    def _start(self) -> None:
        if self._pump is None or self._pump.done():
            self._pump = asyncio.ensure_future(self._serve())

    async def _serve(self) -> None:
        """Run the queue's checks one after another, each on the check thread."""
        loop = asyncio.get_running_loop()
        while (job := self.queue.pop()) is not None:
            job.started = True
            start = time.monotonic()
            try:
                good = await loop.run_in_executor(self._executor, self.verify, job.check)
            except BaseException as exc:  # cancelled with the loop: fail its waiters too
                self._finish(job, exc=exc)
                raise
            self._finish(job, good)
            if len(self.queue) and self.duty < 1:  # a rest as long as the check, at 0.5
                await asyncio.sleep((time.monotonic() - start) * (1 / self.duty - 1))

    def _finish(self, job: _Job, good: bool = False, exc: BaseException | None = None) -> None:
        self._drop(job)
        if job.future.done():
            return
        if exc is None:
            job.future.set_result(good)
        else:
            job.future.cancel()

    def _drop(self, job: _Job) -> None:
        if self._jobs.get(job.check.key) is job:
            del self._jobs[job.check.key]
        if not job.future.done() and not job.started:
            job.future.cancel()


class BasicAuth:
    """The users of one web config, checked through a `Checker` (its own unless given)."""

    def __init__(self, users: dict[str, bytes], checker: Checker | None = None) -> None:
        self.users = dict(users)
        self.checker = checker if checker is not None else Checker()

    @property
    def enabled(self) -> bool:
        return bool(self.users)

    def lookup(self, header: str | None) -> bool | PasswordCheck:
        """The verdict if it is known without bcrypt (no users, no or bad credentials, a
        remembered verdict), else the check to run."""
        if not self.users:
            return True
        creds = credentials(header)
        if creds is None:
            return False
        user, password = creds
        hashed = self.users.get(user)
        key = self.checker.key(user, password, hashed or b"")
        known = self.checker.verdicts.get(key)
        if known is not None:
            return known
        return PasswordCheck(key, password.encode(), hashed or _DUMMY, hashed is not None)

    def check(self, header: str | None) -> bool:
        """Whether the header carries a known user with the right password (blocking, in
        the caller's thread: for tests and tools; the endpoint uses `authorize`)."""
        found = self.lookup(header)
        return found if isinstance(found, bool) else self.checker.verify(found)

    async def authorize(
        self, header: str | None, peer: str = "", owner: Hashable | None = None
    ) -> bool | None:
        """`check` through the checker's queue; None when it has no room (answer 503)."""
        found = self.lookup(header)
        return found if isinstance(found, bool) else await self.checker.run(found, peer, owner)
