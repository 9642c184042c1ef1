"""`recommend --prometheus` at fleet scale: time and peak RSS against a real Prometheus.

    .venv/bin/python bench/prom_recommend_bench.py [--instances 100,200,400,1000]
        [--workers 4] [--keep DIR] [--write bench/results/prom_recommend.md]

What is measured (defined before any run; issue 40, part 1, "Scale"):
- The series: N generated instances, each as `uwsgitune daemon` exports it (uwsgi_exporter's
  families with `stats_uri`, plus `uwsgitune_*`, among them the per-instance sums of the
  per-worker families, `uwsgitune_worker_sum_*`), `--workers` workers each, one sample a
  minute over the last 24 h and 10 minutes. Loads follow a daily curve; a tenth of the
  instances are over-provisioned (idle), a tenth short of workers (their queue full at the
  peak), one in twenty reloads once (counters reset). Written as OpenMetrics and backfilled
  with `promtool tsdb create-blocks-from openmetrics` into a temporary directory, then
  served by a real Prometheus started from here on loopback (its own TSDB, no scraping).
- The run: `uwsgitune recommend --prometheus URL --selector 'bench="1",group=~"..."'
  --range 24h --step 60s --json` as a subprocess, for the first N instances (groups of 100):
  its wall time, and its peak RSS (`ru_maxrss` of the child, from wait4; since it judges in
  processes of its own, the larger of that and the peak of its process tree's summed RSS,
  sampled every 50 ms) and CPU (the child's, plus each judging process's when last seen).
  Prometheus's own
  time is inside the wall time (it answers the queries); its RSS is not in the figure.
- Checks: every instance is observed, and the JSON's fleet counts match what was generated
  (over- and under-provisioned instances): a fast wrong answer is not a result.
- Targets (issue 40): 1,000 instances over 24 h at a 1-minute step in under 60 s, with
  bounded memory: peak RSS that does not grow with N (the batches bound it), read here as
  RSS at the largest N within 1.5x of RSS at 100. A miss is reported as a miss.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import psutil  # noqa: E402

from uwsgitune.launch import free_port  # noqa: E402

UWSGITUNE = str(Path(sys.executable).parent / "uwsgitune")
STEP = 60
SPAN = 24 * 3600 + 600
TARGET_SECONDS = 60.0
RSS_GROWTH_MAX = 1.5
MIB = 1024 * 1024


@dataclass(frozen=True)
class Plan:
    """One generated instance."""

    index: int
    kind: str  # "idle", "short" or "normal"
    workers: int
    peak_rps: float
    rt: float  # seconds per request
    reload_at: int | None  # the step of its reload, if any

    @property
    def group(self) -> str:
        return f"g{self.index // 100}"


def plans(n: int, workers: int) -> list[Plan]:
    rnd = random.Random(40)
    out = []
    for i in range(n):
        kind = "idle" if i % 10 == 3 else "short" if i % 10 == 7 else "normal"
        rt = rnd.uniform(0.02, 0.08)
        # idle: peak ~5% of capacity; short: demand 1.2-1.4x capacity all day; normal: ~70%
        share = {"idle": 0.05, "short": 1.4, "normal": 0.7}[kind]
        peak = share * workers / rt
        reload_at = rnd.randrange(200, 1300) if i % 20 == 11 else None
        out.append(Plan(i, kind, workers, peak, rt, reload_at))
    return out


def _curve(step: int, steps: int) -> float:
    """The daily load curve, 0.25 at night to 1 at the peak."""
    return 0.625 - 0.375 * math.cos(2 * math.pi * step / steps)


BLOCK = 2 * 3600  # promtool's block range: it writes blocks aligned to 2 h


class Writer:
    """OpenMetrics files, one per 2-hour block range of promtool (`{path}.{k}`): promtool
    parses its whole input once per block range it spans, so one file per range is parsed
    once instead of 13 times (the same blocks, a tenth of the time)."""

    def __init__(self, path: Path, times: list[int]) -> None:
        windows = sorted({t // BLOCK for t in times})
        self.files = [Path(f"{path}.{k}") for k in range(len(windows))]
        self.fs = [f.open("w", buffering=1 << 20) for f in self.files]
        index = {wnd: k for k, wnd in enumerate(windows)}
        # (file, first step, last step + 1) of each window, in time order
        self.slices: list[tuple[Any, int, int]] = []
        for k, f in enumerate(self.fs):
            steps = [i for i, t in enumerate(times) if index[t // BLOCK] == k]
            self.slices.append((f, steps[0], steps[-1] + 1))

    def family(self, name: str, kind: str) -> None:
        for f in self.fs:
            f.write(f"# TYPE {name} {kind}\n")

    def series(self, lines: list[str]) -> None:
        """One series' lines, one a step: each to its block range's file."""
        for f, a, b in self.slices:
            f.write("".join(lines[a:b]))

    def close(self) -> list[Path]:
        for f in self.fs:
            f.write("# EOF\n")
            f.close()
        return self.files


def generate(path: Path, fleet: list[Plan], end: int) -> tuple[list[Path], int]:
    """OpenMetrics for the fleet (a file per block range, `Writer`); returns the files and
    the number of samples. A family's samples are contiguous, each series' in time order,
    as OpenMetrics wants."""
    steps = SPAN // STEP
    times = [end - SPAN + (k + 1) * STEP for k in range(steps)]
    w = Writer(path, times)
    samples = 0

    def labels(p: Plan, **extra: str) -> str:
        base = {
            "bench": "1",
            "group": p.group,
            "job": "uwsgitune",
            "instance": f"10.0.{p.index // 250}.{p.index % 250}:9117",
            "stats_uri": f"unix:///run/uwsgi/app{p.index}.sock",
            **extra,
        }
        return "{" + ",".join(f'{k}="{v}"' for k, v in base.items()) + "}"

    def state(p: Plan) -> list[tuple[float, float, float]]:
        """(demand in service L, queue, cpu cores) per step."""
        out = []
        for k in range(steps):
            curve = _curve(k, steps)
            if p.kind == "short":  # short of workers all day, not only at the peak
                curve = 0.85 + 0.15 * curve
            demand = p.peak_rps * curve * p.rt  # requests in service wanted
            busy = min(demand, p.workers)
            queue = 0.0 if demand <= p.workers else min((demand - p.workers) * 40, 100.0)
            out.append((busy, queue, busy * 0.3))
        return out

    states = {p.index: state(p) for p in fleet}

    def counters(p: Plan, per_step: list[float]) -> list[float]:
        total, out = 0.0, []
        for k, x in enumerate(per_step):
            total = 0.0 if p.reload_at == k else total + x
            out.append(total)
        return out

    def emit(name: str, label_text: str, values: list[float], digits: int = 6) -> list[float]:
        """Writes the series; returns its values as written (rounded to `digits`)."""
        nonlocal samples
        texts = [f"{v:.{digits}g}" for v in values]
        lines = [f"{name}{label_text} {v} {t}\n" for t, v in zip(times, texts, strict=True)]
        w.series(lines)
        samples += len(lines)
        return [float(v) for v in texts]

    # the daemon's per-instance sums of the per-worker families (`uwsgitune_worker_sum_*`,
    # exporter/metrics.py `add_fleet_inputs`): the sums of the values written per worker
    sums: dict[str, dict[int, list[float]]] = {}

    def add_up(family: str, p: Plan, values: list[float]) -> None:
        mine = sums.setdefault(family, {})
        got = mine.get(p.index)
        mine[p.index] = values if got is None else [a + b for a, b in zip(got, values, strict=True)]

    per_worker = {
        "uwsgi_worker_requests": (
            "counter",
            "_total",
            lambda p, s: [b / p.rt * STEP / p.workers for b, _, _ in s],
        ),
        "uwsgi_worker_exceptions": ("counter", "_total", lambda p, s: [0.0 for _ in s]),
        "uwsgi_worker_running_time_seconds": (
            "counter",
            "",
            lambda p, s: [b * STEP / p.workers for b, _, _ in s],
        ),
        "uwsgi_worker_harakiri_count": ("counter", "_total", lambda p, s: [0.0 for _ in s]),
        "uwsgi_worker_respawn_count": ("counter", "_total", None),
        "uwsgi_worker_busy": ("gauge", "", None),
        "uwsgi_worker_idle": ("gauge", "", None),
        "uwsgi_worker_cheap": ("gauge", "", None),
        "uwsgi_worker_cores": ("gauge", "", None),
        "uwsgi_worker_rss_bytes": ("gauge", "", None),
    }
    for family, (kind, suffix, step_fn) in per_worker.items():
        w.family(family, kind)
        for p in fleet:
            s = states[p.index]
            for wid in range(1, p.workers + 1):
                lt = labels(p, worker_id=str(wid))
                if step_fn is not None:
                    values = counters(p, step_fn(p, s))
                elif family.endswith("respawn_count"):
                    values = [1.0] * steps
                elif family.endswith("busy"):
                    values = [1.0 if b >= wid - 0.5 else 0.0 for b, _, _ in s]
                elif family.endswith("idle"):
                    values = [0.0 if b >= wid - 0.5 else 1.0 for b, _, _ in s]
                elif family.endswith("cheap"):
                    values = [0.0] * steps
                elif family.endswith("cores"):
                    values = [1.0] * steps
                else:
                    values = [float(60 * MIB + wid * MIB)] * steps
                add_up(family, p, emit(family + suffix, lt, values))
                if family.endswith("rss_bytes"):
                    add_up("rss_reporting", p, [float(v > 0) for v in values])
    summed = {
        "uwsgi_worker_requests": ("counter", "requests_total"),
        "uwsgi_worker_exceptions": ("counter", "exceptions_total"),
        "uwsgi_worker_running_time_seconds": ("counter", "running_time_seconds_total"),
        "uwsgi_worker_harakiri_count": ("counter", "harakiri_total"),
        "uwsgi_worker_respawn_count": ("counter", "spawns_total"),
        "uwsgi_worker_busy": ("gauge", "busy"),
        "uwsgi_worker_cheap": ("gauge", "cheap"),
        "uwsgi_worker_rss_bytes": ("gauge", "rss_bytes"),
        "rss_reporting": ("gauge", ""),
    }
    for family, (kind, name) in summed.items():
        full = f"uwsgitune_worker_sum_{name}" if name else "uwsgitune_worker_rss_reporting"
        w.family(full.removesuffix("_total"), kind)
        for p in fleet:
            emit(full, labels(p), sums[family][p.index], digits=12)
    sums.clear()
    per_instance: dict[str, tuple[str, object]] = {
        "uwsgi_up": ("gauge", 1.0),
        "uwsgi_signal_queue_length": ("gauge", 0.0),
        "uwsgitune_instance_cpu_cores": ("gauge", "cpu"),
        "uwsgitune_host_cpu_ratio": ("gauge", "host"),
        "uwsgitune_effective_cpus": ("gauge", 8.0),
        "uwsgitune_host_cpus": ("gauge", 8.0),
        "uwsgitune_memory_available_bytes": ("gauge", float(8192 * MIB)),
        "uwsgitune_memory_limit_bytes": ("gauge", float(16384 * MIB)),
        "uwsgitune_somaxconn": ("gauge", 4096.0),
        "uwsgitune_reloads_seen": ("counter", "reloads"),
        "uwsgitune_host_listen_overflows": ("counter", 0.0),
        "uwsgitune_worker_slots": ("gauge", "workers"),
        "uwsgitune_worker_max_cores": ("gauge", 1.0),
        "uwsgitune_runq_cores": ("gauge", "runq"),
        "uwsgitune_host_nice_ratio": ("gauge", 0.02),
    }
    for family, (kind, what) in per_instance.items():
        w.family(family, kind)
        name = family + ("_total" if kind == "counter" else "")
        for p in fleet:
            s = states[p.index]
            if what == "cpu":
                values = [c for _, _, c in s]
            elif what == "host":
                values = [min(c / 8 + 0.1, 1.0) for _, _, c in s]
            elif what == "runq":  # a twentieth of the CPU time waits for a CPU
                values = [c * 0.05 for _, _, c in s]
            elif what == "workers":
                values = [float(p.workers)] * steps
            elif what == "reloads":
                values = [float(p.reload_at is not None and k >= p.reload_at) for k in range(steps)]
            else:
                values = [float(what)] * steps  # type: ignore[arg-type]
            emit(name, labels(p), values)
    for family, field in (("uwsgitune_socket_queue_length", 1), ("uwsgitune_socket_backlog", None)):
        w.family(family, "gauge")
        for p in fleet:
            lt = labels(p, name=f"/run/uwsgi/app{p.index}.http", proto="uwsgi", source="kernel")
            values = [s[1] if field else 100.0 for s in states[p.index]]
            emit(family, lt, values)
    return w.close(), samples


def backfill(texts: list[Path], tsdb: Path) -> float:
    t0 = time.monotonic()
    for text in texts:
        subprocess.run(
            ["promtool", "tsdb", "create-blocks-from", "openmetrics", str(text), str(tsdb)],
            check=True,
            stdout=subprocess.DEVNULL,
        )
    return time.monotonic() - t0


def start_prometheus(tsdb: Path, workdir: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    cfg = workdir / "prometheus.yml"
    cfg.write_text("global:\n  scrape_interval: 1h\nscrape_configs: []\n")
    argv = [
        "prometheus",
        f"--config.file={cfg}",
        f"--web.listen-address=127.0.0.1:{port}",
        f"--storage.tsdb.path={tsdb}",
        "--storage.tsdb.retention.time=30d",
        "--log.level=warn",
    ]
    log = (workdir / "prometheus.log").open("wb")
    proc = subprocess.Popen(argv, stdout=log, stderr=log)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{url}/-/ready", timeout=2) as r:
                if r.status == 200:
                    return proc, url
        except OSError:
            time.sleep(0.5)
    proc.send_signal(signal.SIGTERM)
    raise SystemExit("Prometheus did not become ready; see " + str(workdir / "prometheus.log"))


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process (Prometheus), from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class TreeSampler(threading.Thread):
    """The command's process tree, sampled every `every` s while it runs: the peak of the
    sum of its processes' RSS (shared pages counted in each: an upper bound), and each
    descendant's own CPU seconds when last seen. `recommend --prometheus` judges in
    processes started from a fork server, which this process does not reap, so wait4's
    figures hold the command's own process only; a descendant's CPU after its last sample
    (at most `every` s each) is not counted."""

    def __init__(self, pid: int, every: float = 0.05) -> None:
        super().__init__(daemon=True)
        self.pid, self.every = pid, every
        self.peak_rss = 0
        self._cpu: dict[int, float] = {}
        self._done = threading.Event()

    def run(self) -> None:
        try:
            root = psutil.Process(self.pid)
        except psutil.Error:
            return
        while not self._done.is_set():
            try:
                procs = [root, *root.children(recursive=True)]
            except psutil.Error:
                return
            total = 0
            for p in procs:
                try:
                    with p.oneshot():
                        total += p.memory_info().rss
                        t = p.cpu_times()
                except psutil.Error:
                    continue
                if p.pid != self.pid:
                    self._cpu[p.pid] = t.user + t.system
            self.peak_rss = max(self.peak_rss, total)
            self._done.wait(self.every)

    def stop(self) -> None:
        self._done.set()
        self.join()

    def descendants_cpu(self) -> float:
        return sum(self._cpu.values())


@dataclass(frozen=True)
class Run:
    n: int
    seconds: float
    rss_mib: float
    cpu: float  # the command's CPU seconds
    prom_cpu: float  # Prometheus's CPU seconds meanwhile
    load: float  # the host's 1-minute load average after the run
    observed: int
    over: int
    under: int
    expected_over: int
    expected_under: int
    exit: int


def measure(url: str, n: int, fleet: list[Plan], end: int, prom_pid: int) -> Run:
    groups = "|".join(f"g{g}" for g in range(math.ceil(n / 100)))
    argv = [UWSGITUNE, "recommend", "--prometheus", url, "--selector"]
    argv += [f'bench="1",group=~"{groups}"', "--range", "24h", "--step", "60s"]
    argv += ["--end", str(end), "--json", "--prometheus-timeout", "120s"]
    with tempfile.TemporaryFile() as out_f, tempfile.TemporaryFile() as err_f:
        prom0 = cpu_seconds(prom_pid)
        t0 = time.monotonic()
        proc = subprocess.Popen(argv, stdout=out_f, stderr=err_f)
        tree = TreeSampler(proc.pid)
        tree.start()
        _, status, usage = os.wait4(proc.pid, 0)  # reaped here: its own peak RSS
        seconds = time.monotonic() - t0
        tree.stop()
        prom = cpu_seconds(prom_pid) - prom0
        proc.returncode = os.waitstatus_to_exitcode(status)
        out_f.seek(0)
        err_f.seek(0)
        out, err = out_f.read(), err_f.read()
    rss = max(usage.ru_maxrss / 1024, tree.peak_rss / MIB)
    if not out:
        raise SystemExit(f"recommend failed at N={n}: {err.decode()[-500:]}")
    doc = json.loads(out)
    mine = fleet[:n]
    return Run(
        n,
        seconds,
        rss,
        usage.ru_utime + usage.ru_stime + tree.descendants_cpu(),
        prom,
        os.getloadavg()[0],
        sum(1 for i in doc["instances"] if i["observed"]),
        doc["fleet"]["over"],
        doc["fleet"]["under"],
        sum(1 for p in mine if p.kind == "idle"),
        sum(1 for p in mine if p.kind == "short"),
        proc.returncode,
    )


def commit() -> str:
    out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    dirty = subprocess.run(
        ["git", "status", "--porcelain", "uwsgitune"], capture_output=True, text=True
    )
    return out.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")


def ensure_series(
    tsdb: Path, fleet: list[Plan], workers: int, chunk: int, workdir: Path
) -> tuple[str, int]:
    """The fleet's series in `tsdb`, backfilled `chunk` instances at a time (promtool holds a
    file's samples in memory; Prometheus merges the overlapping blocks). A kept TSDB that
    holds the first instances already is extended. Returns (how it was made, the end)."""
    meta_path = tsdb / "bench.json"
    tsdb.mkdir(parents=True, exist_ok=True)
    meta = json.loads(meta_path.read_text()) if meta_path.exists() else {}
    if "instances" not in meta:
        meta = {
            "end": meta.get("end", (int(time.time()) // STEP) * STEP - 600),
            "instances": 0,
            "samples": 0,
            "mib": 0.0,
            "generate_s": 0.0,
            "backfill_s": 0.0,
        }
    while meta["instances"] < len(fleet):
        part = fleet[meta["instances"] : meta["instances"] + chunk]
        text = workdir / "fleet.om"
        t0 = time.monotonic()
        texts, samples = generate(text, part, meta["end"])
        meta["samples"] += samples
        meta["generate_s"] += time.monotonic() - t0
        meta["mib"] += sum(t.stat().st_size for t in texts) / MIB
        meta["backfill_s"] += backfill(texts, tsdb)
        for t in texts:
            t.unlink()
        meta["instances"] += len(part)
        meta_path.write_text(json.dumps(meta))
        print(f"backfilled {meta['instances']} instances", flush=True)
    note = (
        f"{meta['instances']} instances x {workers} workers, {meta['samples']:,} samples "
        f"({meta['mib']:,.0f} MiB of OpenMetrics, generated in {meta['generate_s']:.0f} s, "
        f"backfilled in {meta['backfill_s']:.0f} s)"
    )
    return note, int(meta["end"])


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--instances", default="100,200,400")
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--keep", type=Path, help="keep the TSDB here (reused when present)")
    ap.add_argument("--write", type=Path)
    ap.add_argument("--chunk", type=int, default=200, help="instances backfilled at a time")
    ap.add_argument("--backfill-only", action="store_true", help="make the series, measure none")
    args = ap.parse_args()
    sizes = [int(x) for x in args.instances.split(",")]
    fleet = plans(max(sizes), args.workers)
    workdir = Path(tempfile.mkdtemp(prefix="uwtbench-", dir="/tmp"))
    tsdb = args.keep or workdir / "tsdb"
    gen_note, end = ensure_series(tsdb, fleet, args.workers, args.chunk, workdir)
    print(gen_note, flush=True)
    if args.backfill_only:
        shutil.rmtree(workdir, ignore_errors=True)
        return 0
    proc, url = start_prometheus(tsdb, workdir)
    runs = []
    try:
        for n in sizes:
            run = measure(url, n, fleet, end, proc.pid)
            runs.append(run)
            print(run, flush=True)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
        shutil.rmtree(workdir, ignore_errors=True)  # a kept TSDB is elsewhere (--keep)
    report = render(runs, gen_note, args.workers)
    print(report)
    if args.write:
        args.write.write_text(report)
    return 0


def render(runs: list[Run], gen_note: str, workers: int) -> str:
    lines = [
        "| instances | wall time | peak RSS | CPU: uwsgitune | CPU: Prometheus | load avg "
        "| observed | over (expected) | under (expected) | exit |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in runs:
        lines.append(
            f"| {r.n} | {r.seconds:.1f} s | {r.rss_mib:.0f} MiB | {r.cpu:.1f} s | "
            f"{r.prom_cpu:.1f} s | {r.load:.1f} | {r.observed} | "
            f"{r.over} ({r.expected_over}) | {r.under} ({r.expected_under}) | {r.exit} |"
        )
    return f"commit {commit()}; series: {gen_note}\n\n" + "\n".join(lines) + "\n"


if __name__ == "__main__":
    raise SystemExit(main())
