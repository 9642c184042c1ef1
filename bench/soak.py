"""Soak: the real `uwsgitune daemon` against a real 64-worker uWSGI, polling at 10 Hz
(`--interval` to change it).

Run from the repository root (stops its uWSGI with FIFO q and the daemon with SIGINT):

    .venv/bin/python bench/soak.py --minutes 30 [--warmup 2] [--out bench/results/soak.md]
    .venv/bin/python bench/soak.py --minutes 30 --no-load   # the memory budget alone
    .venv/bin/python bench/soak.py --minutes 5 --warmup 3 --interval 1   # CPU at 1 s polls

Budget (issue 15): the daemon's RSS at the end is at most `--rss-budget` MiB (60) with the
rules' full window (the daemon's `WINDOW_SECONDS` of frames at 10 Hz, full after 150 s).

The daemon runs the instance in `recommend` mode (the tuner decides on every poll, nothing is
written to the FIFO) with a light IO-bound load (2 clients on /io/20) and a /metrics scrape
after each 5 s round of it (one every 5 s). Every `--sample` seconds it records the daemon's
RSS (`/proc/PID/status` VmRSS) and open descriptors (`/proc/PID/fd`). Pass: after warm-up, RSS
stays within +-5% of its first post-warm-up sample (the daemon's frame window fills in 150 s),
its last sample is within the budget, and the fd count (median of 5 samples) does not grow.
It also reports the daemon's CPU after warm-up, in all and per poll.
`--no-load` runs no clients and no scrapes: the daemon only polls the idle instance.
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
interval = {interval}
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


def polls_done(port: int) -> int | None:
    """The daemon's own count of polls so far (its /metrics), None when it cannot say."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        conn.request("GET", "/metrics")
        text = conn.getresponse().read().decode()
    except OSError:
        return None
    finally:
        conn.close()
    for line in text.splitlines():
        if line.startswith("uwsgitune_poll_duration_seconds_count"):
            return int(float(line.rsplit(" ", 1)[1]))
    return None


def cpu_seconds(pid: int) -> float:
    """User + system CPU of a process so far (`/proc/PID/stat`, as psutil reads it)."""
    data = Path(f"/proc/{pid}/stat").read_bytes()
    fields = data[data.rfind(b")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


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


def run(minutes: float, warmup: float, sample: float, out: Path, opts: argparse.Namespace) -> int:
    rows: list[tuple[float, int, int]] = []
    stats = {"requests": 0, "failed": 0, "scrapes": 0, "scrape_errors": 0, "polls": 0}
    with uwsgi_instance(processes=64, listen=1024) as proc, tempfile.TemporaryDirectory() as tmp:
        port = free_port()
        cfg = Path(tmp) / "soak.toml"
        cfg.write_text(
            CONFIG.format(
                port=port, state=tmp, stats=proc.stats, fifo=proc.fifo, interval=opts.interval
            )
        )
        log = (Path(tmp) / "daemon.log").open("wb")
        exe = str(Path(sys.executable).parent / "uwsgitune")
        d = subprocess.Popen([exe, "daemon", "--config", str(cfg)], stdout=log, stderr=log)
        stop = threading.Event()
        t = threading.Thread(target=background, args=(stop, url(proc, "/io/20"), port, stats))
        time.sleep(2)
        if opts.load:
            t.start()
        start = time.monotonic()
        cpu: list[tuple[float, float, int]] = []  # (elapsed, CPU seconds, polls)
        try:
            while (el := time.monotonic() - start) < minutes * 60 and d.poll() is None:
                if not cpu and el >= warmup * 60:
                    cpu.append((el, cpu_seconds(d.pid), polls_done(port) or 0))
                rows.append((el, rss_kib(d.pid), fds(d.pid)))
                print(f"{el / 60:6.1f} min  rss {rows[-1][1]} KiB  fds {rows[-1][2]}", flush=True)
                time.sleep(sample)
        finally:
            stats["polls"] = polls_done(port) or 0
            if cpu and d.poll() is None:
                cpu.append((time.monotonic() - start, cpu_seconds(d.pid), stats["polls"]))
            stop.set()
            if t.is_alive():
                t.join()
            alive = d.poll() is None
            d.send_signal(signal.SIGINT)
            d.wait(10)
            log.close()
            errors = (Path(tmp) / "daemon.log").read_text().count("Traceback")
    if len(cpu) == 2:  # the daemon's whole cost after warm-up: polls, rules, tuner, scrapes
        (t0, c0, p0), (t1, c1, p1) = cpu
        stats["cpu_ms_per_poll"] = round((c1 - c0) / max(p1 - p0, 1) * 1000, 2)  # type: ignore[assignment]
        stats["cpu_pct"] = round((c1 - c0) / (t1 - t0) * 100, 2)  # type: ignore[assignment]
    return report(rows, warmup * 60, stats, alive, errors, out, opts)


def report(
    rows: list[tuple[float, int, int]],
    warm: float,
    stats: dict[str, int],
    alive: bool,
    tracebacks: int,
    out: Path,
    opts: argparse.Namespace,
) -> int:
    after = [r for r in rows if r[0] >= warm] or rows
    base_rss = after[0][1]
    drift = max(abs(r[1] - base_rss) for r in after) / base_rss * 100
    # A scrape or a poll in flight holds a socket for a moment: compare medians, not peaks.
    base_fd = statistics.median_low(r[2] for r in after[:5])
    fd_growth = statistics.median_low(r[2] for r in after[-5:]) - base_fd
    end_mib = rows[-1][1] / 1024
    ok = alive and drift <= 5 and fd_growth <= 0 and tracebacks == 0
    ok = ok and end_mib <= opts.rss_budget
    load = (
        f"Requests served {stats['requests']}, failed {stats['failed']}; /metrics scrapes "
        f"{stats['scrapes']}, failed {stats['scrape_errors']}"
        if opts.load
        else "No load and no scrapes (`--no-load`): the daemon only polls"
    )
    lines = [
        f"# Soak: `uwsgitune daemon` against 64 workers, a poll every {opts.interval:g} s",
        "",
        f"Ran {rows[-1][0] / 60:.1f} minutes (warm-up {warm / 60:g} min), `bench/soak.py`. "
        f"{load}; daemon alive at the end: {alive}; tracebacks in its log: {tracebacks}. "
        f"Polls done: {stats['polls']} ({stats['polls'] / max(rows[-1][0], 1):.1f} a second). "
        f"Daemon CPU after warm-up (all it does: polls, rules, tuner, scrapes): "
        f"{stats.get('cpu_pct', '?')}% of a core, {stats.get('cpu_ms_per_poll', '?')} ms a poll.",
        "",
        f"RSS at the end: {end_mib:.1f} MiB (budget {opts.rss_budget:g} MiB, issue 15). "
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
    ap.add_argument("--interval", type=float, default=0.1, help="the daemon's poll interval")
    ap.add_argument("--warmup", type=float, default=4)
    ap.add_argument("--sample", type=float, default=10)
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "soak.md")
    ap.add_argument("--rss-budget", type=float, default=60.0, help="MiB at the end (60)")
    ap.add_argument("--no-load", dest="load", action="store_false", help="no clients, no scrapes")
    args = ap.parse_args()
    return run(args.minutes, args.warmup, args.sample, args.out, args)


if __name__ == "__main__":
    sys.exit(main())
