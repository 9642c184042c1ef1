"""A Prometheus server's HTTP API, read with httpx: range queries, series and label names.

Theory of operation
-------------------
httpx does the HTTP (connection reuse, TLS, basic auth, timeouts); this module says what to
ask and what an answer means. Every call is a POST with form parameters (a batch's
selector is a long regular expression, past what a URL may hold) to `/api/v1/...`, and its
body is read up to `max_bytes`, then decoded in one pass by msgspec into frozen structs.
Answers are asked uncompressed (`Accept-Encoding: identity`): gzip costs Prometheus about
nine times the CPU of the query itself; `gzip` asks for it where the link is the bottleneck.

A range query is paged: at most `PAGE_STEPS` steps a request (Prometheus refuses more than
11,000 points a series), so a long range at a fine step is several requests whose answers
are handed on page by page, never held whole.

Every failure is one `PrometheusError` line that names the URL and the fix: no answer
(down, refused, DNS), no answer in time (`--prometheus-timeout`), TLS refused, 401/403
(the credentials), 4xx with Prometheus's own `error` (the query: usually the selector),
5xx, an answer that is not Prometheus's JSON, one larger than `max_bytes`, and any
`warnings` (a partial answer, e.g. from a federated or remote-read store: never shown as
whole). The credentials are never in a message.
"""

from __future__ import annotations

import ssl
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import msgspec

from uwsgitune.core.units import size
from uwsgitune.errors import UwsgituneError

PAGE_STEPS = 10_000  # below Prometheus's 11,000 points per series
MIB = 1024 * 1024


class PrometheusError(UwsgituneError):
    """Prometheus could not be read, or refused what was asked; `code` 3 when it could not
    be read (down, slow, 5xx), 2 when the question was wrong (the selector, credentials)."""

    def __init__(self, message: str, code: int = 3) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class PromOptions:
    """How to reach the server: the options of Prometheus's own `http_config`."""

    url: str
    timeout: float = 30.0
    user: str | None = None
    password_file: Path | None = None
    ca_file: Path | None = None
    cert_file: Path | None = None
    key_file: Path | None = None
    insecure_skip_verify: bool = False
    max_bytes: int = 512 * MIB
    # ask for gzip-compressed answers: a fifth of the bytes, at about nine times
    # Prometheus's CPU for a range query (measured on 2.42): worth it on a slow link only
    gzip: bool = False


class _Series(msgspec.Struct, frozen=True):
    metric: dict[str, str]
    values: list[tuple[float, float]] = []
    value: tuple[float, float] | None = None


class _Matrix(msgspec.Struct, frozen=True):
    resultType: str
    result: list[_Series]


class _TextSeries(msgspec.Struct, frozen=True):
    metric: dict[str, str]
    values: list[tuple[float, str]] = []
    value: tuple[float, str] | None = None


class _TextMatrix(msgspec.Struct, frozen=True):
    resultType: str
    result: list[_TextSeries]


class _Answer(msgspec.Struct, frozen=True):
    status: str
    data: msgspec.Raw = msgspec.Raw(b"null")
    errorType: str = ""
    error: str = ""
    warnings: list[str] = []


_ANSWER = msgspec.json.Decoder(_Answer)
# Prometheus writes a sample's value as a string: the lax decoder reads "0.25" as a float in
# its one pass (a quarter of the time of decoding strings, then float() each). It refuses
# "NaN" and "+Inf" (Go's spelling): such an answer is decoded again as strings.
_MATRIX = msgspec.json.Decoder(_Matrix, strict=False)
_TEXT_MATRIX = msgspec.json.Decoder(_TextMatrix)
_LABEL_SETS = msgspec.json.Decoder(list[dict[str, str]])
_NAMES = msgspec.json.Decoder(list[str])


@dataclass(frozen=True)
class PromSeries:
    """One answer series: its labels and its points `(unix time, value)`."""

    labels: dict[str, str]
    points: list[tuple[float, float]]


def _password(opts: PromOptions) -> str:
    path = opts.password_file
    if path is None:
        return ""
    try:
        return path.read_text(encoding="utf-8").rstrip("\r\n")
    except (OSError, UnicodeDecodeError) as exc:
        why = getattr(exc, "strerror", None) or "not UTF-8"
        raise PrometheusError(
            f"{path}: cannot read the password file ({why}); check --prometheus-password-file", 2
        ) from None


def _tls(opts: PromOptions) -> ssl.SSLContext | bool:
    if not (opts.ca_file or opts.cert_file or opts.insecure_skip_verify):
        return True
    try:
        ctx = ssl.create_default_context(cafile=str(opts.ca_file) if opts.ca_file else None)
        if opts.cert_file:
            ctx.load_cert_chain(str(opts.cert_file), str(opts.key_file) if opts.key_file else None)
    except (OSError, ssl.SSLError) as exc:
        raise PrometheusError(
            f"cannot load the TLS files ({exc}); check --prometheus-ca-file, "
            "--prometheus-cert-file and --prometheus-key-file",
            2,
        ) from None
    if opts.insecure_skip_verify:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    return ctx


class PromClient:
    """One server. `transport`: an httpx transport to use instead of the network."""

    def __init__(self, opts: PromOptions, transport: httpx.BaseTransport | None = None) -> None:
        self.opts = opts
        self.url = opts.url.rstrip("/")
        if not self.url.startswith(("http://", "https://")):
            raise PrometheusError(
                f"{opts.url}: not an http(s) URL; e.g. --prometheus http://127.0.0.1:9090", 2
            )
        auth = httpx.BasicAuth(opts.user, _password(opts)) if opts.user is not None else None
        self._http = httpx.Client(
            auth=auth,
            verify=_tls(opts),
            timeout=httpx.Timeout(opts.timeout),
            transport=transport,
            follow_redirects=False,
            headers={"Accept-Encoding": "gzip" if opts.gzip else "identity"},
        )
        self.requests = 0  # how many calls: the bench reports it
        self.bytes = 0

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> PromClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # the calls --------------------------------------------------------------------------

    def query_range(
        self, query: str, start: float, end: float, step: float
    ) -> Iterator[PromSeries]:
        """The answer series of `query` from `start` to `end` (both on the grid), page by
        page (`PAGE_STEPS` steps each); a series spanning pages comes once per page."""
        first = start
        while first <= end + step / 2:
            last = min(end, first + (PAGE_STEPS - 1) * step)
            form = {"query": query, "start": _t(first), "end": _t(last), "step": _t(step)}
            matrix = _matrix(self._call("query_range", form), "query_range")
            for s in matrix.result:
                yield PromSeries(s.metric, s.values)
            first = last + step

    def instant(self, query: str, at: float) -> list[PromSeries]:
        data = self._call("query", {"query": query, "time": _t(at)})
        matrix = _matrix(data, "query")
        return [PromSeries(s.metric, [s.value] if s.value else []) for s in matrix.result]

    def series(self, match: str, start: float, end: float) -> list[dict[str, str]]:
        form = {"match[]": match, "start": _t(start), "end": _t(end)}
        sets: list[dict[str, str]] = _decode(_LABEL_SETS, self._call("series", form), "series")
        return sets

    def label_names(self, match: str, start: float, end: float) -> list[str]:
        form = {"match[]": match, "start": _t(start), "end": _t(end)}
        names: list[str] = _decode(_NAMES, self._call("labels", form), "labels")
        return names

    # one request ------------------------------------------------------------------------

    def _where(self, api: str) -> str:
        return f"{self.url}/api/v1/{api}"

    def _call(self, api: str, form: dict[str, str]) -> bytes:
        """The `data` of a successful answer; a `PrometheusError` for anything else."""
        where = self._where(api)
        try:
            with self._http.stream("POST", where, data=form) as resp:
                body = self._read(resp, where)
                status = resp.status_code
        except httpx.TimeoutException:
            raise PrometheusError(
                f"{where}: no answer within {self.opts.timeout:g} s; raise "
                "--prometheus-timeout, or narrow --range or --selector"
            ) from None
        except httpx.ConnectError as exc:
            if "CERTIFICATE_VERIFY_FAILED" in str(exc):
                raise PrometheusError(
                    f"{where}: TLS: the server's certificate is not trusted ({_why(exc)}); "
                    "give its CA with --prometheus-ca-file",
                    2,
                ) from None
            raise PrometheusError(
                f"{where}: cannot connect ({_why(exc)}); is Prometheus running there? "
                "check --prometheus"
            ) from None
        except httpx.HTTPError as exc:
            raise PrometheusError(f"{where}: {type(exc).__name__} ({_why(exc)}); retry") from None
        self.requests += 1
        self.bytes += len(body)
        return _answer(where, status, body)

    def _read(self, resp: httpx.Response, where: str) -> bytes:
        chunks, got, cap = [], 0, self.opts.max_bytes
        for chunk in resp.iter_bytes():
            got += len(chunk)
            if got > cap:
                raise PrometheusError(
                    f"{where}: the answer is larger than {size(cap)} (too many series); "
                    "narrow --selector or --range, or raise --prometheus-max-mib",
                    2,
                )
            chunks.append(chunk)
        return b"".join(chunks)


def _t(x: float) -> str:
    return f"{x:.3f}"


def _why(exc: Exception) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0][:200]


def _answer(where: str, status: int, body: bytes) -> bytes:
    try:
        ans = _ANSWER.decode(body)
    except msgspec.DecodeError:
        ans = None
    if status in (401, 403):
        raise PrometheusError(
            f"{where}: HTTP {status}, the server refused the credentials; check "
            "--prometheus-user and --prometheus-password-file",
            2,
        )
    if ans is None:
        raise PrometheusError(
            f"{where}: HTTP {status} with an answer that is not Prometheus's JSON; "
            "is --prometheus a Prometheus server (its base URL, without /api/v1)?"
        )
    if ans.status != "success":
        what = f"{ans.errorType}: {ans.error}".strip(": ")[:300]
        if 400 <= status < 500:
            raise PrometheusError(
                f"{where}: Prometheus refused the query (HTTP {status}, {what}); check --selector",
                2,
            )
        raise PrometheusError(f"{where}: Prometheus failed (HTTP {status}, {what}); retry later")
    if status >= 300:
        raise PrometheusError(f"{where}: HTTP {status}; check --prometheus")
    if ans.warnings:
        raise PrometheusError(
            f"{where}: Prometheus answered with a warning, a partial answer "
            f"({ans.warnings[0][:200]}); fix the store it names, or narrow --range"
        )
    return bytes(ans.data)


def _decode(decoder: msgspec.json.Decoder[Any], data: bytes, api: str) -> Any:
    try:
        return decoder.decode(data)
    except msgspec.DecodeError as exc:
        raise PrometheusError(
            f"/api/v1/{api}: an answer Prometheus's API does not give ({exc}); check --prometheus"
        ) from None


def _matrix(data: bytes, api: str) -> _Matrix:
    """A matrix (or vector) answer with its values as floats."""
    try:
        got: _Matrix = _MATRIX.decode(data)
        return got
    except msgspec.DecodeError:
        text: _TextMatrix = _decode(_TEXT_MATRIX, data, api)  # "NaN", "+Inf", or not JSON
    try:
        return _Matrix(
            text.resultType,
            [
                _Series(
                    s.metric,
                    [(t, float(v)) for t, v in s.values],
                    None if s.value is None else (s.value[0], float(s.value[1])),
                )
                for s in text.result
            ],
        )
    except ValueError as exc:
        raise PrometheusError(
            f"/api/v1/{api}: a sample value Prometheus's API does not give ({exc}); "
            "check --prometheus"
        ) from None
