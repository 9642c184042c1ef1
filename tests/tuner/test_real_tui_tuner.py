"""The TUI's apply key without the screen: `TuiTuner` against a real uWSGI. A confirmed
change is applied only when a fresh decision is the same, only under the apply lock, and
is audited; the outcome says which."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from uwsgitune.actuate.loop import TuneLoop
from uwsgitune.sources.watcher import InstanceWatch
from uwsgitune.tui.tuning import TuiTuner, applied

from tests.tuner.real import live, wait_for
from tests.uwsgi_harness import url
from uwsgitune.actuate.audit import AuditLog
from uwsgitune.actuate.fifo import MasterFifo
from uwsgitune.actuate.lock import ApplyLock
from uwsgitune.core.address import parse_address
from uwsgitune.launch import UwsgiProcess
from uwsgitune.loadgen import run_closed
from uwsgitune.pipeline import InstancePipeline, pipeline_for
from uwsgitune.tui.annotate import tuner_annotation
from uwsgitune.tuner import Decision, TunerSettings

pytestmark = pytest.mark.uwsgi


@pytest.fixture
def loaded(uwsgi: Callable[..., UwsgiProcess]) -> Iterator[UwsgiProcess]:
    proc = uwsgi(processes=6, cheaper=1, cheaper_initial=1, cheaper_algo="manual")
    stop = threading.Thread(target=run_closed, args=(url(proc, "/io/50"), 6, 25.0))
    stop.start()
    yield proc
    stop.join(40)


def _step(pipeline: InstancePipeline) -> tuple[Decision | None, str | None]:
    """One poll through the pipeline: the tuner's decision and an apply request's outcome."""
    result = pipeline.step().tuning
    assert result is not None
    return result.decision, applied(result)


def _advice(tuner: TuiTuner, pipeline: InstancePipeline) -> Decision:
    end = time.monotonic() + 15
    while time.monotonic() < end:
        time.sleep(max(0.0, pipeline.watch.next_due - time.monotonic()))
        d, _ = _step(pipeline)
        if d is not None and d.is_change:
            return d
    raise AssertionError(f"no advice to change in 15 s: {list(tuner.lines)[-3:]}")


def test_apply_key_path(loaded: UwsgiProcess, tmp_path: Path) -> None:
    proc = loaded
    watch = InstanceWatch(parse_address(proc.stats), interval=0.5)
    audit = AuditLog(tmp_path / "audit.jsonl")
    settings = TunerSettings(max_workers=6, cpu_saturated=1.0)  # a busy host must not block
    loop = TuneLoop(watch, MasterFifo(proc.fifo), None, settings, "recommend", audit)
    lock_dir = tmp_path / "locks"
    tuner = TuiTuner(loop, ApplyLock(proc.fifo, "uwsgitune watch", lock_dir))
    pipeline = pipeline_for(watch, tuner=tuner.advise)

    d = _advice(tuner, pipeline)
    assert d.action == "up" and d.live == 1
    note = tuner_annotation(d)
    assert "press a to apply" in note.recommendation
    assert live(proc) == 1  # advice only

    # Confirmed something the fresh decision does not say: nothing is applied.
    tuner.request("up", d.desired + 1)
    _, outcome = _step(pipeline)
    assert outcome is not None and outcome.startswith("not applied: the advice is now")

    # Another uwsgitune holds the instance: nothing is applied.
    other = ApplyLock(proc.fifo, "uwsgitune daemon", lock_dir)
    assert other.acquire() is None
    tuner.request("up", d.desired)
    _, outcome = _step(pipeline)
    assert outcome is not None and "already tuned by" in outcome
    assert "uwsgitune daemon" in outcome
    other.release()
    assert live(proc) == 1 and not audit.path.exists()

    d = _advice(tuner, pipeline)
    tuner.request("up", d.desired)
    _, outcome = _step(pipeline)
    assert outcome is not None and outcome.startswith("applied: up 1->"), outcome
    assert wait_for(lambda: live(proc) > 1)
    changes = [r for r in audit.records() if r.event == "change"]
    assert [c.result for c in changes] == ["sent"] and changes[0].mode == "recommend"
    assert not tuner.lock.held  # held only while applying
