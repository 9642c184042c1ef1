"""The scrape as Prometheus times it: a real Prometheus scrapes the uwsgitune daemon and the Go
uwsgi_exporter, both on the same 64-worker uWSGI, and its own `scrape_duration_seconds` of
each target is read back (median, p90, max over the run).

    .venv/bin/python bench/scrape_prometheus.py --workers 64 --interval 2 --seconds 180

Prometheus (Debian's package: `apt-get install -y prometheus`) scrapes every `--interval`
seconds, gzip and all, as it does in production; the daemon polls every second, so every
scrape of it comes after a new poll and renders it (nothing renders ahead of a scrape since
issue 37: bench/results/render_ahead.md).
The Go exporter reads and renders uWSGI's stats on every scrape.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from exporter_vs_go import GO, UWSGITUNE, wait_ready  # noqa: E402

from tests.uwsgi_harness import url, uwsgi_instance  # noqa: E402
from uwsgitune.launch import free_port  # noqa: E402
from uwsgitune.loadgen import run_closed  # noqa: E402

CONFIG = """
global:
  scrape_interval: {every}s
  scrape_timeout: {every}s
scrape_configs:
  - job_name: go
    static_configs: [{{targets: ["127.0.0.1:{go}"]}}]
  - job_name: uwsgitune
    static_configs: [{{targets: ["127.0.0.1:{ours}"]}}]
"""


def query(port: int, expr: str) -> dict[str, float]:
    q = urllib.parse.urlencode({"query": expr})
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v1/query?{q}", timeout=10) as r:
        data = json.load(r)["data"]["result"]
    return {row["metric"].get("job", ""): float(row["value"][1]) for row in data}


def wait_prometheus(port: int) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/-/ready", timeout=2):
                return
        except OSError:
            time.sleep(0.3)
    sys.exit("Prometheus did not become ready in 60 s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--workers", type=int, default=64)
    parser.add_argument("--interval", type=float, default=2.0, help="scrape interval, s")
    parser.add_argument("--seconds", type=float, default=180.0)
    args = parser.parse_args()
    prom = shutil.which("prometheus")
    if prom is None or not GO.exists():
        sys.exit(
            "needs Prometheus (apt-get install -y prometheus) and the Go exporter at " + str(GO)
        )
    with uwsgi_instance(processes=args.workers) as u, tempfile.TemporaryDirectory() as tmp:
        run_closed(url(u, "/"), concurrency=4, duration=2.0, max_requests=2000)
        go, ours, pport = free_port(), free_port(), free_port()
        uri = f"--stats.uri=unix://{u.stats}"
        procs = [
            subprocess.Popen([str(GO), uri, f"--web.listen-address=127.0.0.1:{go}"],
                             stderr=subprocess.DEVNULL),
            subprocess.Popen([UWSGITUNE, "daemon", uri, f"--web.listen-address=127.0.0.1:{ours}"],
                             stderr=subprocess.DEVNULL),
        ]  # fmt: skip
        try:
            for port in (go, ours):
                wait_ready(port)
            cfg = Path(tmp) / "prometheus.yml"
            cfg.write_text(CONFIG.format(every=f"{args.interval:g}", go=go, ours=ours))
            argv = [prom, f"--config.file={cfg}", f"--web.listen-address=127.0.0.1:{pport}",
                    f"--storage.tsdb.path={tmp}/tsdb", "--log.level=warn"]  # fmt: skip
            procs.append(
                subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            )
            wait_prometheus(pport)
            started = time.strftime("%F %T")
            time.sleep(args.seconds + 2 * args.interval)
            window = f"[{int(args.seconds)}s]"
            rows = {
                name: query(pport, f"{fn}(scrape_duration_seconds{window})")
                for name, fn in (("samples", "count_over_time"), ("max", "max_over_time"))
            }
            for q in (0.5, 0.9):
                rows[f"p{int(q * 100)}"] = query(
                    pport, f"quantile_over_time({q}, scrape_duration_seconds{window})"
                )
            head = f"uWSGI {args.workers} workers; Prometheus scraping every {args.interval:g} s"
            print(f"{head} for {args.seconds:g} s from {started} UTC; the daemon polls each 1 s\n")
            print("| target | scrapes | median ms | p90 ms | max ms |\n|---|---|---|---|---|")
            for job, name in (("go", "uwsgi_exporter (Go)"), ("uwsgitune", "uwsgitune daemon")):
                print(f"| {name} | {rows['samples'].get(job, 0):.0f} "
                      f"| {rows['p50'][job] * 1000:.2f} | {rows['p90'][job] * 1000:.2f} "
                      f"| {rows['max'][job] * 1000:.2f} |")  # fmt: skip
        finally:
            for p in procs:
                p.terminate()
                p.wait(10)


if __name__ == "__main__":
    main()
