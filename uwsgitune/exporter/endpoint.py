"""The daemon's endpoint from its `[daemon]` settings: the site (routes, auth, probe) and the
TLS context, both built from one checked web config. Every site of the process checks
passwords through one `auth.Checker`, so a SIGHUP's new site and the old one still run one
bcrypt at a time, and remembered verdicts outlive the reload (their keys carry the hash)."""

from __future__ import annotations

import ipaddress
import ssl
from collections.abc import Callable
from functools import partial

from uwsgitune.daemon.config import DaemonSection
from uwsgitune.exporter.auth import BasicAuth, Checker
from uwsgitune.exporter.collector import ExportOptions, StateSource, polled_registry
from uwsgitune.exporter.exposition import PollExposition
from uwsgitune.exporter.selfmetrics import HandlerStats, handler_text
from uwsgitune.exporter.site import Site, SiteConfig
from uwsgitune.exporter.webconfig import WebConfig, load_web_config

Endpoint = tuple[Site, ssl.SSLContext | None, PollExposition]  # what a web config builds
_CHECKER: list[Checker] = []  # the process's one, made on first use


def checker() -> Checker:
    """The process's password checker (one bcrypt thread, its queue, the verdicts)."""
    if not _CHECKER:
        _CHECKER.append(Checker())
    return _CHECKER[0]


def build_site(daemon: DaemonSection, source: StateSource, ready: Callable[[], bool]) -> Endpoint:
    """The site, its TLS context and what it serves at the telemetry path (whose `prepare`
    the poll threads call). Raises ConfigError (one line per problem) when the web config
    does not load."""
    web = WebConfig() if daemon.web_config_file is None else load_web_config(daemon.web_config_file)
    options = ExportOptions(daemon.collect_cores, daemon.uwsgi_metrics_max_series)
    stats = HandlerStats()
    live = partial(handler_text, stats)
    exposition = PollExposition(source, polled_registry(process=True), options, live=live)
    config = SiteConfig(
        telemetry_path=daemon.telemetry_path,
        probe_targets=daemon.probe_targets,
        timeout_offset=daemon.scrape_timeout_offset,
        headers=web.headers,
        options=options,
    )
    auth = BasicAuth(web.users, checker())
    site = Site(
        exposition.encoded, config=config, auth=auth, ready=ready, stats=stats, kept=exposition.kept
    )
    return site, web.tls, exposition


def ip_loopback(host: str) -> bool:
    """Whether a bound address is reachable from this host only."""
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return host == "localhost"
