"""Render bench/results/tuner.json as a markdown table and an SVG chart (no dependency)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

COLORS = {
    "tuner-high": "#d62728",
    "tuner-low": "#ff7f0e",
    "spare": "#2ca02c",
    "backlog": "#17becf",
    "busyness": "#9467bd",
}


HISTORY = (
    (
        "tuner-v3.json",
        [
            "## Earlier runs, for the record",
            "",
            "### Run 4: the previous release's tables (45 s runs, whole run only)",
            "",
            "Before the fast first step: from 1 worker the tuner measured 4 polls before each",
            "step and multiplied the count by at most 4, so tuner-low took about 10 s to reach 8",
            "and missed the throughput and p99 targets over 45 s. `cpu` is a full re-run of every",
            "setup; for io, mixed, bursty and drop the static and algorithm rows are from run 2",
            "and the tuner rows from run 3. The machine was busy with other test suites.",
        ],
    ),
    (
        "tuner-v2.json",
        [
            "### Run 2: all setups, tuner rows before the CPU fix",
            "",
            "In run 2, tuner-high stayed at 8 workers in the CPU scenario: with 6 clients on 8",
            "workers nothing queued, and Little's L (inflated by requests waiting for a CPU)",
            "asked for 9. The CPU-oversubscription rule now applies saturated or not, when the",
            "instance itself keeps the CPUs busy.",
        ],
    ),
    (
        "tuner-v1.json",
        [
            "### Run 1: first policy, busier machine",
            "",
            "Changed after it: a step up may multiply the live count by 4 (was 2), the settle",
            "time after a reload is 3 s (was 5 s), and a probe is judged only while the instance",
            "is still saturated (v1 blamed a load drop on its last step and reverted it: see",
            "drop/tuner-low).",
        ],
    ),
)

ALGOS = ("spare", "backlog", "busyness")

NOTES = [
    "tuner-low's whole-run misses all come from its first 4 s at 1 worker: the tuner does",
    "not act for 3 s after the instance starts (metrics settle), then sizes the pool to the",
    "queue in one step. A 60 s run with its load starting with uWSGI pays that ramp in",
    "throughput and, where the run serves few requests (bursty, drop), in p99.",
    "During this run a few short real-uWSGI tests (listen restarts, the TUI apply key) ran",
    "beside the cpu scenario's static-2 to backlog rows: those may be a few percent low.",
    "The two tuner rows of every scenario were run again, on a quiet machine, after TCP",
    "queues came to be read from the kernel at each poll (the version released); the",
    "static and algorithm rows are from the full run just before.",
]


def _marks(
    t: dict[str, Any], runs: list[dict[str, Any]], rps: str, p99: str
) -> list[tuple[str, bool]]:
    grid = [r for r in runs if r["setup"].startswith("static-")]
    best = max(grid, key=lambda r: r[rps])
    algos = [r for r in runs if r["setup"] in ALGOS]
    thr = t[rps] >= 0.95 * best[rps]
    lat = t[p99] <= 1.2 * best[p99]
    beats = all(t[rps] > a[rps] or t[p99] < a[p99] for a in algos)
    conv = t["converged_s"] is not None and t["converged_s"] <= 120
    marks = [
        ("rps>=95%", thr),
        ("p99<=1.2x", lat),
        ("beats algos", beats),
        ("conv<=120s", conv),
        ("0 failed", t["failed"] == 0),
    ]
    return marks


def _verdict(t: dict[str, Any], runs: list[dict[str, Any]], rps: str, p99: str) -> str:
    return ", ".join(f"{n} {'yes' if ok else 'NO'}" for n, ok in _marks(t, runs, rps, p99))


def summary(raw: dict[str, Any]) -> list[str]:
    """One row per scenario: which targets each tuner run missed (whole run / steady)."""
    out = [
        "| scenario | tuner-high, whole run | tuner-high, steady | tuner-low, whole run "
        "| tuner-low, steady |",
        "|---|---|---|---|---|",
    ]
    for name, sc in raw.items():
        runs = sc["runs"]
        cells = []
        for setup in ("tuner-high", "tuner-low"):
            t = next((r for r in runs if r["setup"] == setup), None)
            for rps, p99 in (("rps", "p99_ms"), ("steady_rps", "steady_p99_ms")):
                if t is None or rps not in t:
                    cells.append("-")
                    continue
                missed = [n for n, ok in _marks(t, runs, rps, p99) if not ok]
                cells.append("all met" if not missed else "missed: " + ", ".join(missed))
        out.append(f"| {name} | " + " | ".join(cells) + " |")
    return out


def _rel(r: dict[str, Any], best: dict[str, Any], rps: str, p99: str) -> str:
    if r is best:
        return "**grid best**"
    return f"{r[rps] / best[rps]:.0%}, {r[p99] / best[p99]:.2f}x"


def table(raw: dict[str, Any]) -> list[str]:
    out = []
    for name, sc in raw.items():
        runs = sc["runs"]
        steady = "steady_rps" in runs[0]
        grid = [r for r in runs if r["setup"].startswith("static-")]
        best = max(grid, key=lambda r: r["rps"])
        sbest = max(grid, key=lambda r: r.get("steady_rps", 0))
        head = "| setup | rps | p99 ms | failed | mean live | final live | changes (2nd half) "
        head += "| converged s | vs grid best |"
        if steady:
            head += f" steady rps (after {sc.get('warmup', 15):g} s) | steady p99 ms "
            head += "| steady vs grid best |"
        out += [
            f"### {name} ({sc['seconds']:g} s; phases {sc['phases']})",
            "",
            head,
            "|---" * (12 if steady else 9) + "|",
        ]
        for r in runs:
            live = [n for _, n in r["live"]] or [0]
            row = (
                f"| {r['setup']} | {r['rps']:.1f} | {r['p99_ms']:.0f} | {r['failed']} | "
                f"{sum(live) / len(live):.1f} | {live[-1]} | "
                f"{r['changes']} ({r.get('late_changes', '?')}) | "
                f"{r['converged_s'] if r['converged_s'] is not None else '-'} | "
                f"{_rel(r, best, 'rps', 'p99_ms')} |"
            )
            if steady:
                row += (
                    f" {r['steady_rps']:.1f} | {r['steady_p99_ms']:.0f} | "
                    f"{_rel(r, sbest, 'steady_rps', 'steady_p99_ms')} |"
                )
            out.append(row)
        for r in runs:
            if r["setup"].startswith("tuner-"):
                out.append(f"\n{r['setup']} (whole run): {_verdict(r, runs, 'rps', 'p99_ms')}")
                if steady:
                    v = _verdict(r, runs, "steady_rps", "steady_p99_ms")
                    out.append(f"\n{r['setup']} (steady state): {v}")
        out.append("")
    return out


def svg(raw: dict[str, Any]) -> str:
    w, h, pad = 360, 170, 30
    names = list(raw)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{w * len(names)}" height="{h + 40}" '
        'font-family="sans-serif" font-size="10">'
    ]
    for i, name in enumerate(names):
        x0 = i * w
        runs = [r for r in raw[name]["runs"] if r["setup"] in COLORS]
        tmax = max((t for r in runs for t, _ in r["live"]), default=1) or 1
        parts.append(
            f'<text x="{x0 + pad}" y="14" font-size="12">{name}: live workers over time</text>'
        )
        parts.append(
            f'<rect x="{x0 + pad}" y="20" width="{w - 2 * pad}" height="{h - 20}" '
            'fill="none" stroke="#999"/>'
        )
        for n in (0, 2, 4, 6, 8):
            y = 20 + (h - 20) * (1 - n / 8)
            parts.append(f'<text x="{x0 + 8}" y="{y + 3:.0f}">{n}</text>')
        for r in runs:
            pts = " ".join(
                f"{x0 + pad + (w - 2 * pad) * t / tmax:.1f},{20 + (h - 20) * (1 - n / 8):.1f}"
                for t, n in r["live"]
            )
            parts.append(
                f'<polyline fill="none" stroke="{COLORS[r["setup"]]}" '
                f'stroke-width="1.5" points="{pts}"/>'
            )
        parts.append(f'<text x="{x0 + w - pad - 40}" y="{h + 12}">{tmax:.0f} s</text>')
    for j, (setup, c) in enumerate(COLORS.items()):
        parts.append(f'<text x="{10 + j * 90}" y="{h + 32}" fill="{c}">{setup}</text>')
    parts.append("</svg>")
    return "\n".join(parts)


def write_report(raw: dict[str, Any], out: Path) -> None:
    head = [
        "# Tuner benchmark",
        "",
        "Real uWSGI 2.0 on a 2-core machine; the load generator (uwsgitune.loadgen, bounded,",
        "closed-loop, non-keepalive; one asyncio thread) shares those cores. Workers 1-8.",
        "Setups: static grid (the reference), uWSGI's cheaper algorithms (cheaper 1,",
        "initial 2, processes 8), uwsgitune in apply mode started from 8 (tuner-high) and",
        "from 1 (tuner-low), with its default settings at a 1 s poll.",
        "",
        "Each run is measured over the whole run (the ramp included) and in steady state",
        "(requests finished after the warm-up, the same window for every setup). The targets",
        "are checked against the grid's best throughput in each; `converged s` is when the",
        "live count last moved by more than one.",
        "",
        "![live workers](tuner.svg)",
        "",
    ]
    body = [*head, "## Targets met", "", *summary(raw), "", *NOTES, "", *table(raw)]
    for name, text in HISTORY:
        path = out / name
        if path.exists():
            body += [*text, "", *table(json.loads(path.read_text()))]
    (out / "tuner.md").write_text("\n".join(body) + "\n")
    (out / "tuner.svg").write_text(svg(raw))


if __name__ == "__main__":
    path = (
        Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).parent / "results" / "tuner.json"
    )
    write_report(json.loads(path.read_text()), path.parent)
