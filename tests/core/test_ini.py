"""The pure ini reader: sections, repeated keys, includes through a loader, defaults."""

from __future__ import annotations

from uwsgitune.core.ini import parse_ini, read_ini_facts
from uwsgitune.rules import ConfigFacts

MAIN = """
; a comment
[uwsgi]
processes = 8
cheaper = 2
listen = 1024
stats-http = true
ini = tune.ini

[other]
processes = 99
"""


def test_includes_override_earlier_values() -> None:
    files = {"tune.ini": "[uwsgi]\nprocesses = 12\ncheaper_algo = manual\n"}
    facts = read_ini_facts(MAIN, files.__getitem__)
    assert facts["processes"] == 12 and facts["cheaper_algo"] == "manual"
    assert facts["listen"] == 1024 and facts["stats_http"] is True
    ConfigFacts(**facts)  # type: ignore[arg-type]


def test_defaults_for_missing_keys() -> None:
    facts = read_ini_facts("[uwsgi]\nworkers = 4\n")
    assert facts == {
        "processes": 4,
        "cheaper": 0,
        "cheaper_algo": None,
        "listen": 100,
        "threads": 1,
        "memory_report": False,
        "offload_threads": 0,
        "stats_http": False,
    }


def test_cheaper_without_algo_is_spare() -> None:
    assert read_ini_facts("[uwsgi]\ncheaper = 1\n")["cheaper_algo"] == "spare"


def test_repeated_keys_and_unparsable_values() -> None:
    pairs = parse_ini("[uwsgi]\nsocket = a\nsocket = b\nlisten = lots\n")
    assert pairs == [("socket", "a"), ("socket", "b"), ("listen", "lots")]
    assert read_ini_facts("[uwsgi]\nlisten = lots\n")["listen"] is None


def test_include_loops_stop() -> None:
    text = "[uwsgi]\nini = self.ini\nprocesses = 2\n"
    assert read_ini_facts(text, lambda _: text)["processes"] == 2
