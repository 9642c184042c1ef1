"""Fixtures shared by the tuner's tests."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

SIM = Path(__file__).resolve().parents[2] / "bench" / "fleet_sim.py"


@pytest.fixture(scope="module")
def sim() -> ModuleType:
    """bench/fleet_sim.py, the simulated fleet, loaded as a module."""
    spec = importlib.util.spec_from_file_location("fleet_sim", SIM)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["fleet_sim"] = mod  # dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod
