"""Hostile input, fuzzed: the stats parser and the daemon's config loader fail only with
their documented errors (ValueError / ConfigError), never anything else.

Case counts: 2000 mutated stats documents, 1500 arbitrary JSON values, 1500 config
documents, 500 raw TOML byte strings (5500 in all)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import stats_fixture
from uwsgitune.core.derive import Tracker
from uwsgitune.core.model import parse_stats
from uwsgitune.core.samples import Poll
from uwsgitune.daemon.config import DaemonConfig, load_config, validate
from uwsgitune.errors import ConfigError

SOURCE = "fuzz"
BASE = json.loads(stats_fixture("cheaper.json"))
scalars = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=12,
)


def mutate(doc: Any, path: list[int], new: Any) -> Any:
    """Replace the node reached by walking `path` (indices modulo size) with `new`."""
    if not path or not isinstance(doc, dict | list) or not doc:
        return new
    keys = list(doc) if isinstance(doc, dict) else list(range(len(doc)))
    key = keys[path[0] % len(keys)]
    out = dict(doc) if isinstance(doc, dict) else list(doc)
    out[key] = mutate(doc[key], path[1:], new)  # type: ignore[index]
    return out


def parse_or_documented_error(raw: bytes) -> None:
    try:
        doc = parse_stats(raw)
    except ValueError:
        return
    tracker = Tracker(SOURCE)
    for t in (1.0, 2.0):  # what parses must also derive (rates need two polls) without raising
        tracker.update(Poll(SOURCE, 1_800_000_000.0 + t, t, doc=doc))


@settings(max_examples=2000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.integers(0, 50), max_size=6), values)
def test_mutated_stats_documents(path: list[int], new: Any) -> None:
    parse_or_documented_error(json.dumps(mutate(BASE, path, new)).encode())


@settings(max_examples=1500, deadline=None)
@given(values | st.binary(max_size=200).map(lambda b: b.decode("latin-1")))
def test_arbitrary_json_and_bytes(value: Any) -> None:
    raw = value.encode("utf-8", "surrogatepass") if isinstance(value, str) else b""
    parse_or_documented_error(raw or json.dumps(value).encode())


OPTIONAL = ("fifo", "mode", "min_workers", "max_workers", "interval", "timeout", "override")
OPTIONAL += ("bogus",)
instance = st.fixed_dictionaries(
    {"name": st.text(max_size=12) | st.just("app"), "stats": st.text(max_size=30) | st.just("/s")},
    optional={k: values for k in OPTIONAL},
)


@settings(max_examples=1500, deadline=None)
@given(st.lists(instance, max_size=3), st.dictionaries(st.text(max_size=15), values, max_size=3))
def test_config_documents(instances: list[dict[str, Any]], daemon: dict[str, Any]) -> None:
    try:
        cfg = validate({"instance": instances, "daemon": daemon}, "fuzz")
    except ConfigError as exc:
        assert exc.problems and all(isinstance(p, str) and p for p in exc.problems)
        return
    assert isinstance(cfg, DaemonConfig)
    for inst in cfg.instance:  # what validates is in range
        assert inst.min_workers >= 1 and inst.interval >= 0.1
        assert inst.max_workers is None or inst.max_workers >= inst.min_workers


@pytest.fixture(scope="module")
def toml_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzz") / "c.toml"


@settings(
    max_examples=500, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.binary(max_size=300) | st.text(max_size=300).map(str.encode))
def test_raw_config_files(toml_path: Path, data: bytes) -> None:
    toml_path.write_bytes(data)
    try:
        load_config(toml_path)
    except ConfigError as exc:
        assert exc.problems
