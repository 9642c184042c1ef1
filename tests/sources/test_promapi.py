"""The Prometheus API client (sources/promapi.py) against a real HTTP server on loopback that
answers as a broken Prometheus would: each failure is one line naming the URL and the fix,
with its exit code; a long range is paged; a partial answer (warnings) is refused."""

from __future__ import annotations

import math
import ssl
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.exporter.conftest import Certs
from tests.support.fakeprom import Answer, answering, matrix
from uwsgitune.launch import free_port
from uwsgitune.sources.promapi import PAGE_STEPS, PromClient, PrometheusError, PromOptions

Server = Callable[[Answer], tuple[str, list[dict[str, str]]]]


@pytest.fixture
def server() -> Iterator[Server]:
    with answering() as start:
        yield start


def _error(where: str, **opts: object) -> PrometheusError:
    with pytest.raises(PrometheusError) as info, PromClient(PromOptions(where, **opts)) as c:  # type: ignore[arg-type]
        list(c.query_range("uwsgi_up", 0.0, 600.0, 60.0))
    err = info.value
    assert "\n" not in str(err)
    return err


def test_a_prometheus_that_is_down_names_the_url_and_the_flag() -> None:
    where = f"http://127.0.0.1:{free_port()}"
    err = _error(where)
    assert str(err).startswith(f"{where}/api/v1/query_range: cannot connect")
    assert "--prometheus" in str(err) and err.code == 3


def test_a_slow_prometheus_is_a_timeout_naming_the_flag(
    server: Server,
) -> None:
    def slow(form: dict[str, str]) -> tuple[int, bytes]:
        time.sleep(1.5)
        return 200, matrix([])

    where, _ = server(slow)
    err = _error(where, timeout=0.3)
    assert "no answer within 0.3 s" in str(err) and "--prometheus-timeout" in str(err)


@pytest.mark.parametrize(
    ("status", "body", "words", "code"),
    [
        (
            400,
            b'{"status":"error","errorType":"bad_data","error":"parse error at char 5"}',
            ("refused the query", "bad_data: parse error", "--selector"),
            2,
        ),
        (
            503,
            b'{"status":"error","errorType":"unavailable","error":"TSDB not ready"}',
            ("failed (HTTP 503", "retry later"),
            3,
        ),
        (401, b"Unauthorized\n", ("refused the credentials", "--prometheus-user"), 2),
        (200, b"<html>grafana</html>", ("not Prometheus's JSON", "base URL"), 3),
        (
            200,
            matrix([], warnings=["remote read of store eu-1 failed"]),
            ("partial answer", "store eu-1"),
            3,
        ),
    ],
)
def test_each_bad_answer_is_one_line_with_its_fix(
    server: Server,
    status: int,
    body: bytes,
    words: tuple[str, ...],
    code: int,
) -> None:
    where, _ = server(lambda form: (status, body))
    err = _error(where)
    assert str(err).startswith(f"{where}/api/v1/query_range: ")
    for word in words:
        assert word in str(err)
    assert err.code == code


def test_an_answer_past_the_size_cap_is_refused(
    server: Server,
) -> None:
    series = [{"metric": {"i": str(i)}, "values": [[0, "1"]] * 50} for i in range(2000)]
    where, _ = server(lambda form: (200, matrix(series)))
    err = _error(where, max_bytes=100_000)
    assert "larger than 97.7 KiB" in str(err)
    assert "narrow --selector" in str(err) and err.code == 2


def test_a_long_range_is_paged_below_prometheus_point_limit(
    server: Server,
) -> None:
    def answer(form: dict[str, str]) -> tuple[int, bytes]:
        start, end, step = (float(form[k]) for k in ("start", "end", "step"))
        n = round((end - start) / step) + 1
        values = [[start + i * step, "1"] for i in range(n)]
        return 200, matrix([{"metric": {"job": "a"}, "values": values}])

    where, seen = server(answer)
    steps = 2 * PAGE_STEPS + 500
    with PromClient(PromOptions(where)) as c:
        pages = list(c.query_range("uwsgi_up", 0.0, (steps - 1) * 1.0, 1.0))
    assert len(seen) == 3 and len(pages) == 3
    assert sum(len(p.points) for p in pages) == steps  # every step once, none twice
    for form in seen:
        n = round((float(form["end"]) - float(form["start"])) / float(form["step"])) + 1
        assert n <= PAGE_STEPS


def test_basic_auth_is_sent_from_the_password_file(server: Server, tmp_path: Path) -> None:
    secret = tmp_path / "password"
    secret.write_text("s3cret\n")
    where, seen = server(lambda form: (200, matrix([])))
    opts = PromOptions(where, user="reader", password_file=secret)
    with PromClient(opts) as c:
        assert list(c.query_range("uwsgi_up", 0.0, 60.0, 60.0)) == []
    assert seen[0]["_auth"] == "Basic cmVhZGVyOnMzY3JldA=="  # reader:s3cret
    missing = PromOptions(where, user="reader", password_file=tmp_path / "nope")
    with pytest.raises(PrometheusError, match="--prometheus-password-file"):
        PromClient(missing)


def test_tls_is_verified_against_the_ca_given_and_refused_without_it(certs: Certs) -> None:
    server_tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_tls.load_cert_chain(str(certs.server_crt), str(certs.server_key))
    with answering(server_tls) as start:
        where, _ = start(lambda form: (200, matrix([])))
        with PromClient(PromOptions(where, ca_file=certs.ca)) as c:
            assert list(c.query_range("uwsgi_up", 0.0, 60.0, 60.0)) == []
        err = _error(where)
    assert "TLS: the server's certificate is not trusted" in str(err)
    assert "--prometheus-ca-file" in str(err) and err.code == 2


def test_values_are_floats_go_spellings_included_and_a_bad_one_is_one_line(
    server: Server,
) -> None:
    """Values are read as floats in one pass; "NaN" and "+Inf", which that pass refuses,
    are read too, and a value that is no number is one line, not a traceback."""
    values: list[list[object]] = [[0, "0.25"], [60, "2e3"]]

    def answer(form: dict[str, str]) -> tuple[int, bytes]:
        return 200, matrix([{"metric": {"job": "a"}, "values": values}])

    where, _ = server(answer)
    with PromClient(PromOptions(where)) as c:
        (first,) = [p.points for p in c.query_range("x", 0.0, 60.0, 60.0)]
        assert first == [(0.0, 0.25), (60.0, 2000.0)]
        values[1][1] = "NaN"
        values.append([120, "+Inf"])
        (got,) = [p.points for p in c.query_range("x", 0.0, 120.0, 60.0)]
        assert got[0] == (0.0, 0.25) and got[1][1] != got[1][1] and got[2] == (120.0, math.inf)
        values[0][1] = "many"
        with pytest.raises(PrometheusError, match="a sample value Prometheus's API does not"):
            list(c.query_range("x", 0.0, 120.0, 60.0))


def test_answers_are_asked_uncompressed_unless_gzip_is_asked_for(server: Server) -> None:
    """gzip costs Prometheus about nine times the query's CPU: only on request."""

    def answer(form: dict[str, str]) -> tuple[int, bytes]:
        return 200, matrix([])

    where, seen = server(answer)
    for gzip in (False, True):
        with PromClient(PromOptions(where, gzip=gzip)) as c:
            list(c.query_range("x", 0.0, 60.0, 60.0))
    assert [f["_encoding"] for f in seen] == ["identity", "gzip"]
