"""Issue 38, cost: can any way uWSGI 2.0 writes a request line keep the trivial route's loss
under 5%? A probe beside bench/latency_overhead.py (part C is the verdict; this is not).

    .venv/bin/python bench/latency_emitters.py [--rounds 6] [--wrk-seconds 5]

Definitions (written before the first run, 2026-11-28 07:20 UTC):
- Instances of bench/latency_rig.py's ini (4 workers, `/hello` of bench/latency_app.py on
  the kept-alive `http11-socket`), loaded in turn by wrk (1 thread, 4 connections,
  `--wrk-seconds` each), in `--rounds` interleaved rounds whose order rotates, as in
  latency_overhead.py's parts B and C:
  - `off`: `disable-logging = true`;
  - `udp relay`: the doctor's lines (`req-logger = socket:...`, its `log-format`), nobody
    reading the port: each line goes through the master (its `sendmsg`);
  - `file, workers write`: `logto` a file with the doctor's `log-format`, no request logger:
    each worker writes its own lines to the file (no master in the path: the cheapest way
    uWSGI 2.0 has to emit the lines uwsgitune reads);
  - `file, default format`: `logto` a file with uWSGI's own default line (what an instance
    that logs requests at all pays already).
- Reported: each instance's mean requests/s, the loss against `off`, and the difference's
  95% interval (Welch), with the master's and the workers' CPU per request. No verdict.
The files written are removed with the instances.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
from pathlib import Path
from typing import Any

from latency_overhead import load_round, welch
from latency_rig import commit, machine, options, url, wrk

from uwsgitune.core.logline import log_format
from uwsgitune.launch import IniValue, UwsgiProcess, free_port


def instance(base: Path, name: str, *, logger_port: int | None = None, **extra: IniValue) -> Any:
    workdir = base / name
    workdir.mkdir()
    opts = options(workdir, logger_port=logger_port)
    if "logto" in extra:
        opts.pop("disable-logging", None)
    opts.update(extra)
    return UwsgiProcess(workdir, opts).start()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--wrk-seconds", type=float, default=5.0)
    args = ap.parse_args()
    base = Path(tempfile.mkdtemp(prefix="uwt-emit-", dir="/tmp"))
    procs = {
        "off": instance(base, "off"),
        "udp relay": instance(base, "udp", logger_port=free_port()),
        "file, workers write": instance(
            base, "file", logto=str(base / "req.log"), **{"log-format": log_format(None)}
        ),
        "file, default format": instance(base, "filedef", logto=str(base / "req2.log")),
    }
    names = list(procs)
    rows: dict[str, list[dict[str, float]]] = {k: [] for k in names}
    try:
        for proc in procs.values():
            wrk(url(proc, "/hello"), 2, 4)  # warm-up
        for i in range(args.rounds):
            for name in names[i % len(names) :] + names[: i % len(names)]:
                rows[name].append(load_round(procs[name], args.wrk_seconds))
                print(f"{name} {i + 1}: {rows[name][-1]}", flush=True)
    finally:
        for proc in procs.values():
            proc.stop()
        shutil.rmtree(base, ignore_errors=True)
    off = [r["rps"] for r in rows["off"]]
    print(f"\nCommit {commit()}; {machine()}\n")
    print(
        "| instance | requests/s | loss vs off | difference, 95% interval "
        "| master µs/req | workers µs/req |"
    )
    print("|---|---|---|---|---|---|")
    for name in names:
        rps = [r["rps"] for r in rows[name]]
        diff, half = welch(rps, off) if name != "off" else (0.0, 0.0)
        loss = 1 - statistics.mean(rps) / statistics.mean(off)
        master = statistics.mean(r["master_us"] for r in rows[name])
        workers = statistics.mean(r["workers_us"] for r in rows[name])
        print(
            f"| {name} | {statistics.mean(rps):.0f} | {loss:.1%} | {diff:+.0f} ± {half:.0f} | "
            f"{master:.1f} | {workers:.1f} |"
        )


if __name__ == "__main__":
    main()
