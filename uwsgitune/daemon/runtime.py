"""The daemon's lifecycle, after uvicorn's server: startup -> main loop -> shutdown.

Signal handlers only record the signal and wake the main loop; the main loop does the work:
SIGHUP re-reads the config (instances whose poll is unchanged keep their tracker, window and
findings; the metrics socket stays open; the web config is read again and its TLS context
built anew, so a rotated certificate, a new client CA or stricter TLS settings apply to the
next connection; a bad file, the config's or the web config's, is logged in one line and the
old config kept whole, never half-applied), SIGTERM/SIGINT end the loop.
Shutdown is bounded: a poll in flight runs in a daemon thread and is abandoned, but an
apply in flight (a reload or a restart waiting) is ended by its own thread, which audits it
and releases the lock; shutdown waits for that up to `STOP_WAIT_SECONDS` (below the unit's
TimeoutStopSec). An instance a SIGHUP removed or
replaced finishes its apply first; its lock keeps a new tuner for it observing until then.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
from collections.abc import Mapping
from pathlib import Path

from uwsgitune import __version__
from uwsgitune.actuate.lock import lock_dir, private_lock_dir
from uwsgitune.daemon import logs
from uwsgitune.daemon.config import DaemonConfig, DaemonSection, load_config
from uwsgitune.daemon.instance import STOP_WAIT_SECONDS, InstanceRunner, same_watch
from uwsgitune.daemon.logs import event
from uwsgitune.daemon.sdnotify import Notifier
from uwsgitune.errors import ConfigError, UwsgituneError
from uwsgitune.exporter.metrics import registry_for
from uwsgitune.exporter.server import MetricsServer, ip_loopback
from uwsgitune.exporter.site import Endpoint, EndpointSettings, build_site
from uwsgitune.pipeline.state import InstanceState, PollCounts

GRACE_SECONDS = 3.0
TICK_SECONDS = 5.0  # the main loop also wakes this often to check its instance tasks
RETIRED_WAIT_SECONDS = 3600.0  # a removed instance's apply runs to its own deadline


class StartupError(UwsgituneError):
    """The daemon could not start (e.g. the metrics address is taken): one line."""


def endpoint_settings(daemon: DaemonSection) -> EndpointSettings:
    """The exporter's settings from the `[daemon]` section: the exporter reads its own
    settings, never the daemon's config."""
    return EndpointSettings(
        telemetry_path=daemon.telemetry_path,
        web_config_file=daemon.web_config_file,
        probe_targets=daemon.probe_targets,
        scrape_timeout_offset=daemon.scrape_timeout_offset,
        collect_cores=daemon.collect_cores,
        uwsgi_metrics_max_series=daemon.uwsgi_metrics_max_series,
        latency_routes=daemon.latency_routes,
    )


class Daemon:
    def __init__(
        self,
        config: DaemonConfig,
        *,
        config_path: Path | None = None,
        notifier: Notifier | None = None,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.config = config
        self.config_path = config_path
        self.notifier = notifier or Notifier()
        self.env = dict(os.environ if env is None else env)
        self.runners: dict[str, InstanceRunner] = {}  # replaced, never mutated: scrapes read it
        self.server = MetricsServer(registry_for(self.snapshots))
        self.should_exit = False
        self.reload_requested = False
        self._wake = asyncio.Event()
        self._stopping: set[asyncio.Future[None]] = set()
        self._retired: set[InstanceRunner] = set()  # removed by a SIGHUP, maybe still applying

    def snapshots(self) -> list[InstanceState]:
        return [r.snapshot for r in self.runners.values()]

    def ready(self) -> bool:
        """`/-/ready`: every instance has been polled at least once."""
        return all((r.snapshot.counts or PollCounts()).polls > 0 for r in self.runners.values())

    def on_signal(self, signum: int) -> None:
        """Record only; the main loop acts."""
        if signum == signal.SIGHUP:
            self.reload_requested = True
        else:
            self.should_exit = True
        self._wake.set()

    async def serve(self) -> int:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            loop.add_signal_handler(sig, self.on_signal, sig)
        await self.startup()
        try:
            await self.main_loop()
        finally:
            await self.shutdown()
        return 0

    async def startup(self) -> None:
        try:
            self.server.handler, self.server.tls = build_site(
                endpoint_settings(self.config.daemon), self.snapshots, self.ready
            )
        except ConfigError as exc:
            raise StartupError(str(exc).replace("\n", "; ")) from None
        for listen in self.config.daemon.listens:
            try:
                await self.server.start(listen)
            except (OSError, ValueError) as exc:
                reason = getattr(exc, "strerror", None) or str(exc)
                await self.server.close()
                raise StartupError(f"cannot serve metrics on {listen}: {reason}") from None
        self._apply(self.config, first=True)
        metrics = ",".join(f"{h}:{p}" for h, p in self.server.addresses)
        if self.server.tls is None and not all(ip_loopback(h) for h, _ in self.server.addresses):
            event(
                "metrics_exposed",
                logging.WARNING,
                metrics=metrics,
                fix="TLS and basic auth: web_config_file (--web.config.file)",
            )
        private = private_lock_dir(os.environ, lock_dir())
        if private and any(r.spec.mode == "apply" for r in self.runners.values()):
            event(
                "lock_private",
                logging.WARNING,
                lock_dir=private,
                fix="add RuntimeDirectory=uwsgitune and RuntimeDirectoryPreserve=yes to the "
                "unit (as systemd/uwsgitune.service does)",
            )
        event(
            "started",
            version=__version__,
            pid=os.getpid(),
            metrics=metrics,
            tls=self.server.tls is not None,
            instances=len(self.runners),
            config=self.config_path,
        )
        self.notifier.ready(self._status())

    def _status(self) -> str:
        host, port = self.server.address
        return f"watching {len(self.runners)} instance(s); metrics on http://{host}:{port}/metrics"

    async def main_loop(self) -> None:
        tick = min(self.notifier.watchdog or TICK_SECONDS, TICK_SECONDS)
        while not self.should_exit:
            if self.notifier.watchdog:
                self.notifier.ping()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._wake.wait(), tick)
            self._wake.clear()
            if self.reload_requested and not self.should_exit:
                self.reload_requested = False
                self.reload()
            self._restart_crashed()

    def _restart_crashed(self) -> None:
        """An instance's poll thread only ends by a bug: log it and poll that instance again."""
        for name, runner in self.runners.items():
            if not runner.alive and not runner.stopping:
                error = runner.driver.crashed or "its poll thread ended"
                event("instance_failed", logging.ERROR, instance=name, error=error)
                runner.restart()

    def reload(self) -> None:
        if self.config_path is None:
            event("reload_skipped", reason="started from flags: there is no file to re-read")
            return
        self.notifier.reloading()
        try:
            new = load_config(self.config_path, self.env)
            site = build_site(endpoint_settings(new.daemon), self.snapshots, self.ready)
        except ConfigError as exc:
            error = str(exc).replace("\n", "; ")
            event("reload_failed", logging.ERROR, error=error, kept="the running config")
        else:
            self._apply(new, site)
            event("reloaded", config=self.config_path, instances=len(self.runners))
        self.notifier.ready(self._status())

    def _apply(self, new: DaemonConfig, site: Endpoint | None = None, first: bool = False) -> None:
        old = self.config
        if (new.daemon.log_format, new.daemon.log_level) != (
            old.daemon.log_format,
            old.daemon.log_level,
        ):
            logs.setup(new.daemon.log_format, level=new.daemon.log_level)
        if site is not None:
            self._apply_web(site)
        if new.daemon.metrics_listen != old.daemon.metrics_listen:
            event(
                "metrics_listen_kept",
                logging.WARNING,
                listen=old.daemon.metrics_listen,
                reason="a new metrics_listen takes a restart",
            )
            new = new.model_copy(
                update={
                    "daemon": new.daemon.model_copy(
                        update={"metrics_listen": old.daemon.metrics_listen}
                    )
                }
            )
        runners: dict[str, InstanceRunner] = {}
        for spec in new.instance:
            runner = self.runners.get(spec.name)
            if runner is not None and same_watch(runner.spec, spec):
                if runner.spec != spec:
                    event("instance_changed", instance=spec.name, mode=spec.mode)
                runner.respec(spec)
            else:
                runner = InstanceRunner(spec, new.daemon.state_dir)
                runner.start()
                if not first:
                    event("instance_added", instance=spec.name, stats=spec.stats, mode=spec.mode)
            runners[spec.name] = runner
        for name, runner in self.runners.items():
            if runners.get(name) is not runner:
                self._retire(runner)
                event("instance_removed", instance=name)
        self.runners = runners
        self.config = new

    def _retire(self, runner: InstanceRunner) -> None:
        """Stop an instance a SIGHUP removed: an apply in flight runs to its end."""
        self._retired.add(runner)
        stop = asyncio.ensure_future(runner.stop(wait=RETIRED_WAIT_SECONDS, interrupt=False))
        self._stopping.add(stop)
        stop.add_done_callback(self._stopping.discard)
        stop.add_done_callback(lambda _f: self._retired.discard(runner))

    def _apply_web(self, site: Endpoint) -> None:
        """Routes, auth, probe list, export options and the TLS context (a rotated
        certificate, a new CA, client_auth_type, min/max_version) apply now, to the
        connections accepted from here on; turning TLS on or off takes a restart."""
        handler, tls = site
        if (tls is None) != (self.server.tls is None):
            event("web_tls_kept", logging.WARNING, reason="turning TLS on or off takes a restart")
        else:
            self.server.tls = tls
        self.server.handler = handler

    async def shutdown(self) -> None:
        self.notifier.stopping()
        event("stopping", instances=len(self.runners))
        runners, self.runners = list(self.runners.values()), {}
        for runner in self._retired:  # an apply a SIGHUP let run: now it must end too
            runner.halt()
        stops: list[asyncio.Future[None]] = [asyncio.ensure_future(r.stop()) for r in runners]
        stops += [asyncio.ensure_future(self.server.close()), *self._stopping]
        _done, pending = await asyncio.wait(stops, timeout=GRACE_SECONDS + STOP_WAIT_SECONDS)
        for task in pending:
            task.cancel()
        event("stopped")
