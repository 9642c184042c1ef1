"""examples/: the config validates, Prometheus accepts the scrape config and the rules, and
the dashboard and the alerts only query metrics the collector emits."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import msgspec
import pytest
from prometheus_client import generate_latest

from tests.conftest import stats_fixture
from tests.exporter.test_collector import URI
from tests.exporter.test_utilisation_gauge import stepped
from tests.states import finding
from tests.support.grafana import targets
from tests.support.latency import lognormal_view
from uwsgitune.core.derive import Tracker
from uwsgitune.core.model import parse_stats
from uwsgitune.core.samples import HostSample, Poll, ProcSample
from uwsgitune.daemon.config import load_config
from uwsgitune.exporter.metrics import registry_for
from uwsgitune.pipeline import InstanceState, PollCounts

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
NAME = re.compile(r"\b(uwsgi(?:tune)?_[a-z_]+)")


def busy_snapshot() -> InstanceState:
    """Two polls with traffic in between and host samples: every family has a value."""
    doc = parse_stats(stats_fixture("processes.json"))
    later = msgspec.structs.replace(
        doc,
        workers=tuple(
            msgspec.structs.replace(
                w, requests=w.requests + 10, running_time=w.running_time + 10**6
            )
            for w in doc.workers
        ),
    )
    pids = [doc.pid, *(w.pid for w in doc.workers)]
    tracker, frame = Tracker(URI), None
    for i, d in enumerate((doc, later)):
        host = HostSample(
            2,
            2.0,
            10.0 + i,
            40.0 + 2 * i,
            8 << 30,
            4 << 30,
            listen_overflows=5,
            somaxconn=4096,
            listen_drops=5,
            procs=tuple(ProcSample(p, 1.0 + i, 50 << 20) for p in pids),
        )
        frame = tracker.update(Poll(URI, 1000.0 + i, 10.0 + i, doc=d, host=host))
    return InstanceState(
        URI,
        "app",
        "apply",
        frame,
        tracker.prev,
        findings=(finding("x.y", "critical", "processes", 4),),
        actions=(("fifo", "ok", 1),),
        counts=PollCounts(1, 0, 0.1, 0.1, last_t=1001.0),
        latency=lognormal_view(seconds=5, wait_median_us=2_000),  # the request log, stamped
    )


def emitted() -> set[str]:
    """The names of a busy snapshot and of a tuner's step (the autoscaling signal)."""
    names: set[str] = set()
    for snap in (busy_snapshot(), stepped(120)):
        text = generate_latest(registry_for(lambda s=snap: [s])).decode()  # type: ignore[misc]
        names |= {line.split()[2] for line in text.splitlines() if line.startswith("# TYPE")}
        names |= {line.split("{")[0] for line in text.splitlines() if not line.startswith("#")}
    return names


def test_example_configs_validate() -> None:
    assert len(load_config(EXAMPLES / "uwsgitune.toml", {}).instance) == 2
    # examples/k8s-sidecar.yaml, with its web config: tests/exporter/test_k8s_example.py


def test_dashboard_and_alerts_query_emitted_metrics() -> None:
    names = emitted()
    exprs = [t.expr for t in targets(EXAMPLES / "grafana-dashboard.json")]
    exprs.append((EXAMPLES / "alerts.yml").read_text())
    exprs.append((EXAMPLES / "alerts_test.yml").read_text())  # its input series too
    used = {n for e in exprs for n in NAME.findall(e)}
    assert used and used <= names, used - names


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool not installed")
def test_promtool_accepts_examples() -> None:
    for args in (["check", "rules", "alerts.yml"], ["check", "config", "prometheus.yml"]):
        out = subprocess.run(["promtool", *args], cwd=EXAMPLES, capture_output=True, timeout=60)
        assert out.returncode == 0, out


@pytest.mark.skipif(
    shutil.which("promtool") is None,
    reason="promtool is not installed (apt-get install -y prometheus): the alert rules' "
    "unit tests (examples/alerts_test.yml) did not run",
)
def test_the_alert_rules_pass_their_promtool_unit_tests() -> None:
    """The latency alerts (p99 over the target, coverage low) fire on the series that should
    fire them and on no other (examples/alerts_test.yml: firing and not firing cases)."""
    for args in (["check", "rules", "alerts.yml"], ["test", "rules", "alerts_test.yml"]):
        out = subprocess.run(["promtool", *args], cwd=EXAMPLES, capture_output=True, timeout=60)
        assert out.returncode == 0, out.stdout.decode() + out.stderr.decode()
        assert b"SUCCESS" in out.stdout, out


def test_every_family_can_be_emitted() -> None:
    """With traffic and host samples, nothing the collector declares stays silent."""
    from uwsgitune.exporter.metrics import FRAME_GAUGES

    names = emitted()
    assert {f"uwsgitune_{n}" for n, _, _ in FRAME_GAUGES} <= names
