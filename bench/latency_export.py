"""Issue 38: what the request log's families add to the exposition's render.

    .venv/bin/python bench/latency_export.py [--repeats 300] [--rounds 5]

The exposition renders each instance's families once per poll (exporter/exposition.py); a
scrape between polls serves those bytes, so the families below change the per-poll render
and the size of every scrape, not a scrape's CPU. Measured here, per instance, CPU time
(`time.process_time`) of `chunks(instance_families(state, options))` (what `PollExposition`
runs per published state), on the 64-worker recorded document folded twice
(tests/data/stats/64-workers.json), in four variants interleaved round by round:
- **without**: no request log (`state.latency` None), as before issue 38;
- **latency**: a view of a real recorder fed a steady minute of lognormal traffic, stamped
  (tests/support/latency.py `lognormal_view`, 100 req/s): both histograms, status classes,
  trust;
- **routes 10**: the same with `latency_routes` and 10 routes;
- **routes 51**: with `latency_routes` at the cap (`MAX_EXPORTED_ROUTES` routes + `other`).
Median of `--repeats` renders per round, then the median of the rounds' medians (and the
least, since a busy 2-core machine only ever adds). The view
(`LatencyView.export`) is computed by the latency stage once per poll whatever the scrapes;
its cost is the recorder's (bench/results/latency_cost.md), not the render's.
Writes bench/results/latency_export.md.
"""

from __future__ import annotations

import argparse
import gzip
import os
import platform
import statistics
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.exporter.test_collector import snapshot  # noqa: E402
from tests.support.latency import log_line, lognormal_view, recorder_with, view_of  # noqa: E402
from uwsgitune.core.latency import MAX_EXPORTED_ROUTES  # noqa: E402
from uwsgitune.exporter.exposition import chunks, merge  # noqa: E402
from uwsgitune.exporter.metrics import ExportOptions, instance_families  # noqa: E402
from uwsgitune.pipeline import InstanceState  # noqa: E402


def routed(n: int) -> InstanceState:
    """A minute of 100 req/s spread over `n` routes (`/rK/x`), stamped."""
    batches = [
        (
            float(t),
            [log_line(5_000 + 97 * i, path=f"/r{i % n}/x", wait_us=1_000) for i in range(100)],
        )
        for t in range(941, 1001)
    ]
    return replace(BASE, latency=view_of(recorder_with(batches), 1000.0))


BASE = snapshot("64-workers.json", "64-workers.json")


def variants() -> dict[str, tuple[InstanceState, ExportOptions]]:
    latency = replace(BASE, latency=lognormal_view(wait_median_us=2_000))
    on = ExportOptions(latency_routes=True)
    return {
        "without": (BASE, ExportOptions()),
        "latency": (latency, ExportOptions()),
        "routes 10": (routed(10), on),
        f"routes {MAX_EXPORTED_ROUTES + 1}": (routed(MAX_EXPORTED_ROUTES + 20), on),
    }


def render_ms(state: InstanceState, options: ExportOptions, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.process_time()
        part = chunks(instance_families(state, options))
        times.append(time.process_time() - t0)
        assert part is not None  # the fast writer, no fallback
    return statistics.median(times) * 1000


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=9)
    args = ap.parse_args()
    cases = variants()
    load = os.getloadavg()
    runs: dict[str, list[float]] = {k: [] for k in cases}
    for _ in range(args.rounds):
        for name, (state, options) in cases.items():
            runs[name].append(render_ms(state, options, args.repeats))
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()
    base = statistics.median(runs["without"])
    rows = []
    for name, (state, options) in cases.items():
        part = chunks(instance_families(state, options))
        assert part is not None
        text = merge([part])
        samples = sum(1 for line in text.splitlines() if not line.startswith(b"#"))
        med = statistics.median(runs[name])
        each = " / ".join(f"{m:.2f}" for m in runs[name])
        rows.append(
            f"| {name} | {samples} | {len(text)} | {len(gzip.compress(text, 1))} | "
            f"**{med:.2f}** | {med - base:+.2f} | {min(runs[name]):.2f} | {each} |"
        )
    out = ROOT / "bench" / "results" / "latency_export.md"
    out.write_text(
        "# What the request log's families add to the exposition (issue 38)\n\n"
        f"Commit {commit}, Python {platform.python_version()}, {os.cpu_count()} CPUs, "
        f"load average before the run {load[0]:.2f}, {load[1]:.2f}, {load[2]:.2f}, "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}. Script: "
        "`bench/latency_export.py` (its docstring says what is measured).\n\n"
        "One instance, the 64-worker recorded document; CPU ms of rendering the instance's "
        "families once (what each poll costs when a scrape reads it), median of "
        f"{args.repeats} renders, then of {args.rounds} interleaved rounds.\n\n"
        "| variant | samples | bytes | bytes gzip | **render ms** | vs without | least round | "
        "rounds |\n|---|---|---|---|---|---|---|---|\n" + "\n".join(rows) + "\n\n"
        "A scrape between polls serves the kept bytes: its CPU does not change with these "
        "families, only its size (above). The per-route histograms are the cost that "
        "`latency_routes` keeps off by default.\n"
    )
    print(out.read_text())


if __name__ == "__main__":
    main()
