"""`[instance.tuner]` and `[instance.rules]`: every tuner and rule setting, per instance."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from uwsgitune.core.settings import SHARED
from uwsgitune.daemon.config import load_config, validate
from uwsgitune.errors import ConfigError
from uwsgitune.rules.rulesettings import RuleSettings
from uwsgitune.tuner.tunersettings import TunerSettings

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "uwsgitune.toml"
BASE = {"name": "app", "stats": "/run/app.sock"}


def one(**inst: object):  # type: ignore[no-untyped-def]
    return validate({"instance": [{**BASE, **inst}]}, "f.toml").instance[0]


def problems(**inst: object) -> list[str]:
    with pytest.raises(ConfigError) as info:
        one(**inst)
    return info.value.lines()


def test_every_setting_is_documented_in_the_example() -> None:
    text = EXAMPLE.read_text()
    names = set(TunerSettings.model_fields) | set(RuleSettings.model_fields)
    missing = [n for n in sorted(names) if not re.search(rf"^#? ?{n} = ", text, re.M)]
    assert not missing, missing


def test_the_example_tables_uncommented_hold_the_defaults(tmp_path: Path) -> None:
    text = EXAMPLE.read_text()
    head, tables = text.split("# [instance.tuner]", 1)
    tables, rest = tables.split("[[instance]]", 1)
    lines = ["[instance.tuner]"]
    for line in tables.splitlines():
        code = line.removeprefix("# ")
        unset = "memory_budget" in code or "latency_target" in code  # defaults: none
        if re.match(r"^\[instance\.rules\]|^\w+ = ", code) and not unset:
            lines.append(code)
    path = tmp_path / "u.toml"
    path.write_text(head + "\n".join(lines) + "\n\n[[instance]]" + rest)
    inst = load_config(path, {}).instance[0]
    assert inst.tuner.model_fields_set and inst.rules.model_fields_set
    defaults = TunerSettings(min_workers=2, max_workers=16)
    assert inst.tuner_settings(4) == defaults
    assert inst.rule_settings() == RuleSettings()


def test_tables_set_the_tuner_and_the_rules() -> None:
    inst = one(
        max_workers=12,
        tuner={"cooldown_down": 60, "cpu_saturated": 0.8},
        rules={"window_seconds": 45, "busy_full": 0.95},
    )
    tuner, rules = inst.tuner_settings(4), inst.rule_settings()
    assert (tuner.max_workers, tuner.cooldown_down, rules.window_seconds) == (12, 60, 45)
    # a shared setting set in either table is the rules' and the tuner's both
    assert tuner.cpu_saturated == rules.cpu_saturated == 0.8
    assert tuner.busy_full == rules.busy_full == 0.95
    assert set(TunerSettings.model_fields) & set(RuleSettings.model_fields) >= SHARED


def test_defaults_without_tables_and_the_ceiling_from_processes() -> None:
    inst = one()
    assert inst.rule_settings() == RuleSettings()
    assert inst.tuner_settings(6) == TunerSettings(min_workers=1, max_workers=6)


def test_bounds_may_go_in_the_tuner_table_once() -> None:
    inst = one(tuner={"min_workers": 2, "max_workers": 4, "interval": 2.0})
    assert (inst.min_workers, inst.max_workers, inst.interval) == (2, 4, 2.0)
    assert problems(interval=1.0, tuner={"interval": 2.0}) == [
        "f.toml: instance[0]: interval is set twice; keep it in [[instance]] or [instance.tuner]"
    ]
    [line] = problems(tuner={"min_workers": 3, "max_workers": 2})
    assert line == (
        "f.toml: instance[0]: max_workers (2) < min_workers (3); give min_workers <= max_workers"
    )


def test_one_line_per_problem_naming_the_key() -> None:
    lines = problems(
        tuner={"cooldown_dwn": 1, "cpu_saturated": 2}, rules={"window_seconds": "soon"}
    )
    assert sorted(lines) == [
        "f.toml: instance[0].rules.window_seconds: must be a valid number, unable to parse "
        "string as a number (got 'soon')",
        "f.toml: instance[0].tuner.cooldown_dwn: unknown key (a typo?)",
        "f.toml: instance[0].tuner.cpu_saturated: must be <= 1.0 (got 2)",
    ]


@pytest.mark.parametrize(
    "key",
    [
        "cpu_saturated",
        "cpu_instance_min",
        "io_cpu_share",
        "busy_full",
        "memory_headroom",
        "cpu_workers_per_cpu",
        "staffing_beta",
    ],
)
def test_a_shared_setting_set_twice_must_agree(key: str) -> None:
    inst = one(tuner={key: 0.8}, rules={key: 0.8})
    assert getattr(inst.rule_settings(), key) == getattr(inst.tuner_settings(4), key) == 0.8
    [line] = problems(tuner={key: 0.8}, rules={key: 0.7})
    assert f"{key} is 0.8 in [instance.tuner] but 0.7 in [instance.rules]" in line
    assert line.endswith("set it once")


def test_a_dump_validates_again() -> None:
    # `daemon --config FILE --metrics-listen ...` validates the dumped config again
    inst = one(tuner={"cpu_saturated": 0.8, "min_workers": 2}, rules={"window_seconds": 40})
    data = {"instance": [inst.model_dump(mode="json")]}
    assert data["instance"][0]["tuner"] == {"cpu_saturated": 0.8}
    again = validate(data, "command line").instance[0]
    assert again == inst and again.rule_settings() == inst.rule_settings()
