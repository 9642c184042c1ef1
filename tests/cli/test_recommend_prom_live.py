"""`recommend --prometheus` end to end: a real Prometheus scrapes `uwsgitune daemon` and the
Go uwsgi_exporter (when $UWSGI_EXPORTER names it) beside a real uWSGI under load, every
second; the command reads a short range back, judges each instance with what its series
carry, and refuses a selector that matches nothing (naming the labels it found) or too many
instances. Equality with `recommend --replay` over longer runs is the bench's
(bench/prom_recommend_accuracy.py): this checks the pipeline, in well under 30 s."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator

import pytest

from tests.support.promstack import PromStack, go_exporter, prom_stack, prometheus_binary
from tests.uwsgi_harness import url, uwsgi_instance
from uwsgitune.cli.main import main
from uwsgitune.loadgen import run_open
from uwsgitune.sources.promapi import PromClient, PromOptions

# one stack for the module (`stack` is module-scoped): its tests on one xdist worker
pytestmark = [pytest.mark.uwsgi, pytest.mark.slow, pytest.mark.xdist_group("prom_live")]
LOAD_SECONDS = 6.0


def recommend(capsys: pytest.CaptureFixture[str], url: str, *args: str) -> tuple[int, str, str]:
    code = main(["recommend", "--prometheus", url, "--range", "10s", "--step", "1s", *args])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(scope="module")
def stack() -> Iterator[PromStack]:
    """One stack for the module: starting Prometheus and 8 s of scrapes is most of its cost."""
    if prometheus_binary() is None:
        pytest.skip("prometheus is not installed (apt-get install -y prometheus)")
    with uwsgi_instance(processes=2) as proc, prom_stack(proc.stats, scrape=1.0) as st:
        load = threading.Thread(target=run_open, args=(url(proc, "/"), 40.0, LOAD_SECONDS))
        load.start()
        load.join(LOAD_SECONDS + 30)
        yield st


def test_each_instance_is_judged_from_its_own_series(
    stack: PromStack, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = recommend(capsys, stack.url, "--json")
    assert code in (0, 1, 2), err
    doc = json.loads(out)
    by_job = {i["labels"]["job"]: i for i in doc["instances"]}
    daemon = by_job["uwsgitune"]
    assert daemon["source"] == "daemon" and daemon["observed"], daemon
    assert daemon["live"] == 2 and daemon["steps"] == 11
    # the range may begin before Prometheus's first scrape; never most of it missing
    assert daemon["missing_steps"] <= 5
    assert "oversubscribed_cpu" not in daemon["unknown"]  # the daemon has the CPU series
    assert "threads_gil" in daemon["unknown"]  # no series has per-worker CPU
    assert doc["fleet"]["observed"] == len(doc["instances"])
    # the daemon's per-instance sums are what summing its per-worker series gives
    sel = '{job="uwsgitune"}'
    pairs = [
        ("uwsgitune_worker_sum_requests_total", f"sum(uwsgi_worker_requests_total{sel})"),
        (
            "uwsgitune_worker_sum_running_time_seconds_total",
            f"sum(uwsgi_worker_running_time_seconds{sel})",
        ),
        ("uwsgitune_worker_slots", f"count(uwsgi_worker_busy{sel})"),
        ("uwsgitune_worker_rss_reporting", f"count(uwsgi_worker_rss_bytes{sel} > 0)"),
    ]
    with PromClient(PromOptions(stack.url)) as client:
        at = time.time()
        for own, summed in pairs:
            mine = client.instant(f"sum({own}{sel})", at)
            assert mine and mine[0].points, own
            # one query, so one scrape: two queries at one instant straddled a scrape that
            # landed between them (237 requests, then 240)
            diff = client.instant(f"sum({own}{sel}) - {summed}", at)
            assert diff and [v for _t, v in diff[0].points] == [0.0], (own, diff)
    if go_exporter() is None:
        assert set(by_job) == {"uwsgitune"}
        return
    plain = by_job["exporter"]
    assert plain["source"] == "exporter" and plain["observed"] and plain["live"] == 2
    assert "uwsgitune_instance_cpu_cores" in plain["unknown"]["oversubscribed_cpu"]
    assert doc["sources"] == {"daemon": 1, "exporter": 1}


def test_steps_after_the_last_scrape_are_gaps_not_its_sample_repeated(
    stack: PromStack, capsys: pytest.CaptureFixture[str]
) -> None:
    """Steps past now have no scrape: Prometheus would answer with the last sample for its
    5-minute lookback; they must read as missing (`stale_after`: 30 s at a 1 s step)."""
    end = time.time() + 60
    code = main(
        [
            *("recommend", "--prometheus", stack.url, "--range", "70s", "--step", "1s"),
            *("--end", f"{end:.0f}", "--json", "--selector", 'job="uwsgitune"'),
        ]
    )
    out, _ = capsys.readouterr()
    assert code in (0, 1, 2, 3)
    (inst,) = json.loads(out)["instances"]
    assert inst["missing_steps"] >= 25  # the 60 future steps less the 30 s allowed


def test_a_selector_matching_nothing_names_the_labels_found(
    stack: PromStack, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = recommend(capsys, stack.url, "--selector", 'job="nope"')
    assert code == 2 and out == ""
    (line,) = err.strip().splitlines()
    assert 'no uwsgi_up series match --selector job="nope"' in line
    assert "job: " in line and "uwsgitune" in line and "fix --selector" in line


def test_too_many_instances_or_a_bad_selector_are_refused_before_reading(
    stack: PromStack, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = recommend(capsys, stack.url, "--max-instances", "0")
    assert code == 2 and out == ""
    assert "more than --max-instances 0; narrow --selector" in err
    code, out, err = recommend(capsys, stack.url, "--selector", "job=~")
    assert code == 2 and out == ""
    assert "refused the query" in err and "--selector" in err
    assert len(err.strip().splitlines()) == 1
