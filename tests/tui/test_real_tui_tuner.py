"""The TUI's apply key without the screen, against a real uWSGI: the driver and its tuner as
`watch --fifo` builds them (recommend mode). A confirmed change is applied only when a
fresh decision is the same, only under the apply lock, and is audited; the typed
`requested` of the step says which."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support.tuned import live, service, tuned, wait_for
from tests.uwsgi_harness import url
from uwsgitune.actuate.audit import AuditLog
from uwsgitune.actuate.lock import ApplyLock
from uwsgitune.launch import UwsgiProcess
from uwsgitune.loadgen import LoadRun
from uwsgitune.pipeline import InstanceDriver
from uwsgitune.tui.annotate import tuner_annotation
from uwsgitune.tuner import Decision, TunerSettings
from uwsgitune.tuner.result import Requested, StepResult

pytestmark = pytest.mark.uwsgi


@pytest.fixture
def loaded(uwsgi: Callable[..., UwsgiProcess]) -> Iterator[UwsgiProcess]:
    """A pool of 1 under a load that wants more, for as long as the test runs (at most 120 s,
    stopped at its end): a fixed 25 s load once ended before a busy machine's test did."""
    proc = uwsgi(processes=6, cheaper=1, cheaper_initial=1, cheaper_algo="manual")
    run = LoadRun(url(proc, "/io/50"), duration=120.0, max_requests=20_000)
    load = threading.Thread(target=lambda: asyncio.run(run.closed_loop(6)))
    load.start()
    try:
        yield proc
    finally:
        run.stop()
        load.join(40)


def _step(driver: InstanceDriver, now: bool = False) -> StepResult:
    """One poll through the driver, in this thread: the tuner's result. `now`: at once,
    as the TUI polls after `y` (else on the schedule)."""
    if now:
        driver.poll_now()
    result = driver.run(until=lambda _state: True).tuning
    assert result is not None
    return result


def _asked(driver: InstanceDriver) -> Requested:
    """What became of the apply asked by hand, served at the next poll."""
    asked = _step(driver, now=True).requested
    assert asked is not None
    return asked


def _advice(driver: InstanceDriver) -> Decision:
    end, said = time.monotonic() + 30, list[str]()
    while time.monotonic() < end:
        result = _step(driver)
        said += [n.text for n in result.notes if n.fresh]
        d = result.decision
        if d is not None and d.is_change:
            return d
    raise AssertionError(f"no advice to change in 30 s: {said[-3:]}")


def test_apply_key_path(loaded: UwsgiProcess, tmp_path: Path) -> None:
    proc = loaded
    audit = AuditLog(tmp_path / "audit.jsonl")
    settings = TunerSettings(max_workers=6, cpu_saturated=1.0)  # a busy host must not block
    lock_dir = tmp_path / "locks"
    driver = tuned(
        proc.stats,
        proc.fifo,
        settings=settings,
        mode="recommend",
        audit=audit,
        locks=lock_dir,
        role="uwsgitune watch",
    )
    tuner = service(driver)

    d = _advice(driver)
    assert d.action == "up" and d.live == 1
    note = tuner_annotation(d)
    assert "press a to apply" in note.recommendation
    assert live(proc) == 1  # advice only

    # Confirmed something the fresh decision does not say: nothing is applied.
    tuner.request("up", d.desired + 1)
    asked = _asked(driver)
    assert asked.kind == "changed" and asked.text.startswith("not applied: the advice is now")

    # Another uwsgitune holds the instance: nothing is applied.
    other = ApplyLock(Path(proc.fifo), "uwsgitune daemon", lock_dir)
    assert other.acquire() is None
    tuner.request("up", d.desired)
    asked = _asked(driver)
    assert asked.kind == "locked" and "already tuned by" in asked.text
    assert "uwsgitune daemon" in asked.text
    other.release()
    assert live(proc) == 1 and not audit.path.exists()

    # On a host busy with other work the fresh poll may see the CPUs used up and advise
    # holding (`changed`, as above): the user then confirms the next advice, a few times.
    for _ in range(3):
        d = _advice(driver)
        tuner.request("up", d.desired)
        asked = _asked(driver)
        if asked.kind != "changed":
            break
    assert asked.kind == "applied" and asked.text.startswith("applied: up 1 → "), asked.text
    assert wait_for(lambda: live(proc) > 1)
    changes = [r for r in audit.records() if r.event == "change"]
    assert [c.result for c in changes] == ["sent"] and changes[0].mode == "recommend"
    assert tuner.lock is None  # held only while applying
    driver.close()
