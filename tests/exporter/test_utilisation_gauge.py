"""The pod autoscaler's signal as the tuner's step computes it and the exporter shows it:
`uwsgitune_capacity_utilisation` and its parts, absent without a tuner or rates."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import replace

import pytest
from prometheus_client import generate_latest

from tests.actuate.offline import at, offline
from tests.daemon.helpers import parse, value
from tests.tuner.plant import Plant
from uwsgitune.exporter.metrics import registry_for
from uwsgitune.pipeline import InstanceState
from uwsgitune.tuner import TunerSettings
from uwsgitune.tuner.result import Waiting
from uwsgitune.tuner.utilisation import capacity_utilisation

SETTINGS = TunerSettings(min_workers=2, max_workers=16)
FAMILIES = (
    "uwsgitune_capacity_utilisation",
    "uwsgitune_capacity_demand_requests",
    "uwsgitune_capacity_requests",
    "uwsgitune_capacity_ceiling_workers",
    "uwsgitune_capacity_cpu_bound",
)


def stepped(rate: float) -> InstanceState:
    """The state a driver publishes after a tuner's step in observe mode over 12 polls."""
    plant = Plant(live=8, workers_max=16, cpus=2.0, cpu_ms=5, io_ms=45, clients=None, rate=rate)
    frames = [plant.frame(float(t)) for t in range(12)]
    now = frames[-1].mono
    tuner = offline(settings=SETTINGS, mono=lambda: now)
    state = at(frames)
    return replace(state, tuning=tuner.step(state))


def render(snap: InstanceState) -> str:
    return generate_latest(registry_for(lambda: [snap])).decode()


def test_the_tuners_step_carries_the_signal_and_the_exporter_shows_it() -> None:
    snap = stepped(120)
    assert snap.tuning is not None and snap.tuning.utilisation is not None
    expect = capacity_utilisation(snap.frames, SETTINGS, snap.frames[-1].mono)
    assert snap.tuning.utilisation == expect
    samples = parse(render(snap))
    uri = snap.stats_uri
    got = value(samples, "uwsgitune_capacity_utilisation", stats_uri=uri)
    assert expect is not None and got == pytest.approx(expect.ratio)
    assert value(samples, "uwsgitune_capacity_ceiling_workers", stats_uri=uri) == 16
    assert value(samples, "uwsgitune_capacity_cpu_bound", stats_uri=uri) == 0


def test_no_signal_without_a_tuner() -> None:
    snap = stepped(120)
    text = render(replace(snap, tuning=None))
    assert not any(name in text for name in FAMILIES)


def test_no_signal_while_an_apply_waits() -> None:
    # A poll made during a reload keeps the step's result: its value is from before it.
    snap = replace(stepped(120), waiting=Waiting("the reload", 10.0, 30.0))
    assert not any(name in render(snap) for name in FAMILIES)


def test_the_families_pass_promtool() -> None:
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool is not installed (apt's prometheus package has it)")
    text = render(stepped(120))
    assert all(name in text for name in FAMILIES)
    done = subprocess.run(
        [promtool, "check", "metrics"], input=text, capture_output=True, text=True, check=False
    )
    assert "capacity" not in done.stdout + done.stderr, done.stdout + done.stderr
