"""The real daemon in apply mode tunes a real uWSGI: the worker count grows under an
IO-bound load, the action is counted and audited, and no request fails."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.daemon.conftest import DaemonProc
from tests.daemon.helpers import scrape_until, value
from tests.support.tuned import live, manual
from tests.uwsgi_harness import url
from uwsgitune.launch import UwsgiProcess
from uwsgitune.loadgen import LoadResult, run_closed

pytestmark = pytest.mark.uwsgi

CONFIG = """
[daemon]
metrics_listen = "127.0.0.1:@PORT@"
state_dir = "{state}"

[[instance]]
name = "app"
stats = "{stats}"
fifo = "{fifo}"
override = "{override}"
mode = "apply"
min_workers = 1
max_workers = 6
interval = 0.5
"""


def apply_config(proc: UwsgiProcess, override: Path, state: Path) -> str:
    return CONFIG.format(stats=proc.stats, fifo=proc.fifo, override=override, state=state)


def test_daemon_applies_under_load(
    uwsgi: Callable[..., UwsgiProcess],
    start_daemon: Callable[..., DaemonProc],
    tmp_path: Path,
) -> None:
    override = tmp_path / "override.ini"
    proc = uwsgi(**manual(override, processes=6, initial=1))
    assert live(proc) == 1
    env = {"UWSGITUNE_LOCK_DIR": str(tmp_path / "locks")}
    d = start_daemon(config=apply_config(proc, override, tmp_path), env=env)
    result: list[LoadResult] = []
    load = threading.Thread(
        target=lambda: result.append(run_closed(url(proc, "/io/50"), 8, 25.0, 5000))
    )
    load.start()
    try:
        uri = f"unix://{proc.stats}"
        samples = scrape_until(
            d.port, lambda s: (value(s, "uwsgi_workers", stats_uri=uri) or 0) >= 3, timeout=25
        )
        sent = value(samples, "uwsgitune_actions_total", stats_uri=uri, kind="fifo", result="sent")
        assert sent is not None and sent >= 1
        why = samples.get("uwsgitune_tuner_desired_workers", [])
        assert why and why[0].labels["code"], "the tuner's decision is exported, with why"
    finally:
        load.join()
    assert live(proc) >= 3
    (r,) = result
    assert r.ok > 100 and r.errors == 0, r.error_kinds
    records = [json.loads(x) for x in (tmp_path / "app.audit.jsonl").read_text().splitlines()]
    ups = [x for x in records if x["event"] == "change" and x["action"] == "up"]
    assert ups and ups[0]["result"] == "sent" and ups[0]["after"] > ups[0]["before"]
    assert d.events("tuner_started") and d.events("action")
    assert not d.events("apply_not_wired") and "Traceback" not in d.log.read_text()
    # Decisions are logged when they change, not once per poll.
    assert len(d.events("tuner")) < len(records) * 4 + 10
