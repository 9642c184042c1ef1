"""`--latency-routes` (daemon and `watch --metrics-listen`) and `latency_routes` in the
config: the per-route latency histograms are served only when asked for."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import cast

import pytest

from tests.daemon.helpers import http_get
from tests.exporter.test_collector import snapshot
from tests.support.latency import lognormal_view
from uwsgitune.cli.daemon import load
from uwsgitune.cli.main import build_parser, main
from uwsgitune.cli.watch import _serve_metrics
from uwsgitune.daemon.config import load_config
from uwsgitune.daemon.runtime import endpoint_settings
from uwsgitune.exporter.site import build_site
from uwsgitune.launch import free_port
from uwsgitune.pipeline import InstanceDriver

ROUTE = "uwsgi_request_route_duration_seconds"


def served(argv: list[str]) -> str:
    """The /metrics body the daemon configured by `argv` serves for an instance with a
    request log."""
    config = load(build_parser().parse_args(["daemon", "--stats=/run/a.sock", *argv]))
    state = replace(snapshot("processes.json", "processes.json"), latency=lognormal_view())
    site, _ = build_site(endpoint_settings(config.daemon), lambda: [state], lambda: True)
    kept, live = site.render(False)
    return (kept + live).decode()


def test_the_daemon_serves_routes_only_with_the_flag() -> None:
    plain = served([])
    assert "uwsgi_request_duration_seconds_count" in plain and ROUTE not in plain
    assert f'{ROUTE}_count{{route="/"' in served(["--latency-routes"])


def test_the_config_key(tmp_path: Path) -> None:
    path = tmp_path / "uwsgitune.toml"
    path.write_text(
        '[daemon]\nlatency_routes = true\n[[instance]]\nname = "a"\nstats = "/run/a.sock"\n'
    )
    assert load_config(path, {}).daemon.latency_routes is True
    assert endpoint_settings(load_config(path, {}).daemon).latency_routes is True
    path.write_text('[[instance]]\nname = "a"\nstats = "/run/a.sock"\n')
    assert load_config(path, {}).daemon.latency_routes is False


def test_watch_refuses_it_without_metrics(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["watch", "/x.sock", "--once", "--latency-routes"]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "--latency-routes" in line and "--metrics-listen" in line


def test_watch_serves_routes_only_with_the_flag() -> None:
    """`watch --metrics-listen` passes the flag to its exporter (`_serve_metrics`)."""
    state = replace(snapshot("processes.json", "processes.json"), latency=lognormal_view())
    driver = cast(InstanceDriver, SimpleNamespace(state=state))  # serve_drivers reads .state
    for routes in (False, True):
        port = free_port()
        server = _serve_metrics([driver], f"127.0.0.1:{port}", routes)
        try:
            status, body, _ = http_get(port)
        finally:
            server.stop()
        assert status == 200 and b"uwsgi_request_duration_seconds_count" in body
        assert (ROUTE.encode() in body) is routes
