"""The validated model: every recorded fixture parses, and so do drifted documents."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import FIXTURES
from tests.support.instances import document, never_spawned, poll_of, worker
from uwsgitune.core.derive import Tracker
from uwsgitune.core.model import DocumentError, parse_stats
from uwsgitune.render import jsonview
from uwsgitune.render.text import plain_line, summary

ALL_FIXTURES = sorted(p.name for p in FIXTURES.glob("*.json"))


def _fixture_paths() -> list[Path]:
    paths = sorted(FIXTURES.glob("*.json"))
    assert len(paths) >= 11
    return paths


@pytest.mark.parametrize("path", _fixture_paths(), ids=lambda p: f"{p.parent.parent.name}/{p.name}")
def test_every_fixture_parses_and_renders(path: Path) -> None:
    raw = path.read_bytes()
    doc = parse_stats(raw)
    assert doc.version.startswith("2.0")
    assert doc.pid > 0
    assert doc.is_emperor or doc.workers
    tracker = Tracker("fx")
    first = tracker.update(poll_of(raw, 0.0))
    second = tracker.update(poll_of(raw, 1.0))
    assert first.kind == "first" and first.rps is None
    assert second.kind == "ok"
    if not doc.is_emperor:
        assert second.rps == 0.0  # the same document twice: no traffic, not a spike
    assert summary(second) and plain_line(second)
    json.loads(jsonview.dumps([second]))


def test_fixture_specifics() -> None:
    def load(name: str) -> Any:
        return parse_stats((FIXTURES / name).read_bytes())

    emperor = load("emperor.json")
    assert emperor.is_emperor and emperor.vassals and emperor.vassals[0].id == "v1.ini"
    assert not emperor.workers
    metrics = load("enable-metrics.json")
    assert metrics.metrics and "core.routed_signals" in metrics.metrics
    minified = load("minified-no-cores.json")
    assert all(not w.cores for w in minified.workers)
    assert minified.threads == 1
    threads = load("threads.json")
    assert threads.threads == 2
    cheaper = load("cheaper.json")
    assert [w.live for w in cheaper.workers] == [True, True, False, False]
    unix = load("uwsgi-socket.json")
    assert [s.is_unix for s in unix.sockets] == [False, True]
    busy = load("64-workers-2-threads-busy.json")
    assert len(busy.workers) == 64 and all(w.busy for w in busy.workers)


def test_unknown_fields_at_every_level_are_ignored() -> None:
    w = worker(1, 11, requests=3) | {"new_counter": 7, "nested": {"x": [1, 2]}}
    w["cores"][0]["future"] = "yes"
    raw = document(workers=[w], brand_new_top={"a": 1})
    sockets = json.loads(raw)
    sockets["sockets"][0]["tls"] = True
    doc = parse_stats(json.dumps(sockets))
    assert doc.workers[0].requests == 3


def test_missing_fields_default() -> None:
    doc = parse_stats(b'{"pid": 5, "workers": [{"id": 1, "pid": 6}], "sockets": [{"name": "x"}]}')
    w = doc.workers[0]
    assert (w.requests, w.running_time, w.status, w.cores) == (0, 0, "idle", ())
    assert doc.version == "" and doc.sockets[0].queue == 0


def test_live_counted_by_status_not_accepting() -> None:
    cheaped = worker(2, 22, status="cheap")  # a cheaped worker keeps its pid and accepting=1
    assert cheaped["accepting"] == 1
    doc = parse_stats(document(workers=[worker(1, 11), cheaped, never_spawned()]))
    assert [w.live for w in doc.workers] == [True, False, False]
    frame = Tracker("s").update(
        poll_of(document(workers=[worker(1, 11), cheaped, never_spawned()]), 0)
    )
    assert (frame.workers_max, frame.live, frame.cheap, frame.idle) == (3, 1, 2, 1)


@pytest.mark.parametrize(
    "raw",
    [b"{", b'{"workers": "x"}', b'{"workers": [{"requests": "many"}]}', b"[]", b"nul"],
)
def test_bad_documents_raise_validation_error(raw: bytes) -> None:
    with pytest.raises(DocumentError):
        parse_stats(raw)


def test_all_fixture_names_are_known() -> None:
    assert "64-workers-2-threads-busy.json" in ALL_FIXTURES


def test_invalid_utf8_outside_request_data_is_invalid_json() -> None:
    with pytest.raises(DocumentError) as caught:
        parse_stats(b'{"version": "2.0.\xff", "workers": []}')
    assert (caught.value.kind, caught.value.msg) == ("json", "invalid UTF-8 in a string")
