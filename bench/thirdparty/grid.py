"""The third-party app's static grid, what each page costs, and one tuner run from 64.

Definitions, fixed before the runs (also written at the top of bench/results/thirdparty.md):

- The app: Django's own admin and a generic ListView over a PostgreSQL cluster the bench
  starts (bench/thirdparty); 50,000 orders, 2,000 customers, 500 products, a fixed dataset.
  - `django-cpu`: the admin's change list of orders, logged in (a session cookie made at
    setup, sent with every request).
  - `django-io`: the top-customers report, a generic ListView over a join and an aggregate.
- The split (`profile`): one worker (`processes = 1`), one client, PROFILE_S seconds. Per
  request, from /proc/PID/task/*/schedstat before and after: the wall time (the client's
  mean latency); the uWSGI worker's time on a CPU and runnable waiting for one (the machine
  is shared: its other load shows here, not as the page's cost); the worker's blocked rest
  (wall − both: waiting on the database's answer); PostgreSQL's processes' CPU.
  CPU-heavy: the worker is runnable ≥ 80% of the wall and its CPU is ≥ 5× the database's.
  IO-heavy: the worker is blocked ≥ 2/3 of the wall. Else mixed.
- The grid: `processes = N` for N in GRID, static, each GRID_S seconds measured after WARMUP_S
  seconds of the same load unmeasured, in ROUNDS rounds run in turn (1 2 … 16 16 … 2 1: a
  drift of the shared machine's load that is linear in time meets every count alike; a
  count's figure is the mean of its rounds); the load: uwsgitune's loadgen, closed loop, CLIENTS
  clients, one connection per request (as tuner_bench), loopback, at most MAX_REQUESTS, its
  thread LOADGEN_NICE below the bench (as tuner_bench: the generator shares the 2 CPUs). A
  run counts only if every response is 200 (a lost session would be fast 302s). Throughput =
  200s / s; p99 over the measured window. The best count: the highest throughput; also the fewest
  workers within 95% of it (the issue's live-worker target: ≤ max(1.5 × that, that + 2)).
- The tuner (`tune`, django-cpu only): `uwsgitune tune --mode apply` from 64 live workers
  (`processes = 64`, `cheaper = 2`, `cheaper-initial = 64`, `cheaper-algo = manual`, the
  override ini included last), the same load for TUNE_S seconds. The tuner runs, and has
  made its first poll (its first line out), before the load begins, as the daemon beside
  uWSGI does; the clock starts with the load. (Changed 2026-11-27 after the run at 9e31e0f,
  which started the tuner with the load: its start took 25 s of the 40 s to its first move,
  its imports starved by 64 busy workers on 2 CPUs with the kernel's autogroups off.)
  Where it settles = the live
  count over the last SETTLE_S seconds; its throughput there (requests finished in those
  seconds / SETTLE_S), against the grid's best mean and against a reference: the grid's best
  count, static, run (as a grid point) just before and just after the tuner.

    .venv/bin/python bench/thirdparty/grid.py [--pages django-cpu,django-io]
        [--parts profile,grid,tune] [--out bench/results/thirdparty.json]

Needs `apt-get install -y postgresql` and `pip install -e '.[bench]'`. Uses the 2 CPUs. On a
shared machine, nice does little here: the kernel's autogroups share the CPUs per session
first (uWSGI and PostgreSQL each start their own), so the pool gets one group's share,
whatever its size, and the grid measures the app on what is left; the CPU each got is in
the table. Each run records the load average before it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import psutil

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from tests.uwsgi_harness import url, uwsgi_instance  # noqa: E402
from thirdparty import CPU_PATH, IO_PATH, Database, database, missing  # noqa: E402
from uwsgitune.launch import UwsgiProcess  # noqa: E402
from uwsgitune.loadgen import LoadResult, LoadRun  # noqa: E402

PAGES = {"django-cpu": CPU_PATH, "django-io": IO_PATH}
GRID = (1, 2, 3, 4, 6, 8, 16)
CLIENTS = 64
WARMUP_S = 5.0
GRID_S = 20.0
ROUNDS = 2
PROFILE_S = 15.0
TUNE_S = 120.0
SETTLE_S = 40.0
MAX_REQUESTS = 100_000
LOADGEN_NICE = -10  # below the bench's own nice (os.nice(0) at the start), at most -20
OUT = ROOT / "bench" / "results" / "thirdparty.json"
REPORT = ROOT / "bench" / "results" / "thirdparty.md"


def _commit() -> str:
    out = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    )
    dirty = subprocess.run(
        # the results this script writes are not its code
        [
            "git",
            "-C",
            str(ROOT),
            "status",
            "--porcelain",
            "--untracked-files=no",
            "--",
            ".",
            ":!bench/results",
        ],
        capture_output=True,
        text=True,
    ).stdout.strip()
    return out.stdout.strip() + ("+dirty" if dirty else "")


def _load(
    u: str, db: Database, clients: int, seconds: float, max_requests: int = MAX_REQUESTS
) -> LoadResult:
    run = LoadRun(u, duration=seconds, max_requests=max_requests, timeout=30, headers=db.headers)
    base = os.getpriority(os.PRIO_PROCESS, 0)
    os.setpriority(os.PRIO_PROCESS, 0, max(-20, base + LOADGEN_NICE))
    try:
        return asyncio.run(run.closed_loop(clients))
    finally:
        os.setpriority(os.PRIO_PROCESS, 0, base)  # uWSGI started later inherits the base


def _sched(procs: list[psutil.Process]) -> tuple[float, float]:
    """Seconds on a CPU and seconds runnable but waiting for one, summed over the processes'
    threads (/proc/PID/task/TID/schedstat: ns on CPU, ns on the run queue, timeslices)."""
    on = wait = 0
    for p in procs:
        for task in Path(f"/proc/{p.pid}/task").glob("*"):
            try:
                a, b, _ = (task / "schedstat").read_text().split()
            except (OSError, ValueError):
                continue
            on, wait = on + int(a), wait + int(b)
    return on / 1e9, wait / 1e9


def _tree(pid: int) -> list[psutil.Process]:
    root = psutil.Process(pid)
    return [root, *root.children(recursive=True)]


def _summary(r: LoadResult) -> dict[str, Any]:
    return {
        "rps": round(r.throughput, 2),
        "ok": r.ok,
        "statuses": {str(k): v for k, v in r.statuses.items()},
        "errors": r.error_kinds,
        "p50_ms": round((r.percentile(50) or 0) * 1000, 1),
        "p99_ms": round((r.percentile(99) or 0) * 1000, 1),
    }


def profile(db: Database, path: str) -> dict[str, Any]:
    with uwsgi_instance(**db.uwsgi, processes=1) as proc:
        u = url(proc, path)
        _load(u, db, 1, 3.0)  # warm: the worker's connection, Django's caches
        workers = [p for p in _tree(proc.pid) if p.pid != proc.pid]
        pgs = _tree(db.cluster.pid)  # the backend that serves the worker is kept (CONN_MAX_AGE)
        w0, g0 = _sched(workers), _sched(pgs)
        r = _load(u, db, 1, PROFILE_S)
        w1, g1 = _sched(workers), _sched(_tree(db.cluster.pid))
    n = max(r.ok, 1)
    ms = 1000 / n
    wall = sum(r.latencies) * ms
    cpu, runq = (w1[0] - w0[0]) * ms, (w1[1] - w0[1]) * ms
    out = {
        **_summary(r),
        "wall_ms": round(wall, 1),
        "worker_cpu_ms": round(cpu, 1),
        "worker_runq_ms": round(runq, 1),  # runnable, waiting for a CPU (a shared machine)
        "worker_blocked_ms": round(wall - cpu - runq, 1),  # neither: waiting on the database
        "db_cpu_ms": round((g1[0] - g0[0]) * ms, 1),
        "db_runq_ms": round((g1[1] - g0[1]) * ms, 1),
    }
    out["worker_runnable_share"] = round((cpu + runq) / max(wall, 1e-9), 2)
    out["worker_blocked_share"] = round(1 - out["worker_runnable_share"], 2)
    out["verdict"] = (
        "CPU-heavy"
        if out["worker_runnable_share"] >= 0.8 and cpu >= 5 * out["db_cpu_ms"]
        else "IO-heavy"
        if out["worker_blocked_share"] >= 2 / 3
        else "mixed"
    )
    return out


def grid_point(db: Database, path: str, n: int) -> dict[str, Any]:
    load = os.getloadavg()
    with uwsgi_instance(**db.uwsgi, processes=n, listen=128) as proc:
        u = url(proc, path)
        _load(u, db, CLIENTS, WARMUP_S)
        app, pgs = _tree(proc.pid), _tree(db.cluster.pid)
        a0, g0 = _sched(app), _sched(pgs)
        r = _load(u, db, CLIENTS, GRID_S)
        a1, g1 = _sched(app), _sched(_tree(db.cluster.pid))
    n_ok = max(r.ok, 1)
    return {
        "processes": n,
        "loadavg": [round(x, 2) for x in load],
        **_summary(r),
        # the CPU the pool and the database got, in CPUs (of 2), and each one's CPU a request
        "app_cpus": round((a1[0] - a0[0]) / r.elapsed, 2),
        "db_cpus": round((g1[0] - g0[0]) / r.elapsed, 2),
        "app_cpu_ms": round((a1[0] - a0[0]) / n_ok * 1000, 1),
        "db_cpu_ms": round((g1[0] - g0[0]) / n_ok * 1000, 1),
    }


def _stats(path: str) -> dict[str, Any]:
    with socket.socket(socket.AF_UNIX) as s:
        s.settimeout(2)
        s.connect(path)
        chunks = []
        while data := s.recv(65536):
            chunks.append(data)
    result: dict[str, Any] = json.loads(b"".join(chunks))
    return result


def _live(proc: UwsgiProcess) -> int | None:
    try:
        workers = _stats(proc.stats)["workers"]
    except (OSError, ValueError, KeyError):
        return None
    return sum(1 for w in workers if w.get("pid") and w.get("status") != "cheap")


def tune(db: Database, path: str, top: int = 64) -> dict[str, Any]:
    load = os.getloadavg()
    work = Path(f"/tmp/uwt-tp-tune-{os.getpid()}")
    work.mkdir(exist_ok=True)
    override, audit = work / "override.ini", work / "audit.jsonl"
    override.write_text("[uwsgi]\n")
    audit.unlink(missing_ok=True)
    opts = {
        **db.uwsgi,
        "listen": 128,
        "processes": top,
        "cheaper": 2,
        "cheaper-initial": top,
        "cheaper-algo": "manual",
        "ini": str(override),
    }
    live: list[tuple[float, int]] = []
    with uwsgi_instance(**opts) as proc:
        tuner = subprocess.Popen(
            [
                str(Path(sys.executable).parent / "uwsgitune"),
                "tune",
                proc.stats,
                "--fifo",
                proc.fifo,
                "--mode",
                "apply",
                "--override",
                str(override),
                "--min-workers",
                "2",
                "--max-workers",
                str(top),
                "--audit",
                str(audit),
                "--duration",
                str(TUNE_S + 130),  # its first poll may take up to 120 s under load
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        lines: list[str] = []
        first = threading.Event()

        def read() -> None:
            assert tuner.stdout is not None
            for ln in tuner.stdout:
                lines.append(ln)
                first.set()
            first.set()

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        stop = threading.Event()
        th = None
        try:
            if not first.wait(120.0) or not lines:
                raise RuntimeError(f"the tuner made no first poll: {''.join(lines)[-500:]}")
            t0 = time.monotonic()

            def watch() -> None:
                while not stop.wait(1.0):
                    n = _live(proc)
                    if n is not None:
                        live.append((round(time.monotonic() - t0, 1), n))

            th = threading.Thread(target=watch)
            th.start()
            r = _load(url(proc, path), db, CLIENTS, TUNE_S, max_requests=1_000_000)
        finally:
            stop.set()
            if th is not None:
                th.join()
            tuner.send_signal(signal.SIGINT)  # our own child: stops as on Ctrl-C
            try:
                tuner.wait(timeout=30)
            except subprocess.TimeoutExpired:
                tuner.kill()
                tuner.wait()
            reader.join(timeout=30)
            log = "".join(lines)
    edge = r.started + TUNE_S - SETTLE_S
    tail = [x for x, end in zip(r.latencies, r.finished, strict=True) if end >= edge]
    settled = [n for t, n in live if t >= TUNE_S - SETTLE_S]
    (work / "tune.log").write_text(log)
    text = audit.read_text() if audit.exists() else ""  # no change, no intent: no file
    changes = [json.loads(line) for line in text.splitlines() if line.strip()]
    return {
        "loadavg": [round(x, 2) for x in load],
        **_summary(r),
        "settle_rps": round(len(tail) / SETTLE_S, 2),
        "settle_p99_ms": round(sorted(tail)[int(0.99 * (len(tail) - 1))] * 1000, 1) if tail else 0,
        "settled_live": sorted(set(settled)),
        "live": live,
        "changes": [c for c in changes if c.get("event") == "change"],
        "log_tail": [ln for ln in log.splitlines() if "Cookie" not in ln][-12:],
        "log_head": [ln for ln in log.splitlines() if "Cookie" not in ln][:12],
        "tuner_exit": tuner.returncode,
    }


def _means(grid: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per count, over its rounds: mean req/s and p99, each round's req/s, the worst load."""
    counts = sorted({g["processes"] for g in grid})
    out = []
    for n in counts:
        rows = [g for g in grid if g["processes"] == n]
        out.append(
            {
                "processes": n,
                "rps": sum(g["rps"] for g in rows) / len(rows),
                "rounds": [g["rps"] for g in rows],
                "p50_ms": sum(g["p50_ms"] for g in rows) / len(rows),
                "p99_ms": sum(g["p99_ms"] for g in rows) / len(rows),
                "all_200": all(set(g["statuses"]) == {"200"} and not g["errors"] for g in rows),
                "statuses": [g["statuses"] for g in rows],
                "load1": [g["loadavg"][0] for g in rows],
                "app_cpus": sum(g.get("app_cpus", 0) for g in rows) / len(rows),
                "db_cpus": sum(g.get("db_cpus", 0) for g in rows) / len(rows),
                "app_cpu_ms": sum(g.get("app_cpu_ms", 0) for g in rows) / len(rows),
                "db_cpu_ms": sum(g.get("db_cpu_ms", 0) for g in rows) / len(rows),
            }
        )
    return out


def _best(grid: list[dict[str, Any]]) -> tuple[int, int, float]:
    """The count of the highest mean throughput, the fewest within 95% of it, that rate."""
    ok = [g for g in _means(grid) if g["all_200"]]
    best = max(ok, key=lambda g: g["rps"])
    near = min(g["processes"] for g in ok if g["rps"] >= 0.95 * best["rps"])
    return best["processes"], near, best["rps"]


def report_path(out: Path) -> Path:
    """The page beside the raw file: bench/results/thirdparty.md for the default raw file,
    else the raw file's name with `.md` (a scratch run never rewrites the results page)."""
    return REPORT if out.resolve() == OUT.resolve() else out.with_suffix(".md")


def report(raw: dict[str, Any]) -> str:
    """bench/results/thirdparty.md: the definitions (this script's docstring), then the runs."""
    doc = (__doc__ or "").split("\n    .venv/bin/python")[0].strip()
    lines = ["# A real third-party app: Django's admin over PostgreSQL (issue 39)", ""]
    lines += ["Generated by `bench/thirdparty/grid.py --report` from thirdparty.json.", ""]
    lines += ["## Definitions (fixed before the runs)", "", doc, ""]
    lines += ["## Results", ""]
    lines += [f"Commit `{raw.get('commit', '?')}`. The machine is shared (2 CPUs): the load"]
    lines += ["average before each run is beside it; other sessions' work shows in it.", ""]
    for page in PAGES:
        e = raw.get(page)
        if not e:
            continue
        lines += [f"### {page}: `{e['path']}` (commit `{e.get('commit', '?')}`)", ""]
        if "profile" in e:
            p = e["profile"]
            lines += [
                "Split, one worker, one client, per request: "
                f"wall {p['wall_ms']} ms = worker on a CPU {p['worker_cpu_ms']} ms + runnable"
                f" waiting for a CPU {p['worker_runq_ms']} ms + blocked {p['worker_blocked_ms']}"
                f" ms; PostgreSQL CPU {p['db_cpu_ms']} ms (waiting for a CPU {p['db_runq_ms']}"
                f" ms). **{p['verdict']}** (runnable {p['worker_runnable_share']:.0%},"
                f" blocked {p['worker_blocked_share']:.0%}; {p['ok']} requests).",
                "",
            ]
        if e.get("grid"):
            lines += [
                "| processes | req/s (mean) | each round | p50 ms | p99 ms | CPUs got: app + db |"
                " CPU ms a request: app + db | all 200 | load avg (1 min) before each |"
            ]
            lines += ["|---:|---:|---|---:|---:|---|---|---|---|"]
            for g in _means(e["grid"]):
                rounds = ", ".join(f"{x:.1f}" for x in g["rounds"])
                loads = ", ".join(f"{x:.1f}" for x in g["load1"])
                lines += [
                    f"| {g['processes']} | {g['rps']:.1f} | {rounds} | {g['p50_ms']:.0f} | "
                    f"{g['p99_ms']:.0f} | {g['app_cpus']:.2f} + {g['db_cpus']:.2f} | "
                    f"{g['app_cpu_ms']:.0f} + {g['db_cpu_ms']:.0f} | "
                    f"{'yes' if g['all_200'] else g['statuses']} | {loads} |"
                ]
            best, near, top = _best(e["grid"])
            lines += ["", f"Best count: **{best}**; the fewest within 95% of it: **{near}**", ""]
            if "tune" in e:
                t = e["tune"]
                moves = " → ".join(
                    ["64"] + [f"{c.get('after', '?')} ({c.get('via')})" for c in t["changes"]]
                )
                refs = t.get("reference", [])
                ref = sum(r["rps"] for r in refs) / len(refs) if refs else top
                each = ", ".join(f"{r['rps']:.1f}" for r in refs)
                lines += [
                    f"Reference: static-{t.get('reference_count', best)} run just before and "
                    f"just after the tuner ({each} req/s;"
                    f" mean {ref:.1f}), the machine's drift met alike.",
                    "",
                ]
                lines += [
                    f"`uwsgitune tune --mode apply` from 64 (commit `{t.get('commit', '?')}`, "
                    f"{TUNE_S:.0f} s, load avg before "
                    f"{' '.join(f'{x:.2f}' for x in t['loadavg'])}): changes {moves or 'none'};"
                    f" live over the last {SETTLE_S:.0f} s: {t['settled_live']}; throughput "
                    f"there {t['settle_rps']:.1f} req/s = {t['settle_rps'] / top:.2f} of the "
                    f"grid's best mean, {t['settle_rps'] / ref:.2f} of the reference, "
                    f"p99 {t['settle_p99_ms']:.0f} ms.",
                    "",
                ]
    if raw.get("notes"):
        lines += ["## Notes", "", *[f"- {n}" for n in raw["notes"]], ""]
    return "\n".join(lines) + "\n"


def main() -> None:
    # SIGINT, SIGTERM and a closed terminal stop the bench as Ctrl-C does, even when started
    # in the background (SIGINT ignored there): uWSGI and PostgreSQL are stopped on the way out
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.default_int_handler)
    ap = argparse.ArgumentParser()
    ap.add_argument("--pages", default=",".join(PAGES))
    ap.add_argument("--parts", default="profile,grid,tune")
    ap.add_argument("--grid", default=",".join(map(str, GRID)))
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--report", action="store_true", help="only write thirdparty.md")
    args = ap.parse_args()
    if args.report:
        raw0 = json.loads(args.out.read_text()) if args.out.exists() else {}
        report_path(args.out).write_text(report(raw0))
        return
    why = missing()
    if why:
        raise SystemExit(f"cannot run: {why}")
    parts = args.parts.split(",")
    raw: dict[str, Any] = json.loads(args.out.read_text()) if args.out.exists() else {}
    raw["commit"] = _commit()
    with database() as db:
        for page in args.pages.split(","):
            path = PAGES[page]
            entry = raw.setdefault(page, {})
            entry["path"] = path
            if "profile" in parts:
                entry["profile"] = profile(db, path)
                print(page, "profile", entry["profile"], flush=True)
            if "grid" in parts:
                entry["grid"] = []
                counts = list(map(int, args.grid.split(",")))
                turns = [(k, n) for k in range(ROUNDS) for n in counts[:: 1 if k % 2 == 0 else -1]]
                for k, n in turns:
                    row = {"round": k + 1, **grid_point(db, path, n)}
                    entry["grid"].append(row)
                    print(page, row, flush=True)
                    args.out.write_text(json.dumps(raw, indent=1))
            if "tune" in parts and page == "django-cpu":
                best = _best(entry["grid"])[0] if entry.get("grid") else 2
                before = grid_point(db, path, best)
                t = tune(db, path)
                t["reference_count"] = best
                t["reference"] = [before, grid_point(db, path, best)]
                t["commit"] = raw["commit"]
                entry["tune"] = t
                print(page, "tune", {k: v for k, v in t.items() if k != "live"}, flush=True)
            if "grid" in parts or "profile" in parts:
                entry["commit"] = raw["commit"]
            args.out.write_text(json.dumps(raw, indent=1))
    page = report_path(args.out)
    page.write_text(report(raw))
    print(f"raw results in {args.out}, the report in {page}")


if __name__ == "__main__":
    main()
