"""How long the rules engine takes on a 10-minute window at 1 s for 64 workers.

    .venv/bin/python bench/rules_bench.py [--runs N]

Target: < 10 ms per evaluation. The frames are synthetic but complete (64 workers x 2
threads each with CPU and RSS, a TCP socket, host facts), built so that every rule runs its
full path, including the per-worker loops, and several fire.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.support.frames import MIB, frame, tcp
from uwsgitune.core.frame import Frame
from uwsgitune.rules import ConfigFacts, Facts, evaluate
from uwsgitune.rules.rulesettings import RuleSettings

SECONDS, WORKERS = 600, 64


def window() -> list[Frame]:
    frames = []
    for i in range(SECONDS):
        busy = i % 30 < 10
        f = frame(
            i,
            live=WORKERS,
            threads=2,
            busy_ratio=0.95 if busy else 0.4,
            littles_l=120.0 if busy else 50.0,
            sockets=(tcp(1000 if busy else 0, 1024),),
            mem_per_worker=(60 + i // 60) * MIB,
            mem_total_rss=WORKERS * 60 * MIB,
            static_share=0.1,
            eps=1.0,
            worker={"cpu_pct": 70.0 + (i % 40), "busy_pct": 90.0, "rss": 60 * MIB},
        )
        frames.append(replace(f, signal_queue=i % 3))
    return frames


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=100)
    args = parser.parse_args()
    frames = window()
    facts = Facts(ConfigFacts(cheaper=0, cheaper_algo=None), stats_kind="unix")
    # every rule judges all 600 s (as `recommend --window 600` does)
    whole = RuleSettings(window_seconds=600, idle_window_seconds=600, memory_window_seconds=600)
    findings, state = evaluate(frames, facts)
    default, stepped, full = [], [], []
    for _ in range(args.runs):
        t0 = time.perf_counter()
        evaluate(frames, facts)
        t1 = time.perf_counter()
        _, state = evaluate(frames, facts, state=state)
        t2 = time.perf_counter()
        evaluate(frames, facts, whole)
        t3 = time.perf_counter()
        default.append((t1 - t0) * 1000)
        stepped.append((t2 - t1) * 1000)
        full.append((t3 - t2) * 1000)
    cases = (("default look-backs", default), ("with state", stepped), ("600 s look-backs", full))
    for name, data in cases:
        data.sort()
        p95 = data[min(len(data) - 1, int(len(data) * 0.95))]
        med = statistics.median(data)
        print(f"{name:>18}: median {med:.2f} ms  p95 {p95:.2f} ms  (n={len(data)})")
    print(
        f"{len(frames)} frames x {WORKERS} workers; findings: {', '.join(f.id for f in findings)}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
