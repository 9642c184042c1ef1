"""Exporter and daemon performance: scrape time, CPU and RSS of a daemon watching 4 instances.

    .venv/bin/python bench/exporter_bench.py                 # scrape + 3-minute soak
    .venv/bin/python bench/exporter_bench.py --soak 600      # the 10-minute soak
    .venv/bin/python bench/exporter_bench.py --soak 0        # scrape timings only

Targets (issue 6): a scrape of 64 workers < 10 ms; 4 instances at 1 s < 2% of a core; RSS
flat over the soak. The numbers go in the release notes, not in tests.
Side by side with the Go uwsgi_exporter on one instance: `bench/exporter_vs_go.py`
(results in `bench/results/exporter.md`).
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path

import psutil
from prometheus_client import generate_latest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.conftest import stats_fixture  # noqa: E402
from tests.uwsgi_harness import uwsgi_instance  # noqa: E402
from uwsgitune.core.derive import Tracker  # noqa: E402
from uwsgitune.core.model import parse_stats  # noqa: E402
from uwsgitune.core.samples import Poll  # noqa: E402
from uwsgitune.exporter.exposition import render  # noqa: E402
from uwsgitune.exporter.metrics import registry_for  # noqa: E402
from uwsgitune.exporter.server import MetricsServer  # noqa: E402
from uwsgitune.launch import free_port  # noqa: E402
from uwsgitune.pipeline import InstanceState  # noqa: E402


def timings(fn: Callable[[], object], n: int) -> tuple[float, float, float]:
    """(median, p99, max) in milliseconds."""
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t0) * 1000)
    out.sort()
    return statistics.median(out), out[int(len(out) * 0.99) - 1], out[-1]


def fixture_snapshot(name: str) -> InstanceState:
    tracker, frame = Tracker("unix:///x"), None
    for i in range(2):
        poll = Poll("unix:///x", 1000.0 + i, 10.0 + i, doc=parse_stats(stats_fixture(name)))
        frame = tracker.update(poll)
    return InstanceState("unix:///x", "app", "observe", frame, tracker.prev)


def http_scrape(port: int) -> bytes:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    conn.request("GET", "/metrics")
    body = conn.getresponse().read()
    conn.close()
    return body


async def _http_bench(snap: InstanceState, n: int) -> tuple[float, float, float, int]:
    server = MetricsServer(registry_for(lambda: [snap]))
    await server.start("127.0.0.1:0")
    port = server.address[1]
    size = len(await asyncio.to_thread(http_scrape, port))
    result = await asyncio.to_thread(timings, lambda: http_scrape(port), n)
    await server.close()
    return (*result, size)


def scrape_bench(n: int) -> None:
    for name in ("64-workers.json", "64-workers-2-threads-busy.json"):
        snap = fixture_snapshot(name)
        registry = registry_for(lambda s=snap: [s])  # type: ignore[misc]
        for label, fn in (
            ("generate_latest", generate_latest),
            ("exporter.exposition.render", render),
        ):
            med, p99, worst = timings(lambda r=registry, f=fn: f(r), n)  # type: ignore[misc]
            print(f"{label} {name}: median {med:.2f} ms, p99 {p99:.2f} ms, max {worst:.2f} ms")
        med, p99, worst, size = asyncio.run(_http_bench(snap, n))
        print(f"HTTP GET /metrics {name}: median {med:.2f} ms, p99 {p99:.2f} ms, "
              f"max {worst:.2f} ms, {size} bytes")  # fmt: skip


CONFIG = '[daemon]\nmetrics_listen = "127.0.0.1:{port}"\n' + "".join(
    f'\n[[instance]]\nname = "i{i}"\nstats = "{{s{i}}}"\ninterval = 1.0\n' for i in range(4)
)


def soak(seconds: float, scrape_every: float) -> None:
    with ExitStack() as stack:
        stats = [stack.enter_context(uwsgi_instance(processes=4)).stats for _ in range(4)]
        port = free_port()
        path = Path(tempfile.mkdtemp(prefix="uwtb-")) / "bench.toml"
        path.write_text(CONFIG.format(port=port, **{f"s{i}": s for i, s in enumerate(stats)}))
        exe = str(Path(sys.executable).parent / "uwsgitune")
        proc = subprocess.Popen([exe, "daemon", "--config", str(path)], stderr=subprocess.DEVNULL)
        try:
            _measure(psutil.Process(proc.pid), port, seconds, scrape_every)
        finally:
            proc.send_signal(2)
            proc.wait(10)


def _measure(p: psutil.Process, port: int, seconds: float, scrape_every: float) -> None:
    time.sleep(5)  # imports and first polls done
    http_scrape(port)
    cpu0, t0 = sum(p.cpu_times()[:2]), time.monotonic()
    rss: dict[int, int] = {}  # minute -> last RSS seen in it
    next_scrape = t0
    while (elapsed := time.monotonic() - t0) < seconds:
        if time.monotonic() >= next_scrape:
            http_scrape(port)
            next_scrape += scrape_every
        rss[int(elapsed // 60)] = p.memory_info().rss
        time.sleep(min(1.0, max(0.0, next_scrape - time.monotonic())))
    cpu = sum(p.cpu_times()[:2]) - cpu0
    mib = [v / 2**20 for _, v in sorted(rss.items())]
    print(f"daemon, 4 instances x 4 workers at 1 s, scraped every {scrape_every:g} s, "
          f"{elapsed:.0f} s: CPU {cpu:.2f} s = {100 * cpu / elapsed:.2f}% of a core, "
          f"{p.num_threads()} threads")  # fmt: skip
    print("RSS MiB at the end of each minute: " + ", ".join(f"{m:.1f}" for m in mib))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--renders", type=int, default=200)
    parser.add_argument("--soak", type=float, default=180.0, help="seconds (0: skip)")
    parser.add_argument("--scrape-every", type=float, default=15.0)
    args = parser.parse_args()
    scrape_bench(args.renders)
    if args.soak > 0:
        soak(args.soak, args.scrape_every)


if __name__ == "__main__":
    main()
