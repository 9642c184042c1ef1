"""Issue 38, cost, side by side: part A of bench/latency_overhead.py for two commits, interleaved.

    .venv/bin/python bench/latency_overhead_ab.py OLD_COMMIT [--rounds 6] [--seconds 5]

**What is measured.** Exactly part A's round (`latency_overhead.stage_round`: a `LatencyStage`
reading uWSGI-shaped lines at 10,000 lines/s from a sender process; the reader thread's CPU
and the CPU of one `view()` a second, per line recorded), run in a fresh process with the
package and bench/ of `OLD_COMMIT` (a `git worktree` made for the run, removed after) and of
this checkout, one round each in turn (the order alternating each round), `--rounds` rounds.
Reported: each round's numbers and each side's median. No threshold: part A gives the
verdict; this says how much a change moved the cost on a machine whose load moves the
absolute numbers (both sides see the same load, round by round).

Prints a markdown table (nothing written): paste it into bench/results/latency_overhead.md.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ROUND = (
    "import json, latency_overhead as L, uwsgitune; "
    "print(json.dumps([uwsgitune.__file__, L.stage_round(10000, {seconds}, L.BATCH_EVERY)]))"
)


def one_round(root: Path, seconds: float) -> dict[str, float]:
    env = dict(os.environ, PYTHONPATH=f"{root}:{root / 'bench'}")
    out = subprocess.run(
        [sys.executable, "-c", ROUND.format(seconds=seconds)],
        capture_output=True,
        text=True,
        env=env,
        cwd=root,
        check=True,
        timeout=120,
    ).stdout
    where, row = json.loads(out.strip().splitlines()[-1])
    assert where.startswith(str(root)), (where, root)  # the package of that tree was run
    return dict(row)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("old", help="the commit to compare this checkout with")
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--seconds", type=float, default=5.0)
    args = ap.parse_args()
    head = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    with tempfile.TemporaryDirectory(prefix="uwt-ab-") as tmp:
        old_tree = Path(tmp) / "old"
        subprocess.run(
            ["git", "-C", str(ROOT), "worktree", "add", "--detach", str(old_tree), args.old],
            check=True,
            capture_output=True,
        )
        try:
            sides = {f"{args.old} (before)": old_tree, f"{head} (this)": ROOT}
            rows: dict[str, list[dict[str, float]]] = {k: [] for k in sides}
            for i in range(args.rounds):
                order = list(sides.items())
                for name, root in order if i % 2 == 0 else order[::-1]:
                    r = one_round(root, args.seconds)
                    rows[name].append(r)
                    print(f"round {i + 1}, {name}: {r}", flush=True)
        finally:
            subprocess.run(
                ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(old_tree)],
                check=False,
                capture_output=True,
            )
    print()
    print("| round | " + " | ".join(f"{k}: total µs/line (reader + view)" for k in rows) + " |")
    print("|---|" + "---|" * len(rows))
    for i in range(args.rounds):
        cells = [
            f"{r[i]['total_us']:.2f} ({r[i]['reader_us']:.2f} + {r[i]['view_us']:.2f})"
            for r in rows.values()
        ]
        print(f"| {i + 1} | " + " | ".join(cells) + " |")
    meds = [
        f"**{statistics.median(x['total_us'] for x in r):.2f}** "
        f"({statistics.median(x['reader_us'] for x in r):.2f} + "
        f"{statistics.median(x['view_us'] for x in r):.2f})"
        for r in rows.values()
    ]
    print("| median | " + " | ".join(meds) + " |")


if __name__ == "__main__":
    main()
