"""Hostile daemon configs, fuzzed: the config loader fails only with its documented error
(ConfigError, one line per problem), never anything else, and what validates is in range.
The stats parser is fuzzed the same way in tests/core/test_fuzz_stats.py, whose JSON values
these reuse.

Case counts: 1500 config documents, 500 raw TOML byte strings (2000 in all)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.core.test_fuzz_stats import values
from uwsgitune.daemon.config import DaemonConfig, load_config, validate
from uwsgitune.errors import ConfigError

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
