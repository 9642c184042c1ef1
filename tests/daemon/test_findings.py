"""The daemon's use of the rules engine: raised/cleared lines, metrics pairs, and a broken
engine that must not stop the daemon. The engine is injected (a fake with its signature)."""

from __future__ import annotations

import io
import logging
from dataclasses import dataclass
from typing import Any

import pytest

from uwsgitune.core.frame import Frame
from uwsgitune.daemon import logs
from uwsgitune.daemon.config import InstanceConfig
from uwsgitune.daemon.findings import FindingsTracker
from uwsgitune.daemon.instance import InstanceRunner


@dataclass(frozen=True)
class Rec:
    setting: str
    value: int | str | None


@dataclass(frozen=True)
class Found:
    id: str
    severity: str
    reason: str = "why"
    recommendation: Rec | None = None


def engine(script: list[list[Found]]) -> tuple[Any, Any]:
    def evaluate(frames: Any, facts: Any, settings: Any, state: Any) -> tuple[Any, Any]:
        return tuple(script.pop(0)), state

    return evaluate, dict


FRAMES = [Frame(source="x", t=1.0, mono=1.0, kind="ok")]


@pytest.fixture
def lines() -> Any:
    buf = io.StringIO()
    logs.setup("text", stream=buf)
    yield lambda: [ln for ln in buf.getvalue().splitlines() if "event=" in ln]
    logging.getLogger(logs.LOGGER).handlers.clear()


def test_raised_and_cleared_once_each(lines: Any) -> None:
    listen = Found("listen_queue.capacity_short", "critical", "queue full", Rec("processes", 12))
    memory = Found("memory.rss_growth", "warning", recommendation=Rec("reload-on-rss", "512"))
    t = FindingsTracker("app", "unix", engine([[listen], [listen, memory], [memory], []]))
    t.update(FRAMES)
    t.update(FRAMES)
    assert t.pairs() == (
        ("listen_queue.capacity_short", "critical"),
        ("memory.rss_growth", "warning"),
    )
    assert t.recommended() == (("processes", 12.0),)  # a string value is no metric
    t.update(FRAMES)
    t.update(FRAMES)
    got = lines()
    assert [ln.split("event=")[1].split()[0] for ln in got] == [
        "finding_raised", "finding_raised", "finding_cleared", "finding_cleared",
    ]  # fmt: skip
    assert 'reason="queue full"' in got[0] and "rule=listen_queue.capacity_short" in got[0]
    assert t.pairs() == ()


def test_a_broken_engine_is_logged_once_and_switched_off(lines: Any) -> None:
    def broken(*args: Any) -> Any:
        raise KeyError("bug")

    t = FindingsTracker("app", "unix", (broken, dict))
    t.update(FRAMES)
    t.update(FRAMES)
    got = lines()
    assert len(got) == 1 and "event=rules_failed" in got[0]


def test_the_real_engine_is_found() -> None:
    t = FindingsTracker("app", "unix")
    t.update(FRAMES)  # one frame: the engine says nothing yet, and does not fail
    assert t.pairs() == ()


async def test_actions_are_counted_for_the_metrics(lines: Any) -> None:
    runner = InstanceRunner(InstanceConfig(name="app", stats="/tmp/none.sock", mode="recommend"))
    runner.record_action("fifo", "ok", command="+")
    runner.record_action("fifo", "ok", command="+")
    assert runner.snapshot.actions == (("fifo", "ok", 2),)
    assert "event=action instance=app kind=fifo result=ok command=+" in lines()[0]
