"""Hostile stats documents, fuzzed: the parser fails only with its documented error
(ValueError), and what parses also derives, never anything else. The daemon's config loader
is fuzzed the same way in tests/daemon/test_fuzz_config.py.

Case counts: 2000 mutated stats documents, 1500 arbitrary JSON values (3500 in all)."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import stats_fixture
from uwsgitune.core.derive import Tracker
from uwsgitune.core.model import parse_stats
from uwsgitune.core.samples import Poll

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
