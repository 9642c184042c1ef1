"""`recommend --prometheus` without a real Prometheus: batches of instances selected by an
escaped regular expression, and a Prometheus that fails half way leaves one line and a
non-zero exit, never a part of the fleet printed as the whole."""

from __future__ import annotations

import json
import re
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.support.fakeprom import answering, matrix, success
from uwsgitune.cli.main import main
from uwsgitune.cli.recommend_prom import Grid, batches, duration, fetch
from uwsgitune.core.promframes import instance_labels
from uwsgitune.sources.promapi import PromClient, PromOptions


def _instances(n: int) -> list[tuple[tuple[str, str], ...]]:
    return [
        instance_labels({"job": "uwsgi", "instance": f"10.0.0.{i}:9117"}, False) for i in range(n)
    ]


def test_batches_select_by_the_label_that_tells_instances_apart_escaped() -> None:
    instances = _instances(25)
    got = list(batches(instances, steps=1441, points=1441 * 10))
    assert [len(b) for _, b in got] == [10, 10, 5]
    extra, first = got[0]
    assert extra.startswith('instance=~"10\\\\.0\\\\.0\\\\.0:9117|')  # `.` escaped for RE2
    # the regex (as PromQL's string unescapes it) matches its batch's instances only
    regex = extra.split("=~", 1)[1][1:-1].replace("\\\\", "\\")
    values = [dict(i)["instance"] for i in instances]
    assert [v for v in values if re.fullmatch(regex, v)] == [dict(i)["instance"] for i in first]


def test_one_batch_needs_no_extra_matcher() -> None:
    assert list(batches(_instances(3), steps=1441)) == [("", _instances(3))]


@pytest.mark.parametrize(
    ("text", "seconds"), [("24h", 86400.0), ("1h30m", 5400.0), ("2d", 172800.0), ("90", 90.0)]
)
def test_durations_read_as_prometheus_writes_them(text: str, seconds: float) -> None:
    assert duration(text) == seconds


def test_a_prometheus_failing_half_way_prints_nothing_but_one_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    ranges = 0

    def answer(form: dict[str, str]) -> tuple[int, bytes]:
        nonlocal ranges
        path = form["_path"]
        if path.endswith("/query"):  # the count
            return 200, success(
                {"resultType": "vector", "result": [{"metric": {}, "value": [0, "2"]}]}
            )
        if path.endswith("/series"):
            return 200, success([{"__name__": "uwsgi_up", "job": "uwsgi", "instance": "a:1"}])
        ranges += 1
        if ranges > 3:  # a few signals answered, then the server goes wrong
            return 503, b'{"status":"error","errorType":"unavailable","error":"shutting down"}'
        values = [[float(form["start"]), "1"]]
        return 200, matrix([{"metric": {"job": "uwsgi", "instance": "a:1"}, "values": values}])

    with answering() as start:
        url, _ = start(answer)
        code = main(["recommend", "--prometheus", url, "--range", "1h", "--end", "7200"])
    out, err = capsys.readouterr()
    assert code == 3 and out == ""
    (line,) = err.strip().splitlines()
    assert "Prometheus failed (HTTP 503, unavailable: shutting down); retry later" in line


def test_flags_for_one_instance_are_refused_with_prometheus(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = main(["recommend", "--prometheus", "http://127.0.0.1:1", "--window", "60"])
    assert code == 2
    assert "with --prometheus use --range" in capsys.readouterr().err


@pytest.mark.parametrize("daemon", [True, False])
def test_workers_series_are_summed_only_for_instances_without_the_daemons_sums(
    daemon: bool,
) -> None:
    """The daemon's `uwsgitune_worker_sum_*` spare Prometheus the per-worker aggregations;
    uwsgi_exporter's instances get them."""
    labels = {"job": "uwsgi", "instance": "a:1"}

    def answer(form: dict[str, str]) -> tuple[int, bytes]:
        q = form["query"]
        values = [[float(form["start"]) + 60 * i, str(i)] for i in range(3)]
        if "uwsgi_up" in q or (daemon and "uwsgitune_worker_sum_" in q):
            return 200, matrix([{"metric": labels, "values": values}])
        return 200, matrix([])

    grid = Grid(0.0, 120.0, 60.0)
    with answering() as start, ThreadPoolExecutor(2) as pool:
        url, seen = start(answer)
        with PromClient(PromOptions(url)) as client:
            got = fetch(client, "", "", [instance_labels(labels, False)], grid, pool)
    asked = [f["query"] for f in seen]
    per_worker = [q for q in asked if "without (worker_id)" in q]
    assert bool(per_worker) is not daemon
    assert not daemon or list(next(iter(got.instances.values())).values["requests_sum"]) == [
        0.0,
        1.0,
        2.0,
    ]


def test_judging_in_processes_gives_what_judging_here_gives(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`--jobs 3` shares the instances among processes started from a fork server; the
    verdicts come back in the instances' order, the same as judged in this process."""
    names = [f"i{k}:1" for k in range(7)]

    def answer(form: dict[str, str]) -> tuple[int, bytes]:
        path = form["_path"]
        if path.endswith("/query"):  # the count
            n = str(len(names))
            return 200, success(
                {"resultType": "vector", "result": [{"metric": {}, "value": [0, n]}]}
            )
        if path.endswith("/series"):
            return 200, success(
                [{"__name__": "uwsgi_up", "job": "uwsgi", "instance": i} for i in names]
            )
        start = float(form["start"])
        rows = []
        for k, inst in enumerate(names):  # each instance its own numbers: an order shows
            values = [[start + 60 * s, str((k + 1) * (s + 1))] for s in range(30)]
            rows.append({"metric": {"job": "uwsgi", "instance": inst}, "values": values})
        return 200, matrix(rows)

    outs = []
    with answering() as start:
        url, _ = start(answer)
        for jobs in ("1", "3"):
            argv = ["recommend", "--prometheus", url, "--range", "30m", "--end", "7200"]
            code = main([*argv, "--json", "--jobs", jobs])
            out, err = capsys.readouterr()
            assert code in (0, 1, 2, 3), err
            outs.append(json.loads(out))
    assert [i["labels"]["instance"] for i in outs[1]["instances"]] == names
    assert outs[0] == outs[1]


@pytest.mark.parametrize("jobs", ["-3", "0", "abc", "65"])
def test_a_bad_jobs_count_is_one_line_and_exit_2(
    jobs: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as stop:
        main(["recommend", "--prometheus", "http://127.0.0.1:1", "--jobs", jobs])
    err = capsys.readouterr().err.strip().splitlines()
    assert stop.value.code == 2 and len(err) == 1 and "--jobs" in err[0], err
