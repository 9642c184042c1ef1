"""The daemon's endpoint: what it serves, as uwsgi_exporter (and exporter-toolkit) serve it,
built from the exporter's own settings (`EndpointSettings`, which the daemon fills from its
`[daemon]` section) and the web config they name.

- `/` a landing page linking to the metrics (unless the metrics are at `/`);
- the telemetry path (`/metrics`): every instance's latest snapshot, gzip when asked;
- `/probe?target=URI`: one read of an allow-listed instance (`probe.py`), shared by the
  probes of that target that arrive while it runs; 404 when off; 503 past
  `PROBES_AT_ONCE` targets being read;
- `/-/healthy` (the process answers) and `/-/ready` (every instance polled at least once);
- anything else 404, methods other than GET and HEAD 405.

Basic auth (web config) guards everything but the two health paths, which say nothing about
uWSGI and which kubelet probes must reach without credentials; TLS guards all of them. A
password check waits its turn in `auth.Checker`'s bounded queue (one bcrypt at a time): a
wrong password is a 401, a check the queue has no room for a 503 with `Retry-After`, and
either closes the connection. Both come `fail_delay` (1 s) late, the connection giving way
meanwhile like an idle one, so that a guesser waiting for answers cannot make the event loop
answer thousands a second. A request that passes marks its connection authenticated
(`admission.Conn.authenticated`), which keeps room for its peer in the connection caps.
Every site of the process checks passwords through one `auth.Checker` (`checker()`), so a
SIGHUP's new site and the old one still run one bcrypt at a time, and remembered verdicts
outlive the reload (their keys carry the hash).
`X-Prometheus-Scrape-Timeout-Seconds` minus `timeout_offset` bounds the work of a scrape:
past it the answer is a 503 rather than one Prometheus has stopped waiting for.

The site's own metrics follow the exposition, rendered at each scrape (the rest is
rendered once per poll): the Go exporter's process also exports
`promhttp_metric_handler_requests_total{code}`, `promhttp_metric_handler_requests_in_flight`
and `process_virtual_memory_max_bytes` (beside the `process_*` that prometheus_client
gives); `handler_text` adds them, so a dashboard panel on any of them keeps its data. Go's
runtime `go_*` have no equivalent.
"""

from __future__ import annotations

import asyncio
import gzip
import html
import resource
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4
from prometheus_client.utils import floatToGoString

from uwsgitune import __version__
from uwsgitune.exporter.admission import CURRENT, Conn
from uwsgitune.exporter.auth import BasicAuth, Checker
from uwsgitune.exporter.exposition import Encoded, InFlight, PollExposition
from uwsgitune.exporter.metrics import ExportOptions, StateSource, polled_registry
from uwsgitune.exporter.probe import PROBES_AT_ONCE, AllowList, probe_text
from uwsgitune.exporter.server import Request, Response, text
from uwsgitune.exporter.webconfig import WebConfig, load_web_config

DEFAULT_TIMEOUT = 120.0  # uwsgi_exporter's, when Prometheus sends no header
HEALTH = ("/-/healthy", "/-/ready")
RETRY = ("Retry-After", "5")
FAIL_DELAY = 1.0  # seconds before a refused login's answer (401, or 503: no room to check)


@dataclass(frozen=True)
class SiteConfig:
    """What one site serves: its settings, and the web config's headers."""

    telemetry_path: str = "/metrics"
    probe_targets: tuple[str, ...] = ()
    timeout_offset: float = 0.25
    fail_delay: float = FAIL_DELAY
    headers: dict[str, str] = field(default_factory=dict)
    options: ExportOptions = field(default_factory=ExportOptions)


class HandlerStats:
    """Requests to the telemetry path, by status code; touched on the event loop only."""

    def __init__(self) -> None:
        self.codes: dict[int, int] = {}
        self.in_flight = 0


_HANDLER_HEAD = (
    "# HELP promhttp_metric_handler_requests_total Total number of scrapes by HTTP status code.\n"
    "# TYPE promhttp_metric_handler_requests_total counter\n"
)
_IN_FLIGHT_HEAD = (
    "# HELP promhttp_metric_handler_requests_in_flight Current number of scrapes being served.\n"
    "# TYPE promhttp_metric_handler_requests_in_flight gauge\n"
)
_VM_MAX_HEAD = (
    "# HELP process_virtual_memory_max_bytes Maximum amount of virtual memory available in bytes.\n"
    "# TYPE process_virtual_memory_max_bytes gauge\n"
)


def handler_text(stats: HandlerStats) -> bytes:
    """The scrape's own part, rendered at each scrape (the rest is rendered once per poll):
    `promhttp_metric_handler_requests_total{code}` (200, 500 and 503 always, as promhttp
    pre-creates them), `..._in_flight` and `process_virtual_memory_max_bytes`, in the text
    format, as rendering them through prometheus_client gives (tested against it). By
    hand: it is most of what a scrape renders, and the scrape's latency is the point."""
    codes = stats.codes
    lines = [_HANDLER_HEAD]
    for code in (200, 500, 503, *sorted(set(codes) - {200, 500, 503})):
        value = floatToGoString(float(codes.get(code, 0)))  # type: ignore[no-untyped-call]
        lines.append(f'promhttp_metric_handler_requests_total{{code="{code}"}} {value}\n')
    in_flight = floatToGoString(float(stats.in_flight))  # type: ignore[no-untyped-call]
    lines.append(f"{_IN_FLIGHT_HEAD}promhttp_metric_handler_requests_in_flight {in_flight}\n")
    limit = resource.getrlimit(resource.RLIMIT_AS)[0]
    vm_max = floatToGoString(float(2**64 - 1 if limit == resource.RLIM_INFINITY else limit))  # type: ignore[no-untyped-call]
    lines.append(f"{_VM_MAX_HEAD}process_virtual_memory_max_bytes {vm_max}\n")
    return "".join(lines).encode()


def deadline(request: Request, offset: float) -> float:
    """Seconds this request may take. Raises ValueError on a bad header."""
    value = request.header("X-Prometheus-Scrape-Timeout-Seconds")
    seconds = DEFAULT_TIMEOUT
    if value:
        seconds = float(value)
        if not 0 < seconds < 86400:
            raise ValueError(value)
    return seconds - offset if offset < seconds else seconds


def wants_gzip(request: Request) -> bool:
    accept = request.header("Accept-Encoding") or ""
    return "gzip" in {part.split(";")[0].strip() for part in accept.split(",")}


def _encoding(request: Request) -> tuple[tuple[str, str], ...]:
    return (("Content-Encoding", "gzip"),) if wants_gzip(request) else ()


Render = Callable[[bool], Encoded]  # gzip or not -> the body as (shared part, own tail)
Kept = Callable[[bool], Encoded | None]  # the same, None if it is not ready without a render


def _gzip(body: bytes) -> bytes:
    return gzip.compress(body, compresslevel=1, mtime=0)


def each_time(render: Callable[[], bytes]) -> Render:
    """A `Render` that renders the whole text at every call (the probe), compressed here."""

    def encoded(gzipped: bool) -> Encoded:
        body = render()
        return (_gzip(body) if gzipped else body), b""

    return encoded


class Site:
    def __init__(
        self,
        render: Render,
        *,
        config: SiteConfig | None = None,
        auth: BasicAuth | None = None,
        ready: Callable[[], bool] = lambda: True,
        stats: HandlerStats | None = None,
        kept: Kept | None = None,
    ) -> None:
        self.render = render
        self.kept = kept
        self.stats = stats or HandlerStats()
        self.config = config or SiteConfig()
        self.auth = auth or BasicAuth({})
        self.ready = ready
        self.allow = AllowList(self.config.probe_targets)
        self._renders: InFlight[Encoded] = InFlight()
        self._probes: InFlight[bytes] = InFlight()  # by target: one read each at a time

    async def __call__(self, request: Request) -> Response:
        answer = await self._route(request)
        if self.config.headers:
            extra = tuple(self.config.headers.items())
            headers = answer.headers + extra
            answer = Response(answer.status, answer.body, answer.content_type, headers, answer.tail)
        return answer

    async def _route(self, request: Request) -> Response:
        if request.method not in ("GET", "HEAD"):
            return text(405, "method not allowed", ("Allow", "GET, HEAD"))
        path = request.path
        if path not in HEALTH and self.auth.enabled:
            denied = await self._authorize(request)
            if denied is not None:
                return denied
        if path == self.config.telemetry_path:
            return await self._counted(request)
        if path == "/probe":
            return await self._probe(request)
        if path == "/-/healthy":
            return text(200, "ok")
        if path == "/-/ready":
            return text(200, "ready") if self.ready() else text(503, "not ready: first polls")
        if path == "/":
            return self._landing()
        return text(404, f"not found; metrics are at {self.config.telemetry_path}")

    async def _authorize(self, request: Request) -> Response | None:
        """None when the request's credentials pass, else the answer (401, or 503 when the
        password checks' queue has no room for its check)."""
        conn = CURRENT.get()
        peer = conn.key if conn is not None else ""
        ok = await self.auth.authorize(request.header("Authorization"), peer, conn)
        if ok:
            if conn is not None:
                conn.authenticated()
            return None
        await self._fail_delay(conn)
        if ok is None:
            return text(503, "too many password checks waiting; retry later", RETRY)
        return text(401, "unauthorized", ("WWW-Authenticate", 'Basic realm="uwsgitune"'))

    async def _fail_delay(self, conn: Conn | None) -> None:
        """A refused login is answered `fail_delay` later (as login(1) and sshd do): a
        client that waits for its answer, as a guesser does, tries about once a second per
        connection instead of thousands of times, which would cost the event loop a core.
        Meanwhile its connection gives way to a newcomer, as an idle one does."""
        if self.config.fail_delay <= 0:
            return
        if conn is not None:
            conn.idle = True
        await asyncio.sleep(self.config.fail_delay)
        if conn is not None:
            conn.idle = False

    async def _counted(self, request: Request) -> Response:
        """A metrics scrape, counted as promhttp counts it (after it is answered)."""
        self.stats.in_flight += 1
        try:
            ready = self.kept(wants_gzip(request)) if self.kept is not None else None
            if ready is not None:  # this poll's, rendered already: served from the event loop
                body, tail = ready
                answer = Response(200, body, CONTENT_TYPE_PLAIN_0_0_4, _encoding(request), tail)
            else:
                answer = await self._scrape(request, self._rendered)
        finally:
            self.stats.in_flight -= 1
        codes = self.stats.codes
        codes[answer.status] = codes.get(answer.status, 0) + 1
        return answer

    def _rendered(self, gzipped: bool) -> Awaitable[Encoded]:
        """The telemetry path's body: scrapes that arrive while one render (of the same
        encoding) runs share its body (`exposition.InFlight`)."""
        return self._renders.run(gzipped, lambda: self.render(gzipped))

    async def _scrape(
        self, request: Request, run: Callable[[bool], Awaitable[Encoded]]
    ) -> Response:
        """`run(gzipped)`'s body within the scrape's deadline."""
        try:
            seconds = deadline(request, self.config.timeout_offset)
        except ValueError:
            return text(400, "X-Prometheus-Scrape-Timeout-Seconds: not a number of seconds")
        gzipped = wants_gzip(request)
        try:
            body, tail = await asyncio.wait_for(run(gzipped), seconds)
        except asyncio.TimeoutError:
            return text(503, f"scrape took longer than its {seconds:g} s deadline")
        return Response(200, body, CONTENT_TYPE_PLAIN_0_0_4, _encoding(request), tail)

    async def _probe(self, request: Request) -> Response:
        if not self.allow.enabled:
            return text(404, "/probe is off; list the allowed targets in probe_targets")
        target = request.param("target")
        if not target:
            return text(400, "target is required: /probe?target=URI")
        addr = self.allow.find(target)
        if addr is None:
            return text(403, f"target {target!r} is not in probe_targets (the allow-list)")
        if addr.uri not in self._probes and len(self._probes) >= PROBES_AT_ONCE:
            busy = f"{PROBES_AT_ONCE} probe targets are being read; retry later"
            return text(503, busy, ("Retry-After", "5"))
        try:
            seconds = deadline(request, self.config.timeout_offset)
        except ValueError:
            return text(400, "X-Prometheus-Scrape-Timeout-Seconds: not a number of seconds")
        read_timeout = max(0.05, min(seconds, 10.0) * 0.9)
        options = self.config.options

        def read() -> bytes:
            return probe_text(addr, read_timeout, options)

        async def shared(gzipped: bool) -> Encoded:
            """The read of `addr` running, or a new one; compressed for this probe alone."""
            body = await self._probes.run(addr.uri, read)
            return (await asyncio.to_thread(_gzip, body) if gzipped else body), b""

        return await self._scrape(request, shared)

    def _landing(self) -> Response:
        path = html.escape(self.config.telemetry_path, quote=True)
        probe = '<li><a href="/probe">/probe?target=URI</a></li>' if self.allow.enabled else ""
        page = (
            "<!DOCTYPE html><html><head><title>uwsgitune</title></head><body>"
            f"<h1>uwsgitune {__version__}</h1><p>uWSGI metrics, uwsgi_exporter-compatible.</p>"
            f'<ul><li><a href="{path}">Metrics</a></li>{probe}'
            '<li><a href="/-/healthy">/-/healthy</a></li><li><a href="/-/ready">/-/ready</a></li>'
            "</ul></body></html>\n"
        )
        return Response(200, page.encode(), "text/html; charset=utf-8")


@dataclass(frozen=True, kw_only=True)
class EndpointSettings:
    """The endpoint's settings, as the daemon's `[daemon]` section gives them (declared and
    validated there: `daemon/config.py`)."""

    telemetry_path: str
    web_config_file: Path | None
    probe_targets: tuple[str, ...]
    scrape_timeout_offset: float
    collect_cores: bool
    uwsgi_metrics_max_series: int
    latency_routes: bool = False


Endpoint = tuple[Site, ssl.SSLContext | None]  # what the settings build
_CHECKER: list[Checker] = []  # the process's one, made on first use


def checker() -> Checker:
    """The process's password checker (one bcrypt thread, its queue, the verdicts)."""
    if not _CHECKER:
        _CHECKER.append(Checker())
    return _CHECKER[0]


def build_site(
    settings: EndpointSettings, source: StateSource, ready: Callable[[], bool]
) -> Endpoint:
    """The site and its TLS context. Raises ConfigError (one line per problem) when the web
    config does not load."""
    path = settings.web_config_file
    web = WebConfig() if path is None else load_web_config(path)
    options = ExportOptions(
        settings.collect_cores, settings.uwsgi_metrics_max_series, settings.latency_routes
    )
    stats = HandlerStats()
    live = partial(handler_text, stats)
    exposition = PollExposition(source, polled_registry(process=True), options, live=live)
    config = SiteConfig(
        telemetry_path=settings.telemetry_path,
        probe_targets=settings.probe_targets,
        timeout_offset=settings.scrape_timeout_offset,
        headers=web.headers,
        options=options,
    )
    auth = BasicAuth(web.users, checker())
    site = Site(
        exposition.encoded, config=config, auth=auth, ready=ready, stats=stats, kept=exposition.kept
    )
    return site, web.tls
