"""Issue 15: what watching costs, against the number of workers, beside uwsgitop and the Go
uwsgi_exporter measured in the same run.

    .venv/bin/python bench/poll_cost.py [--polls 200] [--rounds 3] [--workers 16,64,256,1000]

A real uWSGI with 64 workers runs (idle; the stats are read on loopback, unix socket). Its
stats document is read once and grown or cut to N workers (ids renumbered, pids taken in
turn from its real workers, so the host sample reads real /proc files), in 4 variants whose
counters move, served by a socket server in this process's other thread (uWSGI's shape: one
document per connection, then close). For each N:
- one whole poll, as the daemon makes it, component by component (CPU time of the polling
  thread, median of `--polls` paced at 10 Hz, then of `--rounds` runs): read, parse, host
  sample (cgroups, /proc for each pid, netlink), derive (the frame and the window), rules,
  tuner (recommend mode); with the daemon's window full (150 s of frames), at its default
  1 s interval and at 0.1 s;
- uwsgitop's refresh on the same documents (its own main(), curses stubbed), wall time;
- a scrape: uwsgitune's endpoint rendering once per poll (what a scrape costs between
  polls, CPU) and rendering everything per scrape (before), and the Go exporter (wall time
  of `GET /metrics` and the process's CPU per scrape; it reads the stats on every scrape);
- the 64-worker master's CPU, unwatched and while `uwsgitune watch --plain --interval 0.1`
  polls it (10 Hz).
Writes bench/results/poll_cost.md and poll_cost.svg.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from poll_bench import UWSGITOP, fixture_server, time_uwsgitop  # noqa: E402

from tests.exporter.test_site import get  # noqa: E402
from tests.uwsgi_harness import uwsgi_instance  # noqa: E402
from uwsgitune.actuate.service import TunerService, TunerSetup  # noqa: E402
from uwsgitune.core.address import parse_address  # noqa: E402
from uwsgitune.core.derive import Tracker  # noqa: E402
from uwsgitune.core.model import parse_document  # noqa: E402
from uwsgitune.core.samples import Poll  # noqa: E402
from uwsgitune.core.window import WHOLE_FRAMES, Window  # noqa: E402
from uwsgitune.daemon.instance import WINDOW_SECONDS  # noqa: E402
from uwsgitune.exporter.exposition import PollExposition, render  # noqa: E402
from uwsgitune.exporter.metrics import polled_registry, registry_for  # noqa: E402
from uwsgitune.exporter.site import HandlerStats, Site, each_time, handler_text  # noqa: E402
from uwsgitune.launch import free_port  # noqa: E402
from uwsgitune.pipeline import InstanceState  # noqa: E402
from uwsgitune.pipeline.rules import RulesRunner  # noqa: E402
from uwsgitune.rules.facts import Facts  # noqa: E402
from uwsgitune.sources.host import HostSampler  # noqa: E402
from uwsgitune.sources.stats import read_stats  # noqa: E402
from uwsgitune.tuner import TunerSettings  # noqa: E402

GO = ROOT.parent / "shared" / "tools" / "uwsgi_exporter" / "uwsgi_exporter"
RESULTS = ROOT / "bench" / "results"
PARTS = ("read", "parse", "host", "derive", "rules", "tuner")


def documents(real: bytes, workers: int, variants: int = 4) -> list[bytes]:
    """`real` grown or cut to `workers` workers, in `variants` whose counters move."""
    doc = json.loads(real)
    base = doc["workers"]
    pids = [w["pid"] for w in base if w.get("pid")]
    out = []
    for v in range(variants):
        ws = []
        for i in range(workers):
            w = json.loads(json.dumps(base[i % len(base)]))
            w["id"], w["pid"] = i + 1, pids[i % len(pids)]
            for key, step in (("requests", 7), ("running_time", 70_000), ("tx", 900)):
                w[key] = w.get(key, 0) + v * step * (1 + i % 5)
            for core in w.get("cores", []):
                core["requests"] = core.get("requests", 0) + v * 7 * (1 + i % 5)
            ws.append(w)
        out.append(json.dumps({**doc, "workers": ws}).encode())
    return out


def poll_parts(address: str, polls: int, every: float = 1.0) -> dict[str, float]:
    """Median CPU ms of each component of a poll, and of their sum, over `polls` polls at
    10 Hz pacing, as the daemon polls at interval `every`: first its window is filled, back
    to back, with the polls of its `WINDOW_SECONDS` (150 s: 150 frames at 1 s, 1,500 at
    0.1 s; what reads the window pays for its length). Every poll is dated `every` seconds
    after the one before, whatever the pacing, and the tuner's clock reads those dates: the
    rules' and the tuner's look-backs then hold the frames the daemon's would (dated by the
    wall clock, 10 Hz polls put 300 frames in the tuner's 30 s look-back at 1 s, not 30)."""
    addr = parse_address(address)
    fill = int(WINDOW_SECONDS / every)
    tracker, window = Tracker(address), Window(WINDOW_SECONDS, whole=WHOLE_FRAMES)
    sampler = HostSampler()
    rules = RulesRunner(Facts(stats_kind=addr.kind))
    base_t, base_mono = time.time(), time.monotonic()
    clock = [base_mono]
    settings = TunerSettings(interval=every)
    setup = TunerSetup(addr, Path(address + ".fifo"), lambda _slots: settings, "recommend")
    tuner = TunerService(setup, _no_poll, mono=lambda: clock[0])
    samples: dict[str, list[float]] = {p: [] for p in (*PARTS, "whole")}
    cpu = time.thread_time
    since = None
    for i in range(fill + polls + 5):
        t = [cpu()]
        raw = read_stats(addr)
        t.append(cpu())
        parsed = parse_document(raw)
        t.append(cpu())
        host = sampler.sample(parsed.doc)
        t.append(cpu())
        dated = (i - fill) * every  # the fill before this run, then one poll each `every`
        clock[0] = base_mono + dated
        poll = Poll(address, base_t + dated, clock[0], doc=parsed.doc, host=host)
        frame = tracker.update(poll)
        window.add(frame)
        t.append(cpu())
        frames = window.frames()  # one copy per poll, for the rules and the tuner
        findings = rules.run(frames, since)
        t.append(cpu())
        state = InstanceState(addr.uri, frame=frame, poll=poll, frames=frames, findings=findings)
        result = tuner.step(state)
        since = result.listen_since if result is not None else since
        t.append(cpu())
        if i >= fill + 5:  # warm: the window and the rules' state built
            for name, a, b in zip(PARTS, t, t[1:], strict=False):
                samples[name].append(b - a)
            samples["whole"].append(t[-1] - t[0])
        if i >= fill:
            time.sleep(0.1)
    return {k: statistics.median(v) * 1000 for k, v in samples.items()}


def _no_poll() -> InstanceState:
    raise AssertionError("a tuner in recommend mode applies nothing, so waits on no poll")


def _median_of(rounds: list[dict[str, float]]) -> dict[str, float]:
    """Each part's median over rounds (each a median of its polls): on this VM the same
    code's medians move 10-15% from run to run, together, as if the CPU's speed did."""
    return {k: statistics.median(r[k] for r in rounds) for k in rounds[0]}


def scrape_cpu(address: str, scrapes: int) -> dict[str, float]:
    """CPU ms a scrape costs on uwsgitune's endpoint (the site, as the daemon serves it):
    between polls (rendered once per poll) and rendering everything (before)."""
    addr = parse_address(address)
    tracker = Tracker(address)
    poll = None
    for _ in range(2):
        raw = read_stats(addr)
        poll = Poll(address, time.time(), time.monotonic(), doc=parse_document(raw).doc)
        frame = tracker.update(poll)
    snap = InstanceState(addr.uri, "app", "observe", frame, poll)
    stats = HandlerStats()  # as the daemon serves it (exporter/site.py)
    kept = PollExposition(lambda: [snap], polled_registry(True), live=partial(handler_text, stats))
    once = Site(kept.encoded, stats=stats)
    registry = registry_for(lambda: [snap])
    every = Site(each_time(lambda: render(registry)))
    out: dict[str, float] = {}

    async def run(site: Site, gz: bool) -> tuple[float, int]:
        request = get("/metrics", Accept_Encoding="gzip") if gz else get("/metrics")
        size = len((await site(request)).content)
        c0 = time.process_time()
        for _ in range(scrapes):
            await site(request)
        return (time.process_time() - c0) / scrapes * 1000, size

    out["once_gzip"], out["bytes_gzip"] = asyncio.run(run(once, True))
    out["once_plain"], out["bytes_plain"] = asyncio.run(run(once, False))
    out["every_gzip"], _ = asyncio.run(run(every, True))
    return out


def go_scrape(address: str, scrapes: int) -> dict[str, float] | None:
    """The Go exporter against the same server: wall ms per scrape (median) and its CPU."""
    if not GO.exists():
        return None
    import http.client

    port = free_port()
    proc = subprocess.Popen(
        [str(GO), f"--stats.uri=unix://{address}", f"--web.listen-address=127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        p = psutil.Process(proc.pid)

        def scrape() -> int:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            conn.request("GET", "/metrics", headers={"Accept-Encoding": "gzip"})
            size = len(conn.getresponse().read())
            conn.close()
            return size

        deadline = time.monotonic() + 20
        while True:
            try:
                size = scrape()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        walls = []
        c0 = sum(p.cpu_times()[:2])
        for _ in range(scrapes):
            t0 = time.perf_counter()
            scrape()
            walls.append(time.perf_counter() - t0)
        cpu = (sum(p.cpu_times()[:2]) - c0) / scrapes * 1000
        return {"wall": statistics.median(walls) * 1000, "cpu": cpu, "bytes_gzip": size}
    finally:
        proc.terminate()
        proc.wait(10)


def master_cpu(master: int, stats: str, seconds: float) -> tuple[float, float]:
    """The master's CPU (% of a core) over `seconds` unwatched, then polled at 10 Hz."""
    p = psutil.Process(master)

    def used(during: Callable[[], None]) -> float:
        c0 = sum(p.cpu_times()[:2])
        during()
        return (sum(p.cpu_times()[:2]) - c0) / seconds * 100

    idle = used(lambda: time.sleep(seconds))
    exe = str(Path(sys.executable).parent / "uwsgitune")

    def watched() -> None:
        w = subprocess.Popen(
            [exe, "watch", stats, "--plain", "--interval", "0.1"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            time.sleep(seconds)
        finally:
            w.terminate()  # not SIGINT: a job started in the background may ignore it
            w.wait(10)

    time.sleep(2)
    return idle, used(watched)


def chart(rows: dict[int, dict[str, Any]]) -> str:
    """CPU ms against workers (log-log): uwsgitune's poll and scrape, uwsgitop, the Go
    exporter."""
    series = {
        "uwsgitune: one whole poll (CPU)": ("#d62728", lambda r: r["poll"]["whole"]),
        "uwsgitune: a scrape between polls (CPU)": ("#ff7f0e", lambda r: r["scrape"]["once_gzip"]),
        "uwsgitune 0.1: a scrape (CPU)": ("#c49c94", lambda r: r["scrape"]["every_gzip"]),
        "uwsgitop: a refresh (wall)": ("#2ca02c", lambda r: r.get("uwsgitop")),
        "Go uwsgi_exporter: a scrape (CPU)": ("#1f77b4", lambda r: (r.get("go") or {}).get("cpu")),
    }
    import math

    w, h, pad = 560, 300, 50
    ns = sorted(rows)
    vals = [v for r in rows.values() for _, f in series.values() if (v := f(r))]
    lo, hi = math.log10(min(vals) / 1.5), math.log10(max(vals) * 1.5)

    def x(n: int) -> float:
        return pad + w * (math.log10(n) - math.log10(ns[0])) / (
            math.log10(ns[-1]) - math.log10(ns[0]) or 1
        )

    def y(v: float) -> float:
        return 20 + h * (1 - (math.log10(v) - lo) / (hi - lo))

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{w + 2 * pad + 220}" '
        f'height="{h + 70}" font-family="sans-serif" font-size="10">',
        f'<rect x="{pad}" y="20" width="{w}" height="{h}" fill="none" stroke="#999"/>',
        f'<text x="{pad}" y="14" font-size="12">ms, against workers</text>',
    ]
    for n in ns:
        parts.append(f'<text x="{x(n) - 8:.0f}" y="{h + 36}">{n}</text>')
    for e in range(math.ceil(lo), math.floor(hi) + 1):
        parts.append(f'<text x="4" y="{y(10**e) + 3:.0f}">{10**e:g} ms</text>')
        parts.append(
            f'<line x1="{pad}" x2="{pad + w}" y1="{y(10**e):.0f}" y2="{y(10**e):.0f}" '
            'stroke="#eee"/>'
        )
    for j, (label, (color, f)) in enumerate(series.items()):
        pts = [(x(n), y(v)) for n in ns if (v := f(rows[n]))]
        coords = " ".join(f"{a:.1f},{b:.1f}" for a, b in pts)
        parts.append(f'<polyline fill="none" stroke="{color}" stroke-width="2" points="{coords}"/>')
        parts.append(f'<text x="{pad + w + 10}" y="{40 + 16 * j}" fill="{color}">{label}</text>')
    parts.append(f'<text x="{pad + w / 2 - 20}" y="{h + 56}">workers</text></svg>')
    return "\n".join(parts)


def report(rows: dict[int, dict[str, Any]], master: tuple[float, float], load: str) -> str:
    lines = [
        "# What watching costs, against the number of workers (issue 15)",
        "",
        f"Python {platform.python_version()}, {os.cpu_count()} CPUs ({platform.machine()}), "
        f"load average before the run {load}, {time.strftime('%Y-%m-%d %H:%M', time.gmtime())} "
        "UTC. "
        "Idle uWSGI 2.0 (64 real workers); larger and smaller documents are its own, grown "
        "or cut (bench/poll_cost.py says how). Medians. CPU is the polling thread's.",
        "",
        "![cost against workers](poll_cost.svg)",
        "",
        "## One whole poll (CPU ms)",
        "",
        "The daemon's window full (150 s of frames). Parts at its default 1 s interval "
        "(150 frames), each the median of the runs' medians (each run fresh, `--rounds`); "
        "the whole at 0.1 s too (1,500 frames: the rules read 1,200 of them), one run.",
        "",
        "| workers | read | parse | host | derive | rules | tuner | **whole** | whole, each run "
        "| whole at 10 Hz | uwsgitop refresh (wall) |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for n, r in sorted(rows.items()):
        p = r["poll"]
        top = r.get("uwsgitop")
        lines.append(
            f"| {n} | "
            + " | ".join(f"{p[k]:.2f}" for k in PARTS)
            + f" | **{p['whole']:.2f}** | {' / '.join(f'{x:.2f}' for x in r['rounds'])}"
            + f" | {r['poll10']['whole']:.2f}"
            + f" | {'-' if top is None else f'{top:.2f}'} |"
        )
    lines += [
        "",
        "## A scrape (ms)",
        "",
        "| workers | uwsgitune, between polls (CPU) | uwsgitune, rendering all (CPU, before) | "
        "Go exporter (CPU) | Go exporter (wall) | bytes gzip: ours / Go's |",
        "|---|---|---|---|---|---|",
    ]
    for n, r in sorted(rows.items()):
        s, g = r["scrape"], r.get("go") or {}
        go_cpu = f"{g['cpu']:.2f}" if g else "-"
        go_wall = f"{g['wall']:.2f}" if g else "-"
        go_bytes = f"{g['bytes_gzip']:.0f}" if g else "-"
        lines.append(
            f"| {n} | {s['once_gzip']:.2f} | {s['every_gzip']:.2f} | {go_cpu} | {go_wall} | "
            f"{s['bytes_gzip']:.0f} / {go_bytes} |"
        )
    idle, polled = master
    lines += [
        "",
        "## The master's CPU (64 workers)",
        "",
        f"Unwatched: {idle:.2f}% of a core. Polled at 10 Hz (`watch --plain --interval 0.1`): "
        f"{polled:.2f}%. Difference: {polled - idle:+.2f} points.",
        "",
    ]
    return "\n".join(lines)


def _positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of 1 or more")
    return int(text)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--polls", type=int, default=200)
    ap.add_argument("--scrapes", type=int, default=200)
    ap.add_argument("--rounds", type=_positive, default=3, help="runs of the 1 s poll, each fresh")
    ap.add_argument("--workers", default="16,64,256,1000")
    ap.add_argument("--master-seconds", type=float, default=30.0)
    ap.add_argument("--uwsgitop", type=Path, default=UWSGITOP)
    args = ap.parse_args()
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    rows: dict[int, dict[str, Any]] = {}
    with uwsgi_instance(processes=64) as proc:
        time.sleep(3)
        real = read_stats(parse_address(proc.stats))
        master = json.loads(real)["pid"]
        for n in (int(x) for x in args.workers.split(",")):
            path = os.path.join(tempfile.mkdtemp(prefix="uwt-cost-"), "stats.sock")
            with fixture_server(path, documents(real, n)):  # the variants in turn
                rounds = [poll_parts(path, args.polls, 1.0) for _ in range(args.rounds)]
                row: dict[str, Any] = {"poll": _median_of(rounds)}
                row["rounds"] = [r["whole"] for r in rounds]
                row["poll10"] = poll_parts(path, args.polls, 0.1)
                row["scrape"] = scrape_cpu(path, args.scrapes)
                row["go"] = go_scrape(path, args.scrapes)
                if args.uwsgitop.exists():
                    row["uwsgitop"] = time_uwsgitop(args.uwsgitop, path, args.polls)[0]
            rows[n] = row
            print(n, json.dumps(row), flush=True)
        mcpu = master_cpu(master, proc.stats, args.master_seconds)
    (RESULTS / "poll_cost.json").write_text(json.dumps({"rows": rows, "master": mcpu}, indent=1))
    (RESULTS / "poll_cost.svg").write_text(chart(rows))
    (RESULTS / "poll_cost.md").write_text(report(rows, mcpu, load))
    print(f"wrote {RESULTS / 'poll_cost.md'}")


if __name__ == "__main__":
    main()
