"""`recommend --prometheus` against `recommend --replay` over the same time, on real processes.

    .venv/bin/python bench/prom_recommend_accuracy.py [--seconds 80] [--write FILE.md]

What is measured (defined before any run; issue 40, part 1, "Accuracy"):
- A real uWSGI (4 workers, listen 64) under open-loop load from this script: IO-bound
  requests (`/mixed/2/80`: 2 ms of CPU, 80 ms of waiting) at 56 req/s, more than four
  workers serve (L = 4.6), plus `/error` at 3 req/s; for `--seconds`.
- Beside it, all started here on loopback: `uwsgitune daemon` (polls every 0.5 s),
  the Go uwsgi_exporter 1.3 ($UWSGI_EXPORTER) and a real Prometheus scraping both every
  second; and `uwsgitune record` polling the same stats socket every second.
- Afterwards: `recommend --replay` of the recording, and `recommend --prometheus` over
  the recording's own span (`--end` its last poll, `--range` its length, `--step 1s`),
  once for the daemon's series (job `uwsgitune`), once for uwsgi_exporter's (job
  `exporter`).
- The criteria (issue 40): the same finding ids per instance, and every evidence number
  within 10% of the replay's. Differences are listed, each one, with the reason where known.
  Findings the exporter's series cannot judge are expected to be "unknown", not different.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.support.promstack import go_exporter, prom_stack  # noqa: E402
from tests.uwsgi_harness import url, uwsgi_instance  # noqa: E402
from uwsgitune.loadgen import run_open  # noqa: E402

UWSGITUNE = str(Path(sys.executable).parent / "uwsgitune")
TOLERANCE = 0.10


def run(*argv: str) -> dict[str, Any]:
    r = subprocess.run([UWSGITUNE, *argv, "--json"], capture_output=True, text=True, check=False)
    if not r.stdout:
        raise SystemExit(f"{' '.join(argv[:3])}: {r.stderr.strip()}")
    doc: dict[str, Any] = json.loads(r.stdout)
    return doc


def findings_of(instance: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {f["id"]: f for f in instance["findings"]}


def compare(
    replay: dict[str, dict[str, Any]], prom: dict[str, dict[str, Any]], unknown: dict[str, str]
) -> list[str]:
    """Every difference, one line each."""
    out = []
    for fid in sorted(set(replay) | set(prom)):
        rule = fid.split(".", 1)[0]
        if fid not in prom and (fid in unknown or rule in unknown):
            out.append(f"`{fid}`: unknown from these series ({unknown.get(fid) or unknown[rule]})")
            continue
        if fid not in prom or fid not in replay:
            where = "replay only" if fid in replay else "Prometheus only"
            out.append(f"`{fid}`: **{where}**")
            continue
        a, b = replay[fid]["evidence"], prom[fid]["evidence"]
        for name in sorted(set(a) | set(b)):
            va, vb = a.get(name, {}).get("value"), b.get(name, {}).get("value")
            if isinstance(va, bool) or isinstance(vb, bool) or va == vb:
                continue
            if isinstance(va, int | float) and isinstance(vb, int | float):
                rel = abs(va - vb) / max(abs(va), abs(vb), 1e-9)
                mark = "" if rel <= TOLERANCE else " **over 10%**"
                if rel > 0.001:
                    out.append(
                        f"`{fid}` {name}: replay {va:g}, Prometheus {vb:g} ({rel:.1%}){mark}"
                    )
            else:
                out.append(f"`{fid}` {name}: replay {va!r}, Prometheus {vb!r}")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--seconds", type=float, default=80.0)
    ap.add_argument("--write", type=Path)
    ap.add_argument("--keep-recording", type=Path, help="keep the recording here")
    args = ap.parse_args()
    rec = args.keep_recording or Path(f"/tmp/uwt-acc-{os.getpid()}.jsonl")
    with uwsgi_instance(processes=4, listen=64) as proc, prom_stack(proc.stats) as st:
        recorder = subprocess.Popen(
            [UWSGITUNE, "record", proc.stats, "-o", str(rec), "--interval", "1"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        time.sleep(2)
        loads = [
            threading.Thread(target=run_open, args=(url(proc, "/mixed/2/80"), 56.0, args.seconds)),
            threading.Thread(target=run_open, args=(url(proc, "/error"), 3.0, args.seconds)),
        ]
        for t in loads:
            t.start()
        for t in loads:
            t.join(args.seconds + 60)
        time.sleep(3)
        recorder.send_signal(2)
        recorder.wait(15)
        time.sleep(2)  # Prometheus's last scrapes
        polls = [json.loads(line) for line in rec.read_text().splitlines() if line.strip()]
        ts = [p["t"] for p in polls if "t" in p]
        start, end = min(ts), max(ts)
        replay = run("recommend", "--replay", str(rec))
        span = f"{int(end - start)}s"
        common = ["--prometheus", st.url, "--range", span, "--step", "1s", "--end", f"{end:.0f}"]
        prom = {
            job: run("recommend", *common, "--selector", f'job="{job}"')
            for job in ("uwsgitune", "exporter")
            if job == "uwsgitune" or go_exporter() is not None
        }
    if args.keep_recording is None:
        rec.unlink(missing_ok=True)
    (source,) = replay["instances"]
    lines = [
        f"commit {commit()}; {args.seconds:.0f} s of load, recording {end - start:.0f} s "
        f"({len(polls)} polls), Prometheus at 1 s",
        "",
        f"replay findings: {', '.join(sorted(findings_of(source)))}",
    ]
    for job, doc in prom.items():
        (inst,) = doc["instances"]
        found = findings_of(inst)
        same = sorted(found) == sorted(findings_of(source))
        lines += [
            "",
            f"### job `{job}` ({inst['source']} series): "
            f"{'same finding ids' if same else 'finding ids differ'}",
            f"findings: {', '.join(sorted(found))}; steps {inst['steps']}, "
            f"missing {inst['missing_steps']}",
            "",
        ]
        diffs = compare(findings_of(source), found, inst["unknown"])
        lines += [f"- {d}" for d in diffs] or ["- no difference above 0.1%"]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.write:
        args.write.write_text(text)
    return 0


def commit() -> str:
    out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    dirty = subprocess.run(
        ["git", "status", "--porcelain", "uwsgitune"], capture_output=True, text=True
    )
    return out.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")


if __name__ == "__main__":
    raise SystemExit(main())
