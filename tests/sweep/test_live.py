"""Stepping the live count against a fake master that follows uWSGI's measured FIFO rules."""

from __future__ import annotations

import pytest

from tests.support.instances import Instance, Load
from uwsgitune.core.frame import Frame
from uwsgitune.sweep.live import Interrupted, LiveCount, SweepError


class FakeMaster:
    """`+`/`-` apply at the next cycle (one poll here); `-` only when idle, else stays pending;
    a `+` cancels a pending `-`; `+` beyond `slots` are dropped."""

    def __init__(self, live: int, slots: int = 8, busy: bool = False) -> None:
        self.live, self.slots, self.busy = live, slots, busy
        self.queued = ""
        self.debt = 0
        self.writes: list[str] = []
        self.instance, self.polls = Instance("fake"), 0  # its stats, through the real Tracker

    def write(self, commands: str) -> None:
        self.writes.append(commands)
        self.queued += commands

    def step(self) -> Frame:
        for c in self.queued:
            if c == "+":
                if self.debt:
                    self.debt -= 1
                else:
                    self.live = min(self.slots, self.live + 1)
            elif c == "-":
                self.debt += 1
        self.queued = ""
        if not self.busy:
            self.live, self.debt = max(0, self.live - self.debt), 0
        self.polls += 1
        return self.instance.frame(self.polls, Load(live=self.live, cheap=self.slots - self.live))


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, s: float) -> None:
        self.now += s


def counter(m: FakeMaster, timeout: float = 10.0) -> LiveCount:
    clock = Clock()
    return LiveCount(m.step, m, timeout=timeout, sleep=clock.sleep, mono=clock)


def test_up_and_down_in_one_write_each() -> None:
    m = FakeMaster(live=2)
    lc = counter(m)
    assert lc.reach(6) == 6 and m.writes == ["++++"]
    assert lc.reach(1) == 1 and m.writes == ["++++", "-----"]
    assert lc.reach(1) == 1 and len(m.writes) == 2  # already there: nothing sent


def test_never_sends_minus_while_one_is_pending() -> None:
    m = FakeMaster(live=6, busy=True)  # saturated: `-` stays pending
    with pytest.raises(SweepError, match=r"stuck at 6, wanted 2.*idle"):
        counter(m, timeout=5.0).reach(2)
    assert m.writes == ["----"]  # once, never repeated


def test_plus_is_resent_after_a_quiet_while_and_cancels_a_debt() -> None:
    m = FakeMaster(live=4)
    m.debt, m.busy = 2, True  # two earlier `-` pending
    lc = counter(m)
    assert lc.reach(5) == 5
    assert m.writes == ["+", "+", "+"]  # two swallowed by the debt, resent every 3 s


def test_floor_is_one_and_stop_interrupts() -> None:
    m = FakeMaster(live=2)
    lc = counter(m)
    with pytest.raises(SweepError, match="floor is 1"):
        lc.reach(0)
    lc.stop.is_set = True
    with pytest.raises(Interrupted):
        lc.reach(4)
    assert lc.reach(4, interruptible=False) == 4  # the restore path ignores Ctrl-C


def test_plus_beyond_the_slots_times_out_with_a_fix() -> None:
    with pytest.raises(SweepError, match="cheaper-algo = manual"):
        counter(FakeMaster(live=2, slots=4), timeout=4.0).reach(6)
