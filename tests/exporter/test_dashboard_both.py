"""The migration page's promises, checked: one real Prometheus scrapes the Go uwsgi_exporter
and uwsgitune on the same uWSGI, and every panel of the compat dashboard answers for each;
the Prometheus snippets of the page pass `promtool check config`."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.daemon.conftest import DaemonProc
from tests.daemon.helpers import wait_for
from tests.exporter.test_prometheus import query, scalar
from tests.support.grafana import substitute, targets, variables
from tests.uwsgi_harness import url
from uwsgitune.launch import UwsgiProcess, free_port
from uwsgitune.loadgen import run_open

ROOT = Path(__file__).resolve().parents[2]
# The prebuilt Go exporter lives outside the repository: $UWSGI_EXPORTER, or on PATH.
GO = Path(os.environ.get("UWSGI_EXPORTER") or shutil.which("uwsgi_exporter") or "uwsgi_exporter")
DASHBOARD = ROOT / "examples" / "grafana-uwsgi-compat.json"
DOC = ROOT / "docs" / "migrating-from-uwsgi_exporter.md"
BOTH = """
global: {{scrape_interval: 1s, scrape_timeout: 1s}}
scrape_configs:
  - job_name: uwsgi_go
    static_configs: [{{targets: ["127.0.0.1:{go}"]}}]
  - job_name: uwsgi
    static_configs: [{{targets: ["127.0.0.1:{ours}"]}}]
"""


def exprs() -> list[str]:
    return [t.expr for t in targets(DASHBOARD)]


@pytest.mark.uwsgi
@pytest.mark.slow
def test_the_compat_dashboard_answers_for_both_exporters(
    uwsgi: Callable[..., UwsgiProcess],
    start_daemon: Callable[..., DaemonProc],
    prometheus: Callable[[str], int],
) -> None:
    if not GO.exists():
        pytest.skip(f"the Go uwsgi_exporter is not at {GO}; set UWSGI_EXPORTER=PATH")
    a = uwsgi(processes=2)
    go_port = free_port()
    go = subprocess.Popen(
        [str(GO), f"--stats.uri=unix://{a.stats}", f"--web.listen-address=127.0.0.1:{go_port}"],
        stderr=subprocess.DEVNULL,
    )
    try:
        d = start_daemon("--stats.uri", f"unix://{a.stats}")
        prom = prometheus(BOTH.format(go=go_port, ours=d.port))
        for job in ("uwsgi_go", "uwsgi"):
            wait_for(lambda j=job: scalar(prom, f'up{{job="{j}"}}') == 1, timeout=60)  # type: ignore[misc]
        load = threading.Thread(target=run_open, args=(url(a, "/"), 30.0, 7.0, 300))
        load.start()
        time.sleep(6)
        defined = variables(json.loads(DASHBOARD.read_text()))
        for expr in exprs():  # a wide window: a starved test machine can miss scrapes
            for job in ("uwsgi_go", "uwsgi"):
                promql = substitute(expr, {"job": [job]}, defined)
                assert query(prom, promql), (job, promql)
        load.join()

        def same_count() -> bool:  # both have scraped the instance since the load ended
            counts = [
                scalar(prom, f'sum(uwsgi_worker_requests_total{{job="{j}"}})')
                for j in ("uwsgi_go", "uwsgi")
            ]
            return bool(counts[0]) and counts[0] == counts[1]

        wait_for(same_count, timeout=30, step=0.5)
    finally:
        go.send_signal(2)
        go.wait(10)


def test_the_dashboard_uses_only_names_both_serve() -> None:
    names = set((ROOT / "tests" / "data" / "uwsgi_exporter-metric-names.txt").read_text().split())
    names |= {"uwsgi_exporter_scrape_errors_total"}
    used = {n for e in exprs() for n in re.findall(r"\b(uwsgi_[a-z_]+)\{", e)}
    assert used and used <= names, used - names


def test_the_migration_snippets_are_valid_prometheus_config(tmp_path: Path) -> None:
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool is not installed (apt-get install -y prometheus)")
    blocks = [
        b for b in re.findall(r"```yaml\n(.*?)```", DOC.read_text(), re.S) if "scrape_configs" in b
    ]
    assert len(blocks) == 2
    for i, block in enumerate(blocks):
        path = tmp_path / f"snippet{i}.yml"
        path.write_text(block)
        out = subprocess.run([promtool, "check", "config", str(path)], capture_output=True)
        assert out.returncode == 0, out
