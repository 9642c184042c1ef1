"""Basic auth's password checks without sockets: remembered verdicts (failures too, for a minute),
the bounded queue to the one check thread, served round-robin across peers."""

from __future__ import annotations

import asyncio
import base64
import threading
import time

import bcrypt

from tests.exporter.conftest import HASH, PASSWORD
from uwsgitune.exporter.auth import (
    FAIL_SECONDS,
    BasicAuth,
    Checker,
    PasswordCheck,
    PeerQueue,
    Verdicts,
    credentials,
)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


class Counting:
    """bcrypt.checkpw, counted; wrong passwords wait for `gate` when one is given."""

    def __init__(self, gate: threading.Event | None = None) -> None:
        self.calls: list[bytes] = []
        self.gate = gate

    def __call__(self, password: bytes, hashed: bytes) -> bool:
        self.calls.append(password)
        if self.gate is not None and password != PASSWORD.encode():
            self.gate.wait(30)
        return bcrypt.checkpw(password, hashed)


def test_success_is_remembered_and_a_failure_for_a_minute() -> None:
    clock, checkpw = Clock(), Counting()
    auth = BasicAuth(
        {"prometheus": HASH.encode()}, Checker(verdicts=Verdicts(clock), checkpw=checkpw)
    )
    good, bad = basic("prometheus", PASSWORD), basic("prometheus", "wrong")
    assert auth.check(good) and auth.check(good) and len(checkpw.calls) == 1
    assert not auth.check(bad) and not auth.check(bad) and len(checkpw.calls) == 2
    nobody = basic("nobody", PASSWORD)  # an unknown user: one (dummy) check, remembered
    assert not auth.check(nobody) and not auth.check(nobody) and len(checkpw.calls) == 3
    clock.now += FAIL_SECONDS + 0.1
    assert not auth.check(bad) and len(checkpw.calls) == 4  # forgotten, checked again
    assert auth.check(good) and len(checkpw.calls) == 4  # a success stays
    assert not auth.check(None) and not auth.check("Bearer x") and len(checkpw.calls) == 4
    assert not auth.check("Basic !!!notbase64")
    assert credentials("Basic " + "YTpiOmM=") == ("a", "b:c")


def test_remembered_failures_are_bounded_and_keyed_by_a_digest() -> None:
    clock = Clock()
    verdicts = Verdicts(clock, max_failed=100)
    checker = Checker(verdicts=verdicts, checkpw=lambda p, h: False)
    auth = BasicAuth({"prometheus": HASH.encode()}, checker)
    for i in range(1000):
        assert not auth.check(basic("prometheus", f"guess-{i}"))
    assert len(verdicts) == 100 and checker.checked == 1000
    key = checker.key("prometheus", "guess-999", HASH.encode())
    assert len(key) == 32 and verdicts.get(key) is False and b"guess" not in key
    # lengths are part of the key: moving a byte between user and password is another key
    assert checker.key("a", "bc", b"h") != checker.key("ab", "c", b"h")


def test_the_queue_serves_peers_round_robin_within_its_caps() -> None:
    queue: PeerQueue[str] = PeerQueue(per_peer=2, total=3)
    for peer, item in (("a", "a1"), ("a", "a2"), ("b", "b1"), ("c", "c1")):
        assert queue.room(peer)
        queue.push(peer, item)
    assert not queue.room("a")  # its two
    assert not queue.room("b")  # a second check while 3 or more wait in all
    assert queue.room("d")  # a peer's first is always taken
    assert [queue.pop() for _ in range(5)] == ["a1", "b1", "c1", "a2", None]


async def test_a_check_without_room_is_refused_at_once_without_bcrypt() -> None:
    gate = threading.Event()
    checkpw = Counting(gate)
    checker = Checker(per_peer=2, total=16, checkpw=checkpw)
    auth = BasicAuth({"prometheus": HASH.encode()}, checker)

    def attempt(peer: str, n: int, owner: object = None) -> asyncio.Task[bool | None]:
        header = basic("prometheus", f"wrong-{peer}-{n}")
        return asyncio.ensure_future(auth.authorize(header, peer, owner))

    try:
        running = attempt("a", 0)  # takes the check thread, and waits for the gate
        while not checkpw.calls:
            await asyncio.sleep(0.01)
        owner = object()
        waiting = [attempt("a", 1, owner), attempt("a", 2)]
        same = asyncio.ensure_future(auth.authorize(basic("prometheus", "wrong-a-1"), "a"))
        await asyncio.sleep(0.05)
        assert await attempt("a", 3) is None  # the peer's two are waiting
        assert await attempt("b", 0, owner) is None  # that connection has one waiting
        assert checker.refused == 2 and len(checker.queue) == 2
        gate.set()
        assert await running is False
        assert await asyncio.gather(*waiting, same) == [False, False, False]
        assert len(checkpw.calls) == 3  # the identical check shared one bcrypt
    finally:
        gate.set()


async def test_a_waiting_check_whose_client_went_is_never_run() -> None:
    gate = threading.Event()
    checkpw = Counting(gate)
    checker = Checker(checkpw=checkpw)
    auth = BasicAuth({"prometheus": HASH.encode()}, checker)
    try:
        first = asyncio.ensure_future(auth.authorize(basic("prometheus", "x"), "a"))
        while not checkpw.calls:
            await asyncio.sleep(0.01)
        gone = asyncio.ensure_future(auth.authorize(basic("prometheus", "y"), "b"))
        await asyncio.sleep(0.05)
        gone.cancel()  # its connection was aborted
        await asyncio.sleep(0.05)
        assert len(checker.queue) == 0
        gate.set()
        assert await first is False
        await asyncio.sleep(0.1)
        assert checkpw.calls == [b"x"]
        assert isinstance(auth.lookup(basic("prometheus", "y")), PasswordCheck)  # never checked
    finally:
        gate.set()


async def test_while_checks_wait_the_check_thread_rests_as_long_as_it_worked() -> None:
    """Three checks of at least 0.1 s each, queued together: with `duty` 0.5 the last ends
    no sooner than 0.5 s after the first began (three checks, two rests). A lower bound: a
    busy machine only makes it later."""

    def slow(password: bytes, hashed: bytes) -> bool:
        time.sleep(0.1)
        return False

    auth = BasicAuth({"prometheus": HASH.encode()}, Checker(checkpw=slow, duty=0.5))
    t0 = time.monotonic()
    tries = [auth.authorize(basic("prometheus", f"x{i}"), f"peer{i}") for i in range(3)]
    assert await asyncio.gather(*tries) == [False, False, False]
    assert time.monotonic() - t0 >= 0.5
