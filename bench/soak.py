"""Soak: the real `uwsgitune daemon` against a real 64-worker uWSGI, polling at 10 Hz.

Run from the repository root (stops its uWSGI with FIFO q and the daemon with SIGINT):

    .venv/bin/python bench/soak.py --minutes 30 [--warmup 2] [--out bench/results/soak.md]

The daemon runs the instance in `recommend` mode (the tuner decides on every poll, nothing is
written to the FIFO) with a light IO-bound load (2 clients on /io/20) and a /metrics scrape
every second. Every `--sample` seconds it records the daemon's RSS (`/proc/PID/status` VmRSS)
and open descriptors (`/proc/PID/fd`). Pass: after warm-up, RSS stays within +-5% of its
first post-warm-up sample (the daemon's frame window fills in 150 s), and the fd count
(median of 5 samples) does not grow.
"""

from __future__ import annotations

import argparse
import http.client
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.uwsgi_harness import url, uwsgi_instance  # noqa: E402
from uwsgitune.launch import free_port  # noqa: E402
from uwsgitune.loadgen import run_closed  # noqa: E402

CONFIG = """
[daemon]
metrics_listen = "127.0.0.1:{port}"
state_dir = "{state}"

[[instance]]
name = "soak"
stats = "{stats}"
fifo = "{fifo}"
mode = "recommend"
min_workers = 8
max_workers = 64
interval = 0.1
"""


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def scrape(port: int) -> int:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        conn.request("GET", "/metrics")
        resp = conn.getresponse()
        resp.read()
        return resp.status
    finally:
        conn.close()


def background(stop: threading.Event, target: str, port: int, stats: dict[str, int]) -> None:
    while not stop.is_set():
        r = run_closed(target, 2, 5.0, 100_000)
        stats["requests"] += r.ok
        stats["failed"] += r.errors
        try:
            stats["scrapes"] += 1
            stats["scrape_errors"] += scrape(port) != 200
        except OSError:
            stats["scrape_errors"] += 1


def run(minutes: float, warmup: float, sample: float, out: Path) -> int:
    rows: list[tuple[float, int, int]] = []
    stats = {"requests": 0, "failed": 0, "scrapes": 0, "scrape_errors": 0}
    with uwsgi_instance(processes=64, listen=1024) as proc, tempfile.TemporaryDirectory() as tmp:
        port = free_port()
        cfg = Path(tmp) / "soak.toml"
        cfg.write_text(CONFIG.format(port=port, state=tmp, stats=proc.stats, fifo=proc.fifo))
        log = (Path(tmp) / "daemon.log").open("wb")
        exe = str(Path(sys.executable).parent / "uwsgitune")
        d = subprocess.Popen([exe, "daemon", "--config", str(cfg)], stdout=log, stderr=log)
        stop = threading.Event()
        t = threading.Thread(target=background, args=(stop, url(proc, "/io/20"), port, stats))
        time.sleep(2)
        t.start()
        start = time.monotonic()
        try:
            while (el := time.monotonic() - start) < minutes * 60 and d.poll() is None:
                rows.append((el, rss_kib(d.pid), fds(d.pid)))
                print(f"{el / 60:6.1f} min  rss {rows[-1][1]} KiB  fds {rows[-1][2]}", flush=True)
                time.sleep(sample)
        finally:
            stop.set()
            t.join()
            alive = d.poll() is None
            d.send_signal(signal.SIGINT)
            d.wait(10)
            log.close()
            errors = (Path(tmp) / "daemon.log").read_text().count("Traceback")
    return report(rows, warmup * 60, stats, alive, errors, out)


def report(
    rows: list[tuple[float, int, int]],
    warm: float,
    stats: dict[str, int],
    alive: bool,
    tracebacks: int,
    out: Path,
) -> int:
    after = [r for r in rows if r[0] >= warm] or rows
    base_rss = after[0][1]
    drift = max(abs(r[1] - base_rss) for r in after) / base_rss * 100
    # A scrape or a poll in flight holds a socket for a moment: compare medians, not peaks.
    base_fd = statistics.median_low(r[2] for r in after[:5])
    fd_growth = statistics.median_low(r[2] for r in after[-5:]) - base_fd
    ok = alive and drift <= 5 and fd_growth <= 0 and tracebacks == 0
    lines = [
        "# Soak: `uwsgitune daemon` against 64 workers at 10 Hz",
        "",
        f"Ran {rows[-1][0] / 60:.1f} minutes (warm-up {warm / 60:g} min), `bench/soak.py`. "
        f"Requests served {stats['requests']}, failed {stats['failed']}; /metrics scrapes "
        f"{stats['scrapes']}, failed {stats['scrape_errors']}; daemon alive at the end: {alive}; "
        f"tracebacks in its log: {tracebacks}.",
        "",
        f"RSS after warm-up: {base_rss} KiB at first, max drift {drift:.2f}% (limit 5%). "
        f"Open fds after warm-up (median of 5 samples): {base_fd} at first, growth {fd_growth} "
        f"at the end (peak {max(r[2] for r in after)}). "
        f"**{'PASS' if ok else 'FAIL'}**",
        "",
        "| minute | RSS KiB | fds |",
        "|---|---|---|",
    ]
    step = max(1, len(rows) // 40)
    lines += [f"| {r[0] / 60:.1f} | {r[1]} | {r[2]} |" for r in [*rows[::step], rows[-1]]]
    out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines[:7]))
    return 0 if ok else 1


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=float, default=30)
    ap.add_argument("--warmup", type=float, default=4)
    ap.add_argument("--sample", type=float, default=10)
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "soak.md")
    args = ap.parse_args()
    return run(args.minutes, args.warmup, args.sample, args.out)


if __name__ == "__main__":
    sys.exit(main())
