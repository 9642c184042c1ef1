"""Issue 37: does rendering the exposition ahead of a due scrape save the daemon's CPU?

    nice -n 0 .venv/bin/python bench/render_ahead.py [--minutes 4] [--rounds 3] [--tree DIR]

The rule: keep the render-ahead exposition only if it saves at least 20% of the daemon's CPU
at a 15 s scrape interval with 64 workers; else render at scrape time.

The definition, fixed before the first run:
- **What is measured:** the daemon's CPU seconds per minute: user + system of the
  `uwsgitune daemon` process (every thread: polls, event loop, renders), read from /proc
  (psutil) at the start and the end of a measured span, divided by the span in minutes.
- **The setting:** one real uWSGI 2.0 with 64 workers (`tests/uwsgi_harness.py`: unix stats
  socket, `memory-report`), idle; `uwsgitune daemon --stats.uri=unix://...` on loopback at
  its defaults: one instance, a poll every 1 s, observe mode.
- **The scraper:** as Prometheus scrapes: one kept-alive connection, `GET /metrics` with
  `Accept-Encoding: gzip` and `X-Prometheus-Scrape-Timeout-Seconds: 10`, every 15 s on a
  fixed schedule (from the run's start, not from the last answer), the body read whole.
- **The two variants, at one commit:** "ahead" is the daemon as it is: after a poll, the poll
  thread renders when a scrape is due within `AHEAD` poll intervals
  (`PollExposition.prepare`). "at scrape" is the same code with `PollExposition.prepare`
  replaced, in the child process only, by one that renders nothing: the first scrape after
  a poll renders, and the scrapes of one poll share it ("render once per poll, share among
  scrapes" stays in both; only "ahead of a due scrape" is in question).
- **A run:** start the daemon, wait until it answers with `uwsgi_up` 1, scrape for a 60 s
  warm-up (not counted; the scrape clock learns the interval from 5 gaps, so the ahead
  variant renders ahead from the 3rd scrape on), then measure `--minutes` minutes (default
  4), then stop it with SIGINT. Each run is a fresh daemon; the uWSGI is the same all along.
- **Rounds:** `--rounds` (default 3, at least 3) of each variant, alternating (ahead, at
  scrape, ahead, ...), in one sitting. Each run records the load average before and after,
  and the child's counts of renders (`renders`, of which `prepared` in a poll thread).
- **The verdict:** saving = 1 - median(ahead) / median(at scrape). Keep render-ahead if the
  saving is 20% or more; else remove it. If the saving lies within the runs' spread of 20%
  (the interval between each variant's min and max overlaps the threshold), run again.

Writes bench/results/render_ahead.md (appends the run's table under the definition).
`--tree DIR` runs the daemon from another checkout (e.g. `git archive` of the commit under
test), so the working tree can change during the run. The verdict removed render-ahead
(the commit after fa6d64b): the "ahead" variant runs only from a tree that still has it,
e.g. `git archive fa6d64b | tar -x -C /tmp/t && bench/render_ahead.py --tree /tmp/t`.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.uwsgi_harness import uwsgi_instance  # noqa: E402
from uwsgitune.launch import free_port  # noqa: E402

RESULTS = ROOT / "bench" / "results" / "render_ahead.md"
SCRAPE_EVERY = 15.0
WARMUP = 60.0
HEADERS = {"Accept-Encoding": "gzip", "X-Prometheus-Scrape-Timeout-Seconds": "10"}

# The child: the daemon's CLI, with `prepare` disabled for "at scrape", and the exposition's
# counts written at exit. Patching in the child leaves the commit's code the same in both.
LAUNCHER = """
import atexit, json, os, sys
from uwsgitune.exporter.exposition import PollExposition
made = []
init = PollExposition.__init__
def counted(self, *args, **kwargs):
    init(self, *args, **kwargs)
    made.append(self)
PollExposition.__init__ = counted
if not hasattr(PollExposition, "prepare"):
    sys.exit("this tree renders at scrape time only: run with --tree at fa6d64b")
if os.environ["RENDER_AHEAD_VARIANT"] == "at scrape":
    PollExposition.prepare = lambda self, within: False
def counts():
    with open(os.environ["RENDER_AHEAD_COUNTS"], "w") as f:
        json.dump({"renders": sum(e.renders for e in made),
                   "prepared": sum(getattr(e, "prepared", 0) for e in made),
                   "module": sys.modules["uwsgitune"].__file__}, f)
atexit.register(counts)
from uwsgitune.cli.main import main
sys.argv = ["uwsgitune", *sys.argv[1:]]
sys.exit(main())
"""


def cpu(p: psutil.Process) -> float:
    t = p.cpu_times()
    return float(t.user + t.system)


class Scraper:
    """Prometheus's way: one connection kept alive, reopened if the server closed it."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.conn: http.client.HTTPConnection | None = None

    def scrape(self) -> bytes:
        for _ in range(2):
            if self.conn is None:
                self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
            try:
                self.conn.request("GET", "/metrics", headers=HEADERS)
                return self.conn.getresponse().read()
            except (OSError, http.client.HTTPException):
                self.conn.close()
                self.conn = None
        raise OSError("scrape failed twice")

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()


def wait_up(port: int, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            conn.request("GET", "/metrics")
            text = conn.getresponse().read().decode()
            conn.close()
            if 'uwsgi_up{stats_uri="' in text and '"} 1.0' in text.split("uwsgi_up{", 1)[1]:
                return
        except OSError:
            pass
        time.sleep(0.5)
    sys.exit(f"the daemon on port {port} did not come up in {timeout:g} s")


def run(
    stats: str, variant: str, minutes: float, tree: Path | None, warmup: float = WARMUP
) -> dict[str, object]:
    """One fresh daemon: CPU seconds per minute over `minutes`, after the warm-up."""
    port = free_port()
    counts = Path(tempfile.mkdtemp(prefix="uwt-ahead-")) / "counts.json"
    env = {**os.environ, "RENDER_AHEAD_VARIANT": variant, "RENDER_AHEAD_COUNTS": str(counts)}
    if tree is not None:
        env["PYTHONPATH"] = str(tree)
    argv = [
        sys.executable,
        "-c",
        LAUNCHER,
        "daemon",
        f"--stats.uri=unix://{stats}",
        f"--web.listen-address=127.0.0.1:{port}",
    ]
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    scraper = Scraper(port)
    try:
        wait_up(port)
        p = psutil.Process(proc.pid)
        t0 = time.monotonic()
        tick = 0

        def scrape_until(end: float) -> None:
            nonlocal tick
            while True:
                due = t0 + tick * SCRAPE_EVERY
                if due >= end:
                    time.sleep(max(0.0, end - time.monotonic()))
                    return
                time.sleep(max(0.0, due - time.monotonic()))
                scraper.scrape()
                tick += 1

        scrape_until(t0 + warmup)
        load0 = os.getloadavg()[0]
        c0, m0 = cpu(p), time.monotonic()
        scrape_until(t0 + warmup + minutes * 60)
        c1, m1 = cpu(p), time.monotonic()
        load1 = os.getloadavg()[0]
    finally:
        scraper.close()
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    made = json.loads(counts.read_text()) if counts.exists() else {}
    return {
        "variant": variant,
        "cpu_s_per_min": (c1 - c0) / ((m1 - m0) / 60),
        "cpu_s": c1 - c0,
        "minutes": (m1 - m0) / 60,
        "scrapes": tick,
        "load": (load0, load1),
        **made,
    }


def commit(tree: Path | None) -> str:
    where = tree if tree is not None else ROOT
    marker = where / "COMMIT"
    if marker.exists():
        return marker.read_text().strip()
    out = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"],
        cwd=where,
        capture_output=True,
        text=True,
        check=False,
    )
    return out.stdout.strip() or "?"


def report(runs: list[dict[str, object]], args: argparse.Namespace, started: str) -> str:
    by: dict[str, list[float]] = {"ahead": [], "at scrape": []}
    for r in runs:
        by[str(r["variant"])].append(float(r["cpu_s_per_min"]))  # type: ignore[arg-type]
    ahead, scrape = statistics.median(by["ahead"]), statistics.median(by["at scrape"])
    saving = 1 - ahead / scrape
    lines = [
        "",
        f"## Run of {started} UTC, commit {commit(args.tree)}",
        "",
        f"Python {platform.python_version()}, {os.cpu_count()} CPUs, {args.minutes:g} min "
        f"measured per run after {args.warmup:g} s of warm-up, {args.rounds} rounds a variant, "
        "alternating.",
        "",
        "| # | variant | daemon CPU s/min | CPU s | minutes | scrapes | renders | of which "
        "ahead | load avg (1 min) before / after |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for i, r in enumerate(runs, 1):
        load = r["load"]
        assert isinstance(load, tuple)
        lines.append(
            f"| {i} | {r['variant']} | {r['cpu_s_per_min']:.3f} | {r['cpu_s']:.2f} "
            f"| {r['minutes']:.2f} | {r['scrapes']} | {r.get('renders', '?')} "
            f"| {r.get('prepared', '?')} | {load[0]:.2f} / {load[1]:.2f} |"
        )
    each = {k: ", ".join(f"{x:.3f}" for x in v) for k, v in by.items()}
    lines += [
        "",
        f"Median daemon CPU: ahead {ahead:.3f} s/min (runs {each['ahead']}), at scrape "
        f"{scrape:.3f} s/min (runs {each['at scrape']}). Saving of render-ahead: "
        f"{100 * saving:.1f}% (the rule asks for 20%).",
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--minutes", type=float, default=4.0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--tree", type=Path, help="run the daemon from this checkout")
    ap.add_argument("--warmup", type=float, default=WARMUP, help="seconds (a smoke test: less)")
    ap.add_argument("--dry", action="store_true", help="print the report, write nothing")
    args = ap.parse_args()
    if args.rounds < 3:
        ap.error("--rounds: at least 3 a variant")
    started = time.strftime("%Y-%m-%d %H:%M", time.gmtime())
    runs = []
    with uwsgi_instance(processes=64) as u:
        time.sleep(3)
        for _ in range(args.rounds):
            for variant in ("ahead", "at scrape"):
                r = run(u.stats, variant, args.minutes, args.tree, args.warmup)
                print(json.dumps(r), flush=True)
                runs.append(r)
    text = report(runs, args, started)
    print(text)
    if args.dry:
        return
    with RESULTS.open("a") as f:
        f.write(text)


if __name__ == "__main__":
    main()
