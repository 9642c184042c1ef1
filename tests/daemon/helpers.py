"""Shared by the daemon tests: scrape with a real HTTP client, parse with prometheus_client."""

from __future__ import annotations

import http.client
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

T = TypeVar("T")
EXPORTER_NAMES = frozenset(
    (Path(__file__).resolve().parent.parent / "data" / "uwsgi_exporter-metric-names.txt")
    .read_text()
    .split()
)


def http_get(port: int, path: str = "/metrics", method: str = "GET") -> tuple[int, bytes, str]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        conn.request(method, path)
        resp = conn.getresponse()
        return resp.status, resp.read(), resp.getheader("Content-Type") or ""
    finally:
        conn.close()


def parse(text: str) -> dict[str, list[Sample]]:
    """Samples by sample name (`uwsgi_worker_requests_total`, `..._count`)."""
    out: dict[str, list[Sample]] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out.setdefault(s.name, []).append(s)
    return out


def types(text: str) -> dict[str, str]:
    """Family type by the names Prometheus stores (counters get their `_total` back)."""
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[s.name] = family.type
    return out


def scrape(port: int) -> dict[str, list[Sample]]:
    status, body, _ = http_get(port)
    assert status == 200, body
    return parse(body.decode())


def value(samples: dict[str, list[Sample]], name: str, /, **labels: str) -> float | None:
    for s in samples.get(name, []):
        if all(s.labels.get(k) == v for k, v in labels.items()):
            return float(s.value)
    return None


def wait_for(fn: Callable[[], T | None], timeout: float = 10.0, step: float = 0.1) -> T:
    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while time.monotonic() < deadline:
        try:
            got = fn()
            if got:
                return got
        except (OSError, AssertionError) as exc:
            last = exc
        time.sleep(step)
    raise AssertionError(f"timed out after {timeout}s (last error: {last!r})")


def scrape_until(
    port: int, pred: Callable[[dict[str, list[Sample]]], bool], timeout: float = 10.0
) -> dict[str, list[Sample]]:
    """Scrape until `pred(samples)` holds; return those samples."""

    def once() -> dict[str, list[Sample]] | None:
        samples = scrape(port)
        return samples if pred(samples) else None

    return wait_for(once, timeout)
