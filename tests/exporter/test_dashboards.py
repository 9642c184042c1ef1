"""The dashboards of examples/ against a real Prometheus that holds data: two real uWSGIs
under load (one busy, one idle with more workers than it needs), each sending its request log
to one real `uwsgitune daemon` that tunes (recommend mode) and exports them, scraped every
second. Every panel's query, Grafana's variables substituted as Grafana sends them, must
return series; so must every variable's query. The compat dashboard runs here on the
daemon's series, and beside the Go exporter's in tests/exporter/test_dashboard_both.py. The
dashboards' structure is checked without Prometheus."""

from __future__ import annotations

import asyncio
import json
import re
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator, Mapping
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.support.grafana import (
    ALL,
    BUILTINS,
    VARIABLE,
    panels,
    substitute,
    targets,
    used_variables,
    variables,
)
from tests.support.promstack import PromStack, prom_stack, prometheus_binary
from tests.uwsgi_harness import url, uwsgi_instance
from uwsgitune.core.logline import log_format
from uwsgitune.launch import UwsgiProcess, free_port
from uwsgitune.loadgen import LoadRun

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "examples" / "grafana-dashboard.json"
DASHBOARDS = [DASHBOARD, ROOT / "examples" / "grafana-uwsgi-compat.json"]
# Grafana's ValueMatcherID (packages/grafana-data): what filterByValue's conditions may be
VALUE_MATCHERS = {"greater", "greaterOrEqual", "lower", "lowerOrEqual", "equal", "notEqual"}
VALUE_MATCHERS |= {"isNull", "isNotNull"}
DATA_DEADLINE = 45.0  # seconds for every query to answer: 3 s on an idle machine
LOAD_SECONDS = DATA_DEADLINE + 15
DAEMON = """
[daemon]
state_dir = "{state}"
"""
INSTANCE = """
[[instance]]
name = "{name}"
stats = "{stats}"
fifo = "{fifo}"
mode = "recommend"
interval = 0.5
latency = "127.0.0.1:{latency}"

[instance.rules]
idle_window_seconds = 10
"""


def dashboard(path: Path) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(path.read_text())
    return doc


# Without Prometheus ------------------------------------------------------------------------


@pytest.mark.parametrize("path", DASHBOARDS, ids=lambda p: p.name)
def test_every_panel_has_a_data_source_a_query_and_a_unique_id(path: Path) -> None:
    dash = dashboard(path)
    ids = [p["id"] for p in dash["panels"]] + [
        q["id"] for p in dash["panels"] for q in p.get("panels", [])
    ]
    assert len(ids) == len(set(ids)), sorted(ids)
    for p in panels(dash):
        name = f"{p['id']} {p['title']}"
        assert p["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, name
        assert p["targets"], name
        refs = [t["refId"] for t in p["targets"]]
        assert len(refs) == len(set(refs)), name
        assert all(t["expr"].strip() for t in p["targets"]), name
        assert p["gridPos"]["x"] >= 0 and p["gridPos"]["x"] + p["gridPos"]["w"] <= 24, name
    cells = [
        (p["id"], x, y)
        for p in dash["panels"]
        for x in range(p["gridPos"]["x"], p["gridPos"]["x"] + p["gridPos"]["w"])
        for y in range(p["gridPos"]["y"], p["gridPos"]["y"] + p["gridPos"]["h"])
    ]
    taken: dict[tuple[int, int], int] = {}
    for pid, x, y in cells:  # no two panels on the same grid cell: Grafana would move one
        assert taken.setdefault((x, y), pid) == pid, (pid, taken[x, y])


@pytest.mark.parametrize("path", DASHBOARDS, ids=lambda p: p.name)
def test_every_variable_used_is_defined_before_its_use(path: Path) -> None:
    """In the panels' queries, titles and descriptions, and in the variables' own queries
    (which may use only the variables defined above them: Grafana resolves them in order)."""
    dash = dashboard(path)
    defined = list(variables(dash))
    for i, var in enumerate(dash["templating"]["list"]):
        query = var.get("query", "")
        text = query if isinstance(query, str) else query["query"]
        assert used_variables(text) <= set(defined[:i]) | set(BUILTINS), var["name"]
    for p in panels(dash):
        texts = [p["title"], p.get("description", ""), *(t["expr"] for t in p["targets"])]
        texts += [t.get("legendFormat", "") for t in p["targets"]]
        assert {v for t in texts for v in used_variables(t)} <= set(defined) | set(BUILTINS), p[
            "id"
        ]
        for t in p["targets"]:
            assert "{{" not in VARIABLE.sub("", t["expr"]), (p["id"], t["expr"])


def test_the_fleet_view_reads_well_in_grafana() -> None:
    """The fleet row's panels have units and thresholds; the sizing table merges its
    queries by instance, filters on fields its queries produce and names every column."""
    dash = dashboard(DASHBOARD)
    fleet = [p for p in dash["panels"] if 100 < p["id"] < 200]
    assert {p["type"] for p in fleet} >= {"stat", "bargauge", "timeseries", "table"}
    for p in fleet:
        defaults = p["fieldConfig"]["defaults"]
        assert p["description"], p["title"]
        if p["type"] != "table":
            assert defaults["unit"] and defaults["thresholds"]["steps"], p["title"]
    (table,) = [p for p in fleet if p["type"] == "table"]
    fields = {f"Value #{t['refId']}" for t in table["targets"]}
    assert all(t["format"] == "table" and t["instant"] for t in table["targets"])
    merge, filt, organize = table["transformations"]
    assert merge["id"] == "merge" and filt["id"] == "filterByValue"
    assert {f["fieldName"] for f in filt["options"]["filters"]} <= fields
    assert {f["config"]["id"] for f in filt["options"]["filters"]} <= VALUE_MATCHERS
    names = organize["options"]["renameByName"]
    assert set(names) == fields
    coloured = {o["matcher"]["options"] for o in table["fieldConfig"]["overrides"]}
    # the verdict, the utilisation, Δ workers: coloured
    assert {names["Value #G"], names["Value #A"], names["Value #D"]} <= coloured


def test_variables_are_substituted_as_grafana_sends_them() -> None:
    defined = {
        "job": {"name": "job", "multi": True, "includeAll": True, "allValue": ".*"},
        "by": {"name": "by"},
    }
    forms = 'job=~"$job", a=~"${job}", b=~"${job:regex}", c=~"[[job]]"'
    expr = f"sum by ($by) (rate(x{{{forms}}}[$__rate_interval]))"
    got = substitute(expr, {"job": ["a.b", "c"], "by": ["pod"]}, defined, rate_interval="45s")
    regex = r"(a\\.b|c)"  # Grafana: regex-escaped, the backslash doubled inside a PromQL string
    sent = f'job=~"{regex}", a=~"{regex}", b=~"{regex}", c=~"{regex}"'
    assert got == f"sum by (pod) (rate(x{{{sent}}}[45s]))"
    assert substitute('x{job=~"$job"}[$__range]', {"job": [ALL]}, defined) == 'x{job=~".*"}[300s]'
    assert substitute("$by", {"by": ["a.b"]}, defined) == "a.b"  # not a regex: left as it is
    with pytest.raises(KeyError, match=r"defines no variable \$nope"):
        substitute('x{a=~"$nope"}', {}, defined)
    with pytest.raises(KeyError, match=r"no value for \$by"):
        substitute("$by", {}, defined)


# Against a real Prometheus -----------------------------------------------------------------


def query(stack: PromStack, expr: str) -> list[Mapping[str, Any]]:
    """An instant query's series; a query Prometheus refuses fails the test, naming it."""
    q = urllib.parse.urlencode({"query": expr})
    try:
        with urllib.request.urlopen(f"{stack.url}/api/v1/query?{q}", timeout=10) as r:
            doc = json.loads(r.read())
    except urllib.error.HTTPError as exc:
        raise AssertionError(f"Prometheus refused {expr}: {exc.read().decode()}") from None
    result: list[Mapping[str, Any]] = doc["data"]["result"]
    return result


def variable_query(text: str) -> str:
    """`label_values(SELECTOR, label)` as an instant query: the label's values are there
    when it returns series that carry the label."""
    m = re.fullmatch(r"label_values\((.*), *(\w+)\)", text.strip())
    assert m is not None, text
    return f"count by ({m.group(2)}) ({m.group(1)})"


def load(proc: UwsgiProcess, path: str, rate: float) -> tuple[LoadRun, threading.Thread]:
    """Stamped requests (the proxy's X-Request-Start: the queue-wait histogram) until the
    test ends, at most LOAD_SECONDS."""
    run = LoadRun(url(proc, path), duration=LOAD_SECONDS, stamp=True)
    thread = threading.Thread(target=lambda: asyncio.run(run.open_loop(rate)))
    thread.start()
    return run, thread


@dataclass(frozen=True)
class Fleet:
    stack: PromStack
    uris: dict[str, str]  # the instance's name -> its stats_uri label


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    """A busy instance (2 workers, 40 req/s of 20 ms) and an idle one (4 workers, 10 req/s):
    one daemon for both, as one host's uwsgitune watches its instances."""
    if prometheus_binary() is None:
        pytest.skip("prometheus is not installed (apt-get install -y prometheus)")
    config = DAEMON.format(state=tmp_path_factory.mktemp("state"))
    with ExitStack() as stack:
        procs = {}
        for name, workers in (("busy", 2), ("idle", 4)):
            port = free_port()
            procs[name] = proc = stack.enter_context(
                uwsgi_instance(
                    processes=workers,
                    disable_logging=None,
                    req_logger=f"socket:127.0.0.1:{port}",
                    log_format=log_format(None),
                )
            )
            fifo = proc.options["master-fifo"]
            config += INSTANCE.format(name=name, stats=proc.stats, fifo=fifo, latency=port)
        st = stack.enter_context(prom_stack(procs["busy"].stats, exporter=False, config=config))
        loads = [load(procs["busy"], "/io/20", 40.0), load(procs["idle"], "/", 10.0)]
        try:
            yield Fleet(st, {name: f"unix://{p.stats}" for name, p in procs.items()})
        finally:
            for run, thread in loads:
                run.stop()  # a flag its loop reads before each request
                thread.join(LOAD_SECONDS)


def values_found(stack: PromStack) -> dict[str, list[str]]:
    """The variables as a user would pick them: the job and the deployment the data holds
    (a group, not "All": `.*` would match a wrong label name too), two instances (a
    multi-value `=~` regex: the daemon's host:port and one that is not there), the top 10."""
    found = query(stack, "uwsgi_up")
    return {
        "job": sorted({s["metric"]["job"] for s in found}),
        "group_by": ["deployment"],
        "group": sorted({s["metric"]["deployment"] for s in found}),
        "instance": sorted({s["metric"]["instance"] for s in found} | {"127.0.0.1:1"}),
        "topk": ["10"],
    }


def dashboard_queries(path: Path, picked: Mapping[str, list[str]]) -> dict[str, str]:
    """Every variable's and every panel's query of a dashboard, as Grafana sends them."""
    dash = dashboard(path)
    defined = variables(dash)
    exprs: dict[str, str] = {}
    for var in dash["templating"]["list"]:
        if var["type"] == "query":
            text = var["query"] if isinstance(var["query"], str) else var["query"]["query"]
            name = f"{path.name} variable ${var['name']}"
            exprs[name] = variable_query(substitute(text, picked, defined))
    for t in targets(path):
        exprs[f"{path.name} panel {t.panel} {t.ref}"] = substitute(t.expr, picked, defined)
    return exprs


@pytest.mark.uwsgi  # the fixture starts real uWSGIs (marks on the helper above marked nothing)
@pytest.mark.slow
def test_every_panel_and_variable_of_the_dashboards_returns_series(fleet: Fleet) -> None:
    """Both dashboards; the compat one here on the daemon's series only (beside the Go
    exporter's: test_dashboard_both.py, where $UWSGI_EXPORTER names it)."""
    picked = values_found(fleet.stack)
    exprs = {k: e for path in DASHBOARDS for k, e in dashboard_queries(path, picked).items()}
    assert len(exprs) > 50

    empty = dict(exprs)
    deadline = time.monotonic() + DATA_DEADLINE  # bounded: the data arrives within seconds
    while empty and time.monotonic() < deadline:
        empty = {k: e for k, e in empty.items() if not query(fleet.stack, e)}
        time.sleep(0.5)
    assert not empty, "\n".join(f"{k}: {e}" for k, e in empty.items())

    # The fleet view ranks both instances; the idle one is listed as over-provisioned (a
    # verdict of -1): the rules found it idle.
    ranked = query(
        fleet.stack,
        exprs["grafana-dashboard.json panel 110 Instances by utilisation (busiest $topk) A"],
    )
    by_uri = {s["metric"]["stats_uri"]: float(s["value"][1]) for s in ranked}
    assert set(by_uri) == set(fleet.uris.values()), ranked
    assert by_uri[fleet.uris["idle"]] < 0.81, by_uri
    sizing = query(
        fleet.stack,
        exprs["grafana-dashboard.json panel 120 Over- and under-provisioned instances F"],
    )
    assert fleet.uris["idle"] in {s["metric"]["stats_uri"] for s in sizing}, sizing
    verdict = query(
        fleet.stack,
        exprs["grafana-dashboard.json panel 120 Over- and under-provisioned instances G"],
    )
    assert {fleet.uris["idle"]: "-1"}.items() <= {
        s["metric"]["stats_uri"]: s["value"][1] for s in verdict
    }.items(), verdict
