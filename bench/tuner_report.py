"""Render the tuner benchmark's runs (bench/results/tuner64.jsonl) under bench/PROTOCOL.md:
one page, bench/results/tuner64.md, and one SVG chart per scenario, from the runs alone.

    .venv/bin/python bench/tuner_report.py [RAW] [--out DIR]

The page holds the protocol version, the commit and the decision path's code hash, and per
scenario a table of every setup and round, the means, the targets and the chart. No history:
that is git's. It refuses (one line, exit 2) to combine runs of different protocol versions,
code hashes or scenario definitions, smoke runs with protocol runs, or two complete sittings
of one scenario (the protocol runs a scenario's rounds in one sitting).

The maths (windows, settle, converged, p99, peers) is bench/tuner_protocol.py's; the
targets as judged are PROTOCOL.md's "Targets":
- throughput (the window's, mean over rounds) >= 95% of the grid best's;
- p99 (the window's, every request, pooled over rounds) <= 1.2x the grid best's; the
  transient's p99 (the TRANSIENT_S seconds after each change of load) printed beside;
- mean live workers in the window <= max(1.5 x the fewest static count at 95% of the
  best, that count + 2);
- tuner-64: converged within 60 s, at most 2 reloads, in every round;
- fewer worker-seconds in the window than every peer: every algorithm run at >= 97% of
  the tuner's window throughput, whatever its p99 (printed beside); with no peer the
  target has nothing to compare and says so ("no peer"), it is not met;
- a scenario's recovery targets (step: 2x step within 30 s; drop: the return within 15 s),
  in every round;
- no failed request, in every round.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from statistics import fmean
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from tuner_protocol import (
    CONVERGE_S,
    MAX_RELOADS,
    MIN_ROUNDS,
    P99_BOUND,
    PEER_RPS,
    RPS_TARGET,
    SCENARIO_NAMES,
    SETTLE_HOLD,
    TRANSIENT_S,
    Peer,
    ProtocolError,
    check_combinable,
    converged_time,
    live_limit,
    peers,
    phase_ends,
    pooled_p99,
    recovery,
    settle_time,
    transient_seconds,
    window_live,
    window_rps,
    window_seconds,
)

Run = dict[str, Any]
RESULTS = Path(__file__).resolve().parent / "results"
TUNERS = ("tuner-64", "tuner-2")
ALGO_COLORS = {
    "spare": "#2ca02c",
    "backlog": "#17becf",
    "busyness": "#9467bd",
    "spare-docs": "#98df8a",
    "backlog-docs": "#1f77b4",
    "busyness-docs": "#c5b0d5",
}
COLORS = {"tuner-64": "#d62728", "tuner-2": "#ff7f0e"}


def failed(run: dict[str, Any]) -> int:
    """A run's failed requests: the load's errors and every answer but a 200 (the load counts
    a 3xx as served; a third-party app that lost its session answers fast 302s)."""
    other = sum(int(n) for status, n in (run.get("statuses") or {}).items() if int(status) != 200)
    return int(run["failed"]) + other


def load(path: Path) -> list[Run]:
    """The runs of a JSON-lines file (ProtocolError: missing, or a line not JSON)."""
    if not path.exists():
        raise ProtocolError(f"{path}: no such file; run bench/tuner_bench.py first")
    text = path.read_text()
    try:
        whole = json.loads(text)
    except json.JSONDecodeError:
        whole = None
    if isinstance(whole, dict) and "protocol" not in whole:
        raise ProtocolError(
            f"{path}: runs from before protocol v1 (superseded, see bench/PROTOCOL.md; their "
            "page is in git); this report reads the protocol's JSON lines"
        )
    runs = []
    for i, line in enumerate(text.splitlines(), 1):
        if line.strip():
            try:
                runs.append(json.loads(line))
            except json.JSONDecodeError as e:
                raise ProtocolError(f"{path}:{i}: not a JSON run ({e.msg})") from None
    return runs


def complete(runs: list[Run]) -> bool:
    """A sitting with every setup it named run in every round it named (3 or more, unless
    smoke)."""
    first = runs[0]
    need = int(first["rounds"])
    if not first.get("smoke") and need < MIN_ROUNDS:
        return False
    done = {(r["setup"], r["round"]) for r in runs}
    return all((s, k) in done for s in first["setups"] for k in range(1, need + 1))


def pick_sitting(runs: list[Run]) -> tuple[list[Run], list[str]]:
    """A scenario's runs to judge: its one complete sitting (ProtocolError for two), else
    its latest sitting, and a line for each sitting left out."""
    by: dict[str, list[Run]] = defaultdict(list)
    for r in runs:
        by[r["sitting"]].append(r)
    done = [s for s, rs in by.items() if complete(rs)]
    if len(done) > 1:
        raise ProtocolError(
            f"scenario {runs[0]['scenario']!r} has {len(done)} complete sittings "
            f"({', '.join(done)}): the protocol runs one; a new one is a new version"
        )
    use = done[0] if done else max(by)
    left = [
        f"sitting {s}: {len(rs)} runs, incomplete, not used" for s, rs in by.items() if s != use
    ]
    return by[use], left


@dataclass
class Row:
    """One setup's runs in a scenario's sitting, measured in the scenario's window."""

    setup: str
    runs: list[Run]
    rps: float = 0.0
    live: float = 0.0
    p99: float | None = None
    p99_transient: float | None = None
    per_round: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class Judged:
    name: str
    definition: dict[str, Any]
    rows: dict[str, Row]
    best: Row
    fewest: int
    limit: float
    left_out: list[str]
    complete: bool

    @property
    def window(self) -> tuple[float, float]:
        w = self.definition["window"]
        return float(w[0]), float(w[1])


def _row(setup: str, runs: list[Run], d: dict[str, Any], limit: float | None) -> Row:
    window, phases = d["window"], d["phases"]
    ends = phase_ends(phases)
    secs, trans = window_seconds(window), transient_seconds(phases, window)
    runs = sorted(runs, key=lambda r: int(r["round"]))
    row = Row(setup, runs)
    row.rps = fmean(window_rps(r["per_second"], window) for r in runs)
    row.live = fmean(window_live(r["live"], window) for r in runs)
    row.p99 = pooled_p99([r["latency_hist"] for r in runs], secs)
    row.p99_transient = pooled_p99([r["latency_hist"] for r in runs], trans) if trans else None
    for r in runs:
        settled = settle_time(r["live"], ends) if r["start"] is not None else None
        row.per_round.append(
            {
                "round": r["round"],
                "rps": window_rps(r["per_second"], window),
                "live": window_live(r["live"], window),
                "p99": pooled_p99([r["latency_hist"]], secs),
                "p99_transient": pooled_p99([r["latency_hist"]], trans) if trans else None,
                "settled": settled,
                "converged": (
                    converged_time(r["live"], ends, limit)
                    if limit is not None and r["start"] is not None
                    else None
                ),
                "run": r,
            }
        )
    return row


def judge(name: str, runs: list[Run]) -> Judged:
    use, left = pick_sitting(runs)
    d = use[0]["scenario_def"]
    by: dict[str, list[Run]] = defaultdict(list)
    for r in use:
        by[r["setup"]].append(r)
    grid = {
        int(s.split("-")[1]): _row(s, rs, d, None)
        for s, rs in by.items()
        if s.startswith("static-")
    }
    if not grid:
        raise ProtocolError(f"scenario {name!r}: no static grid run; the grid is the reference")
    fewest, limit = live_limit({n: g.rps for n, g in grid.items()})
    best = max(grid.values(), key=lambda g: g.rps)
    rows = {s: (_row(s, rs, d, limit)) for s, rs in by.items()}
    order = use[0]["setups"]
    rows = dict(sorted(rows.items(), key=lambda kv: order.index(kv[0]) if kv[0] in order else 99))
    return Judged(name, d, rows, best, fewest, limit, left, complete(use))


def _ratio(x: float | None, ref: float | None) -> float | None:
    return x / ref if x is not None and ref else None


def _algo_peers(j: Judged, tuner: Row) -> tuple[list[Peer], int]:
    algos = [
        Peer(s, r.rps, r.live, _ratio(r.p99, j.best.p99))
        for s, r in j.rows.items()
        if not s.startswith(("static-", "tuner-"))
    ]
    return peers(tuner.rps, algos), len(algos)


@dataclass(frozen=True)
class Mark:
    text: str
    ok: bool | None  # None: nothing to judge (no peer)


def marks(j: Judged, setup: str) -> list[Mark]:
    """The targets of PROTOCOL.md for one tuner row, each with its measured figure."""
    t = j.rows[setup]
    rps = t.rps / j.best.rps if j.best.rps else 0.0
    p99 = _ratio(t.p99, j.best.p99)
    trans = _ratio(t.p99_transient, j.best.p99_transient)
    out = [
        Mark(f"rps>=95% ({rps:.1%})", rps >= RPS_TARGET),
        Mark(
            f"p99<={P99_BOUND:g}x ({'-' if p99 is None else f'{p99:.2f}x'}"
            + (f"; transient {trans:.2f}x, not a target" if trans is not None else "")
            + ")",
            p99 is not None and p99 <= P99_BOUND,
        ),
        Mark(f"live<={j.limit:g} ({t.live:.1f})", t.live <= j.limit),
        Mark(f"0 failed ({sum(failed(r) for r in t.runs)})", all(failed(r) == 0 for r in t.runs)),
    ]
    if setup == "tuner-64" and max(p["seconds"] for p in j.definition["phases"]) < SETTLE_HOLD:
        out.append(Mark(f"converged: no phase lasts the {SETTLE_HOLD:g} s hold", None))
    elif setup == "tuner-64":
        conv = [p["converged"] for p in t.per_round]
        worst = None if None in conv else max(c for c in conv if c is not None)
        reloads = max(r["reloads"] for r in t.runs)
        ok = worst is not None and worst <= CONVERGE_S and reloads <= MAX_RELOADS
        said = "never, in a round" if worst is None else f"{worst:.1f}s"
        out.append(Mark(f"converged<=60s, <=2 reloads ({said}, {reloads})", ok))
    found, total = _algo_peers(j, t)
    if not found:
        out.append(
            Mark(f"fewer worker-s than peers: no peer (0 of {total} algos at >=97% rps)", None)
        )
    else:
        worse = [p for p in found if t.live >= p.live]
        detail = "; ".join(
            f"{p.setup} {p.live:.1f} live, p99 {_f(p.p99_ratio, '.2f')}x" for p in worse
        )
        out.append(
            Mark(
                f"fewer worker-s than the {len(found)} of {total} peers ({t.live:.1f} live"
                + (f"; not fewer than {detail}" if worse else "")
                + ")",
                not worse,
            )
        )
    ends = phase_ends(j.definition["phases"])
    for rec in j.definition.get("recover", []):
        k = int(rec["phase"])
        start = ends[k - 1]
        best_phase = max(
            fmean(r["phase_rps"][k] for r in g.runs)
            for s, g in j.rows.items()
            if s.startswith("static-")
        )
        times = [recovery(r["per_second"], start, best_phase, rec["within"]) for r in t.runs]
        worst = None if None in times else max(x for x in times if x is not None)
        said = f"not within {rec['within']:g}s in a round" if worst is None else f"{worst:.0f}s"
        out.append(Mark(f"{rec['label']} <={rec['within']:g}s ({said})", worst is not None))
    return out


def _said(ms: list[Mark]) -> str:
    return ", ".join(f"{m.text} {'yes' if m.ok else ('NO' if m.ok is False else '-')}" for m in ms)


def _f(x: float | None, fmt: str = ".0f") -> str:
    return "-" if x is None else format(x, fmt)


def table(j: Judged) -> list[str]:
    w0, w1 = j.window
    out = [
        "| setup | round | rps | p99 ms | transient p99 ms | mean live | worker-s | "
        "whole-run worker-s | reloads | moves | failed | settled at s (count) | converged s | "
        "load avg |",
        "|---" * 14 + "|",
    ]
    for s, row in j.rows.items():
        for p in row.per_round:
            r = p["run"]
            st = p["settled"]
            settled = (
                "-"
                if r["start"] is None
                else ("not settled" if st is None else f"{st[0]:.0f} ({st[1]:g})")
            )
            if st is not None and r["start"] is not None and st[0] > w0:
                settled += " **after the window's start**"
            la = r.get("loadavg") or [[], []]
            out.append(
                f"| {s} | {p['round']} | {p['rps']:.0f} | {_f(p['p99'])} | "
                f"{_f(p['p99_transient'])} | "
                f"{p['live']:.1f} | {p['live'] * (w1 - w0):.0f} | {r['worker_seconds']:.0f} | "
                f"{r['reloads']} | {r['fifo_moves']} | {failed(r)} | {settled} | "
                f"{_f(p['converged'], '.1f')} | {_f(la[0][0] if la[0] else None, '.2f')} |"
            )
    return out


def means(j: Judged) -> list[str]:
    out = [
        "| setup | rounds | rps | vs grid best | p99 ms | p99 vs best | transient p99 ms | "
        "mean live | peer of tuner-64 | peer of tuner-2 |",
        "|---" * 10 + "|",
    ]
    tuners = {t: j.rows[t] for t in TUNERS if t in j.rows}
    for s, row in j.rows.items():
        peer_of = []
        for t in TUNERS:
            if t not in tuners or s.startswith(("static-", "tuner-")):
                peer_of.append("-")
            else:
                peer_of.append("yes" if row.rps >= PEER_RPS * tuners[t].rps else "no")
        vs = "**grid best**" if row is j.best else f"{row.rps / j.best.rps:.1%}"
        out.append(
            f"| {s} | {len(row.runs)} | {row.rps:.0f} | {vs} | {_f(row.p99)} | "
            f"{_f(_ratio(row.p99, j.best.p99), '.2f')} | {_f(row.p99_transient)} | "
            f"{row.live:.1f} | " + " | ".join(peer_of) + " |"
        )
    return out


def _phases_text(d: dict[str, Any]) -> str:
    text = ", ".join(
        f"{p['path']} x{p['clients']}" if p["clients"] else f"{p['path']} @{p['rate']:g}/s"
        for p in d["phases"]
    )
    secs = sum(p["seconds"] for p in d["phases"])
    if d.get("threads", 1) > 1:
        text += f"; {d['threads']} threads a process (counts are processes)"
    return f"{text} ({secs:g} s)"


def section(j: Judged) -> list[str]:
    w0, w1 = j.window
    short = min(p["seconds"] for p in j.definition["phases"]) < SETTLE_HOLD
    out = [
        f"### {j.name}: {_phases_text(j.definition)}",
        "",
        f"![{j.name}](tuner64-{j.name}.svg)",
        "",
        f"Window: {w0:g}-{w1:g} s for every row. Grid {j.definition['grid']}; the fewest at 95% of "
        f"the grid's best: {j.fewest}; live-worker limit {j.limit:g}. Grid best: {j.best.setup}.",
    ]
    if short:
        out.append(
            f"No phase lasts the {SETTLE_HOLD:g} s hold: no run can show settled or converged here."
        )
    if not j.complete:
        out.append(
            "**Incomplete sitting: not every setup ran every round. Not a protocol result.**"
        )
    out += [f"*{line}*" for line in j.left_out]
    out += ["", "Means over the rounds:", "", *means(j), ""]
    for t in TUNERS:
        if t in j.rows:
            out.append(f"- **{t}**: {_said(marks(j, t))}")
    out += ["", "Every run:", "", *table(j), ""]
    return out


def verdict_cell(j: Judged, setup: str) -> str:
    if setup not in j.rows:
        return "not run"
    ms = marks(j, setup)
    missed = [m.text for m in ms if m.ok is False]
    empty = [m.text for m in ms if m.ok is None]
    if missed:
        cell = "missed: " + "; ".join(missed)
        return cell + ("; nothing to compare: " + "; ".join(empty) if empty else "")
    if empty:
        return "the rest met; nothing to compare: " + "; ".join(empty)
    return "all met"


def svg(j: Judged) -> str:
    """Live workers (top) and requests a second (bottom) of every adaptive run, each round
    a line; the window shaded; a dot where each run settled (a 30 s hold within 10%)."""
    w, h, pad = 720, 170, 44
    runs = [
        (s, p) for s, row in j.rows.items() if not s.startswith("static-") for p in row.per_round
    ]
    tmax = float(sum(p["seconds"] for p in j.definition["phases"])) or 1.0
    lmax = max((n for _, p in runs for _, n in p["run"]["live"]), default=1) or 1
    rmax = max((max(p["run"]["per_second"], default=0) for _, p in runs), default=1) or 1
    w0, w1 = j.window

    def x(t: float) -> float:
        return pad + w * min(t, tmax) / tmax

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{w + 2 * pad}" height="{2 * h + 130}" '
        'font-family="sans-serif" font-size="10">',
        f'<text x="{pad}" y="14" font-size="12">{j.name}: live workers (top), req/s (bottom); '
        f"window {w0:g}-{w1:g} s shaded; dots: settled</text>",
    ]
    for i, (ymax, label) in enumerate(((lmax, "workers"), (rmax, "req/s"))):
        y0 = 24 + i * (h + 20)
        parts.append(
            f'<rect x="{x(w0):.1f}" y="{y0}" width="{x(w1) - x(w0):.1f}" height="{h}" fill="#eee"/>'
        )
        parts.append(
            f'<rect x="{pad}" y="{y0}" width="{w}" height="{h}" fill="none" stroke="#999"/>'
        )
        parts.append(f'<text x="2" y="{y0 + 10}">{ymax:.0f}</text>')
        parts.append(f'<text x="2" y="{y0 + h}">0 {label}</text>')
        for s, p in runs:
            r, algo = p["run"], s.rsplit("-", 1)[0]
            color = COLORS.get(s) or ALGO_COLORS.get(algo, "#777")
            dash = ' stroke-dasharray="4,2"' if r["start"] == 64 and s not in COLORS else ""
            if i == 0:
                pts = [(float(t), float(n)) for t, n in r["live"] if n is not None]
            else:
                pts = [(t + 0.5, float(v)) for t, v in enumerate(r["per_second"])]
            coords = " ".join(f"{x(t):.1f},{y0 + h * (1 - min(v / ymax, 1)):.1f}" for t, v in pts)
            parts.append(
                f'<polyline fill="none" stroke="{color}" stroke-width="1.2"{dash} '
                f'points="{coords}"/>'
            )
            if i == 0 and p["settled"] is not None:
                t, n = p["settled"]
                parts.append(
                    f'<circle cx="{x(t):.1f}" cy="{y0 + h * (1 - min(n / ymax, 1)):.1f}" '
                    f'r="2.5" fill="{color}"/>'
                )
    parts.append(f'<text x="{pad + w - 30}" y="{2 * h + 58}">{tmax:.0f} s</text>')
    names = [*COLORS, *ALGO_COLORS]
    for k, n in enumerate(names):
        c = COLORS.get(n) or ALGO_COLORS[n]
        parts.append(
            f'<text x="{pad + (k % 4) * 170}" y="{2 * h + 80 + (k // 4) * 14}" '
            f'fill="{c}">{n}</text>'
        )
    parts.append(
        f'<text x="{pad}" y="{2 * h + 124}">algorithms from 64 dashed, from 2 solid</text></svg>'
    )
    return "\n".join(parts)


def _stamps(runs: list[Run]) -> list[str]:
    commits = sorted({r["commit"] for r in runs})
    dirty = any(r.get("dirty") for r in runs)
    walls = [t for r in runs for t in r["wall"]]
    loads = [r["loadavg"][0][0] for r in runs if r.get("loadavg") and r["loadavg"][0]]

    def utc(t: float) -> str:
        return datetime.fromtimestamp(t, timezone.utc).strftime("%Y-%m-%d %H:%M UTC")

    out = [
        f"- Protocol: **version {runs[0]['protocol']}** ([PROTOCOL.md](../PROTOCOL.md)).",
        f"- Commit: {', '.join(c[:10] for c in commits)}"
        + (" (**uncommitted changes**)" if dirty else "")
        + ".",
        f"- Code hashes (sha256): decision path `{runs[0]['code_hash']}`; uwsgitune/ "
        f"`{runs[0].get('package_hash')}`; bench `{runs[0].get('bench_hash')}`.",
        f"- Runs: {len(runs)}, {utc(min(walls))} to {utc(max(walls))}; load average (1 min) at "
        f"the runs' starts {min(loads, default=0):.2f}-{max(loads, default=0):.2f}; "
        f"host CPUs {runs[0].get('host', {}).get('cpus')}; kernel.sched_autogroup_enabled "
        f"{', '.join(sorted({str(r.get('host', {}).get('sched_autogroup')) for r in runs}))}.",
    ]
    if runs[0].get("smoke"):
        out.insert(
            0,
            f"**SMOKE RUN, NOT PROTOCOL**: every length x{runs[0].get('smoke_factor')}, "
            "setups and rounds cut. It shows the plumbing works; it judges nothing.\n",
        )
    return out


def render(runs: list[Run], names: list[str] | None = None) -> tuple[str, dict[str, str]]:
    """The page and the charts (file name: SVG) of combinable runs."""
    check_combinable(runs)
    by: dict[str, list[Run]] = defaultdict(list)
    for r in runs:
        by[r["scenario"]].append(r)
    order = names or list(by)
    judged = {n: judge(n, by[n]) for n in order if n in by}
    body = [
        "# The tuner against static counts and uWSGI's cheaper algorithms",
        "",
        "Generated by bench/tuner_report.py from the runs alone; history is git's.",
        "",
        *_stamps(runs),
        "",
        "## Targets",
        "",
        "| scenario | tuner-64 | tuner-2 |",
        "|---|---|---|",
    ]
    for n in order:
        j = judged.get(n)
        cells = [verdict_cell(j, t) if j else "not run" for t in TUNERS]
        body.append(f"| {n} | " + " | ".join(cells) + " |")
    body += [
        "",
        f"p99 is every request's in the window; the transient ({TRANSIENT_S} s after each change "
        "of load) is its own column, never cut out. Peers: every algorithm run at >= 97% of the "
        "tuner's window throughput, whatever its p99 (printed beside). `-`: no peer to compare.",
        "",
    ]
    charts = {}
    for n, j in judged.items():
        body += section(j)
        charts[f"tuner64-{n}.svg"] = svg(j)
    return "\n".join(body) + "\n", charts


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("raw", nargs="?", type=Path, default=RESULTS / "tuner64.jsonl")
    ap.add_argument("--out", type=Path, default=None, help="default: the raw file's directory")
    args = ap.parse_args(argv)
    try:
        runs = load(args.raw)
        extra = sorted({r["scenario"] for r in runs} - set(SCENARIO_NAMES))
        page, charts = render(runs, [*SCENARIO_NAMES, *extra])
    except ProtocolError as e:
        print(f"tuner_report: {e}", file=sys.stderr)
        return 2
    out = args.out or args.raw.parent
    out.mkdir(parents=True, exist_ok=True)
    (out / "tuner64.md").write_text(page)
    for fname, text in charts.items():
        (out / fname).write_text(text)
    print(f"wrote {out / 'tuner64.md'} and {len(charts)} charts")
    return 0


if __name__ == "__main__":
    sys.exit(main())
