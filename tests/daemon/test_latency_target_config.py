"""The daemon's `latency_target = "p99=250ms"`: one value for the tuner and the rules,
refused in one line when it cannot be judged or is set twice."""

from __future__ import annotations

import pytest

from uwsgitune.core.latencytarget import LatencyTarget
from uwsgitune.daemon.config import validate
from uwsgitune.errors import ConfigError

BASE = {"name": "app", "stats": "/run/app.sock", "latency": "127.0.0.1:9118"}
P99 = LatencyTarget("p99", 250.0)


def one(**inst: object):  # type: ignore[no-untyped-def]
    return validate({"instance": [{**BASE, **inst}]}, "f.toml").instance[0]


def problem(**inst: object) -> str:
    with pytest.raises(ConfigError) as info:
        one(**inst)
    (line,) = info.value.lines()
    return line


def test_the_target_is_the_tuners_and_the_rules() -> None:
    inst = one(latency_target="p99=250ms")
    assert inst.tuner_settings(4).latency_target == P99 == inst.rule_settings().latency_target
    assert one(latency_target="p99=0.25s").latency_target == P99
    # a dump validates again: the target is written as it reads
    again = validate({"instance": [inst.model_dump(exclude_none=True)]}, "f.toml").instance[0]
    assert again.latency_target == P99
    # as a shared setting, in either table, it is both's too
    inst = one(rules={"latency_target": "p95=1s"})
    assert inst.tuner_settings(4).latency_target == LatencyTarget("p95", 1000.0)
    assert one().tuner_settings(4).latency_target is None


def test_refused_in_one_line() -> None:
    assert "instance[0].latency_target: 'p99=soon' is not a latency target" in problem(
        latency_target="p99=soon"
    )
    line = problem(latency_target="p99=250ms", tuner={"latency_target": "p99=1s"})
    assert "latency_target is set twice; keep it in [[instance]]" in line
    with pytest.raises(ConfigError) as info:
        validate({"instance": [{**BASE, "latency": None, "latency_target": "p99=1s"}]}, "f")
    assert "latency_target needs latency" in info.value.lines()[0]
