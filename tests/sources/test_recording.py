"""Recordings: redaction of request vars, the round trip, and `watch --replay`."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from tests.conftest import DATA, stats_fixture
from tests.support.instances import document, poll_of, run_cli, worker
from tests.support.latencymix import traffic_view
from uwsgitune.cli.main import main
from uwsgitune.core.latencyform import latency_summary
from uwsgitune.core.latencyreport import LatencyView
from uwsgitune.core.redact import strip_request_vars
from uwsgitune.core.samples import HostSample, Poll, ProcSample, UnixQueue
from uwsgitune.pipeline import InstanceDriver, run_replay
from uwsgitune.sources.recording import (
    RecordingError,
    RecordingWriter,
    ReplaySource,
    host_to_record,
    read_recording,
)

BUSY = stats_fixture("64-workers-2-threads-busy.json")


def test_strip_request_vars_removes_every_var_and_keeps_the_input() -> None:
    doc = json.loads(BUSY)
    assert any(c["vars"] for w in doc["workers"] for c in w["cores"])
    out = strip_request_vars(doc)
    assert all(c["vars"] == [] for w in out["workers"] for c in w["cores"])
    assert any(c["vars"] for w in doc["workers"] for c in w["cores"])  # input untouched
    assert out["workers"][0]["requests"] == doc["workers"][0]["requests"]
    assert strip_request_vars({"vassals": []}) == {"vassals": []}


def _host() -> HostSample:
    return HostSample(
        cpu_count=2,
        effective_cpus=2.0,
        cpu_busy_seconds=1.0,
        cpu_total_seconds=4.0,
        mem_total=1 << 30,
        mem_available=1 << 29,
        procs=(ProcSample(1, 0.5, 100),),
        unix_queues=(UnixQueue("/x.sock", 1, 10),),
    )


@pytest.mark.parametrize("keep", [False, True])
def test_writer_redacts_unless_asked(keep: bool) -> None:
    stream = io.StringIO()
    writer = RecordingWriter(stream, keep_vars=keep)
    poll = poll_of(BUSY, 1.0, host=_host())
    writer.write(poll, BUSY)
    writer.write(Poll("s", 2.0, 2.0, error="s: refused"), None)
    lines = stream.getvalue().splitlines()
    header = json.loads(lines[0])
    assert header["uwsgitune_recording"] == 1 and header["request_vars"] is keep
    text = lines[1]
    assert ("HTTP_HOST=" in text) is keep
    assert ("REQUEST_URI" in text) is keep
    rec = json.loads(text)
    assert rec["host"]["unix_queues"][0]["backlog"] == 10
    assert json.loads(lines[2])["error"] == "s: refused"


def test_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    docs = [
        document(workers=[worker(1, 11, requests=n * 10, running_time=n * 10_000)])
        for n in range(4)
    ]
    with path.open("w") as fh:
        writer = RecordingWriter(fh)
        for i, raw in enumerate(docs):
            writer.write(poll_of(raw, float(i), host=_host()), raw)
        writer.write(Poll("s", 9.0, 9.0, error="s: connection refused; no uWSGI"), None)
    polls = list(read_recording(path))
    assert [p.ok for p in polls] == [True, True, True, True, False]
    assert polls[2].doc is not None and polls[2].doc.workers[0].requests == 20
    assert polls[0].host == _host()


def test_newer_host_fields_are_ignored(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    host = {**host_to_record(_host()), "future": 1}
    rec = {"source": "s", "t": 1.0, "mono": 1.0, "doc": json.loads(document()), "host": host}
    path.write_text(json.dumps({"uwsgitune_recording": 1}) + "\n" + json.dumps(rec) + "\n")
    (poll,) = read_recording(path)
    assert poll.host is not None and poll.host.cpu_count == 2


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("not json\n", "r.jsonl:1: not JSON"),
        ("[1]\n", "not a recording line"),
        ('{"uwsgitune_recording": 99}\n', "format 99 is not supported"),
        ('{"source": "s"}\n', "damaged poll record"),
        ('{"source": "s", "t": 1, "mono": 1, "doc": {"workers": "x"}}\n', "damaged poll record"),
        ('{"source": "s", "t": 1, "mono": 1, "latency": {"short": {}}}\n', "r.jsonl:1: damaged"),
        ('{"source": "s", "t": 1, "mono": 1, "latency": {"short": 1}}\n', "r.jsonl:1: damaged"),
    ],
)
def test_damaged_recordings_are_one_line(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "r.jsonl"
    path.write_text(content)
    with pytest.raises(RecordingError, match=message):
        list(read_recording(path))


def test_replay_cli_modes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "r.jsonl"
    with path.open("w") as fh:
        writer = RecordingWriter(fh)
        for i in range(3):
            raw = document(workers=[worker(1, 11, requests=i * 5, running_time=i * 50_000)])
            writer.write(poll_of(raw, float(i), source="/run/s.sock"), raw)
        writer.write(
            Poll(
                "/run/s.sock",
                1_800_000_003.0,
                3.0,
                error="/run/s.sock: connection refused; no uWSGI",
            ),
            None,
        )
        raw = document(workers=[worker(1, 11, requests=25, running_time=250_000)])
        writer.write(poll_of(raw, 4.0, source="/run/s.sock"), raw)
    assert main(["watch", "--replay", str(path), "--plain"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 5
    assert "event=first" in lines[0] and "rps=-" in lines[0]
    assert "rps=5.0" in lines[1]
    assert "disconnected since" in lines[3] and lines[3].count("/run/s.sock") == 1
    assert "rps=7.5" in lines[4]  # 15 requests over the 2 s since the last good poll
    assert main(["watch", "--replay", str(path), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["schema_version"] == 1 and doc["instances"][0]["rps"] == 7.5
    assert main(["watch", "--replay", str(path), "--once"]) == 0
    assert "7.5 req/s" in capsys.readouterr().out


def test_replay_errors_exit_2(tmp_path: Path) -> None:
    missing = run_cli("watch", "--replay", str(tmp_path / "nope.jsonl"), "--once")
    assert missing.returncode == 2 and "cannot open" in missing.stderr
    assert "Traceback" not in missing.stderr
    empty = tmp_path / "e.jsonl"
    empty.write_text('{"uwsgitune_recording": 1}\n')
    res = run_cli("watch", "--replay", str(empty), "--once")
    assert res.returncode == 2 and "holds no polls" in res.stderr


def _latency_recording(path: Path) -> list[LatencyView | None]:
    """Three polls, the last two with a latency view (the second one untrusted); the views."""
    views: list[LatencyView | None] = [
        None,
        traffic_view(coverage=0.9),
        traffic_view(trusted=False, stamped=True),
    ]
    with path.open("w") as fh:
        writer = RecordingWriter(fh)
        for i, view in enumerate(views):
            raw = document(workers=[worker(1, 11, requests=i * 5, running_time=i * 50_000)])
            writer.write(poll_of(raw, float(i), source="/run/s.sock"), raw, view)
    return views


def test_a_recording_keeps_each_polls_latency_and_a_replay_shows_it(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    views = _latency_recording(path)
    lines = path.read_text().splitlines()
    assert json.loads(lines[0])["uwsgitune_recording"] == 1  # only added: the same version
    assert "latency" not in json.loads(lines[1]) and "export" not in json.loads(lines[2])["latency"]
    seen: list[LatencyView | None] = []

    def make(source: ReplaySource) -> InstanceDriver:
        driver = InstanceDriver(source)
        driver.subscribe(lambda state: seen.append(state.latency))
        return driver

    run_replay(read_recording(path), make)
    assert seen[0] is None
    for got, want in zip(seen[1:], views[1:], strict=True):
        assert got is not None and want is not None
        assert latency_summary(got) == latency_summary(want)
    last = seen[2]
    assert last is not None and last.trusted is False and last.stamped


def test_watch_replay_json_carries_the_recorded_latency(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "r.jsonl"
    last = _latency_recording(path)[2]
    assert last is not None
    assert main(["watch", "--replay", str(path), "--json"]) == 0
    (inst,) = json.loads(capsys.readouterr().out)["instances"]
    assert inst["latency"]["trusted"] is False
    assert inst["latency"]["long"]["requests"] == last.long.requests
    assert main(["watch", "--replay", str(path), "--plain", "--json"]) == 0
    docs = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert ["latency" in d["instances"][0] for d in docs] == [False, True, True]
    assert docs[1]["instances"][0]["latency"]["coverage"] == 0.9
    assert main(["watch", "--replay", str(path), "--plain"]) == 0
    plain = capsys.readouterr().out.splitlines()
    assert ["p99_ms=" in line for line in plain] == [False, True, True]
    assert plain[2].endswith("trusted=no")
    assert main(["watch", "--replay", str(path), "--once"]) == 0
    once = capsys.readouterr().out
    assert "  service   10s: p50" in once and "UNTRUSTED" in once


def test_an_old_recording_replays_without_latency() -> None:
    polls = list(read_recording(DATA / "recordings" / "healthy.jsonl"))
    assert polls and all(p.latency is None for p in polls)
