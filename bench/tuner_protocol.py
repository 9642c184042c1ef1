"""The tuner benchmark's protocol (bench/PROTOCOL.md) as code: its constants, the scenarios'
shape, and the pure maths the report judges with. No uWSGI, no I/O but `code_hash`.

bench/PROTOCOL.md is the text a reviewer reads; this module is what runs. The two carry the
same version (`VERSION`): a change to either bumps it, and every scenario runs again.

- **Stamps.** Every run records `VERSION`, the git commit and `code_hash`: a sha256 over the
  decision path's files (`DECISION_PATH`), sorted, each as its path and its bytes. The report
  refuses to combine runs whose version, hash or scenario definition differ, and smoke runs
  with protocol runs (`check_combinable`).
- **One window a scenario** (`Scenario.window`): every row, static, algorithm or tuner, is
  judged on the same seconds of its run.
- **p99** is the window's, every request in it (`pooled_p99`); the seconds within
  `TRANSIENT_S` after a change of load (`transient_seconds`) get a column of their own and
  are never cut out of the full figure.
- **Settled** (`settle_time`): the first poll from which the live count stays within
  `SETTLE_BAND` (10%) of the median of the next `SETTLE_HOLD` (30) seconds' polls, the hold
  inside one phase. **Converged** (`converged_time`): settled at a count within the
  live-worker limit (`live_limit`).
- **Peers for worker-seconds** (`peers`): every algorithm run that served at least
  `PEER_RPS` (97%) of the tuner's window throughput, whatever its p99 (printed beside it).
- **Order** (`round_order`): rounds in turn within one sitting, so that a drift linear in
  time moves every setup's mean alike.
- **What runs** (`SCENARIOS`, `ALGOS`, `setups_of`): PROTOCOL.md's tables, here so that the
  bench, the report's tests and a simulator read one definition. A scenario whose app no
  one here wrote joins through bench/thirdparty_scenarios.py (`SCENARIOS`), which the bench
  loads when it exists.
"""

from __future__ import annotations

import hashlib
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

VERSION = 1
DECISION_PATH = (
    "uwsgitune/tuner",
    "uwsgitune/rules",
    "uwsgitune/core",
    "uwsgitune/actuate",
    "uwsgitune/pipeline",
)
# What a run's measurements also depend on, each hashed apart and never mixed either: the
# whole package (issue 39: "a hash of uwsgitune/"; the load generator is in it) and the
# bench's own code (its scenarios, app and harness).
PACKAGE = ("uwsgitune",)
BENCH_CODE = (
    "bench/tuner_bench.py",
    "bench/tuner_protocol.py",
    "bench/scenario_app.py",
    "bench/thirdparty_scenarios.py",
    "bench/thirdparty",  # the third-party app, its dataset and its database server
    "tests/uwsgi_harness.py",
)
HASHES = {
    "code_hash": "decision path",
    "package_hash": "uwsgitune/",
    "bench_hash": "bench code",
}
MIN_ROUNDS = 3
# PROTOCOL.md's scenarios, in its order: the nine of bench/tuner_bench.py and the two of a
# third-party app (bench/thirdparty_scenarios.py adds them).
SCENARIO_NAMES = (
    *("cpu", "mixed", "io", "step", "drop", "bursty", "thrash", "threads-cpu", "threads-io"),
    *("django-cpu", "django-io"),
)
STARTS = (64, 2)  # live workers every tuner and every algorithm starts from
TOP = 64  # processes: the pool's ceiling
FLOOR = 2  # cheaper: its floor
SETTLE_HOLD = 30.0  # seconds the live count must hold ...
SETTLE_BAND = 0.10  # ... within this share of the hold's median
TRANSIENT_S = 5  # seconds after each change of load: the transient's own p99 column
PEER_RPS = 0.97  # an algorithm at >= this share of the tuner's throughput is a peer
RPS_TARGET = 0.95  # throughput >= 95% of the grid's best
P99_BOUND = 1.2  # p99 <= 1.2x the grid-best's
CONVERGE_S = 60.0  # tuner-64: converged within 60 s ...
MAX_RELOADS = 2  # ... with at most 2 reloads
RECOVER_SHARE = 0.95  # "within 5% of the best": of the grid's best in that phase
RECOVER_MEAN_S = 5  # throughput over this many seconds
HIST_BASE = 1.05  # latency histogram buckets: 5% wide (tuner_bench.py writes them)
OVERHEAD_S = 3.0  # a run's start and stop, and the gap to the next (measured: 1.3-2.5 s)
SITTING_MAX_S = 3 * 3600.0  # a sitting is under 3 hours


class ProtocolError(Exception):
    """Runs that the protocol does not let the report combine, or a run it refuses."""


@dataclass(frozen=True)
class Phase:
    path: str
    clients: int | None  # closed loop: this many clients, each one request at a time
    rate: float | None  # open loop: requests/s
    seconds: float


@dataclass(frozen=True)
class Recover:
    """A target on how fast a phase's load is met: within `within` s of the phase's start,
    RECOVER_MEAN_S seconds of throughput reach RECOVER_SHARE of the grid's best there."""

    phase: int
    within: float
    label: str


@dataclass(frozen=True)
class Scenario:
    """A load in phases on an app, its static grid, and the window every row is judged in.

    `app` is the WSGI file (default: bench/scenario_app.py); `service` names a context
    manager the bench enters once a sitting (a database server, say) which yields the
    uWSGI options the app needs: the hook for scenarios whose app no one here wrote
    (bench/thirdparty_scenarios.py, `SCENARIOS`)."""

    phases: tuple[Phase, ...]
    grid: tuple[int, ...]
    window: tuple[float, float]
    threads: int = 1  # threads per process: the grid and the tuner count processes
    recover: tuple[Recover, ...] = ()
    app: str | None = None
    service: str | None = None  # "module:function", entered once a sitting
    # uWSGI options of the app; None removes one (`wsgi-file`, for an app loaded by `module`)
    options: Mapping[str, str | int | None] = field(default_factory=dict)

    @property
    def seconds(self) -> float:
        return sum(p.seconds for p in self.phases)

    def definition(self) -> dict[str, Any]:
        """What a run stamps: the report refuses runs of one scenario that differ here."""
        return {
            "phases": [
                {"path": p.path, "clients": p.clients, "rate": p.rate, "seconds": p.seconds}
                for p in self.phases
            ],
            "grid": list(self.grid),
            "window": list(self.window),
            "threads": self.threads,
            "recover": [
                {"phase": r.phase, "within": r.within, "label": r.label} for r in self.recover
            ],
            "app": self.app,
            "service": self.service,
            "options": dict(self.options),
        }


def scaled(sc: Scenario, factor: float) -> Scenario:
    """The scenario with every length times `factor`: for smoke runs only, never protocol."""
    return Scenario(
        tuple(Phase(p.path, p.clients, p.rate, p.seconds * factor) for p in sc.phases),
        sc.grid,
        (sc.window[0] * factor, sc.window[1] * factor),
        sc.threads,
        tuple(Recover(r.phase, r.within * factor, r.label) for r in sc.recover),
        sc.app,
        sc.service,
        sc.options,
    )


# --- stamps -------------------------------------------------------------------------------


def code_hash(root: Path, parts: Iterable[str] = DECISION_PATH) -> str:
    """sha256 over the files of `parts` (directories, taken whole, or files; one that does
    not exist counts as absent), sorted by path: each file's path relative to `root`, a NUL,
    its length, a NUL, its bytes. Caches (`__pycache__`, `.pyc`) are left out; any other
    file, code or data, counts."""
    found = (
        [root / part] if (root / part).is_file() else (root / part).rglob("*") for part in parts
    )
    files = sorted(
        f
        for group in found
        for f in group
        if f.is_file() and "__pycache__" not in f.parts and f.suffix != ".pyc"
    )
    h = hashlib.sha256()
    for f in files:
        data = f.read_bytes()
        h.update(f.relative_to(root).as_posix().encode() + b"\0")
        h.update(str(len(data)).encode() + b"\0" + data)
    return h.hexdigest()


def check_combinable(runs: Sequence[Mapping[str, Any]], version: int = VERSION) -> None:
    """Raise ProtocolError (a one-line message) unless every run is of this protocol
    version, of one code hash, all smoke or all protocol, and of one definition per
    scenario."""
    if not runs:
        raise ProtocolError("no runs: run bench/tuner_bench.py first")
    versions = sorted({str(r.get("protocol")) for r in runs})
    if versions != [str(version)]:
        raise ProtocolError(
            f"runs of protocol version(s) {', '.join(versions)}: this report is version "
            f"{version} and combines only its own; move the others to another file"
        )
    for key, what in HASHES.items():
        hashes = sorted({str(r.get(key)) for r in runs})
        if len(hashes) > 1:
            short = ", ".join(h[:12] for h in hashes)
            raise ProtocolError(
                f"runs of {len(hashes)} code hashes of the {what} ({short}): the protocol "
                "judges one frozen code; run every scenario again at one commit"
            )
    if len({bool(r.get("smoke")) for r in runs}) > 1:
        raise ProtocolError(
            "smoke runs mixed with protocol runs: smoke runs go to their own file (--raw)"
        )
    defs: dict[str, Any] = {}
    for r in runs:
        d = r.get("scenario_def")
        if defs.setdefault(r["scenario"], d) != d:
            raise ProtocolError(
                f"scenario {r['scenario']!r} has runs of two definitions: a changed scenario "
                "is a new protocol version"
            )


# --- the maths ----------------------------------------------------------------------------


def phase_ends(phases: Sequence[Mapping[str, Any]]) -> list[float]:
    """When each phase ends, from the run's start (the last one: the run's end)."""
    ends, t = [], 0.0
    for p in phases:
        t += float(p["seconds"])
        ends.append(t)
    return ends


def _polls(live: Iterable[Sequence[Any]]) -> list[tuple[float, int]]:
    return sorted((float(t), int(n)) for t, n in live if n is not None)


def _holds(
    pts: list[tuple[float, int]], i: int, ends: Sequence[float], hold: float, band: float
) -> float | None:
    """The median of the hold from poll i, if its polls all lie within `band` of it and
    the hold fits in the phase poll i is in; else None."""
    t = pts[i][0]
    end = next((e for e in ends if e > t), None)
    if end is None or t + hold > end + 1e-9 or pts[-1][0] < t + hold - 1.0:
        return None  # the hold runs past its phase, or past the last poll
    counts = [n for ts, n in pts[i:] if ts <= t + hold + 1e-9]
    med = statistics.median(counts)
    if all(abs(n - med) <= band * med + 1e-9 for n in counts):
        return float(med)
    return None


def settle_time(
    live: Iterable[Sequence[Any]],
    ends: Sequence[float],
    hold: float = SETTLE_HOLD,
    band: float = SETTLE_BAND,
    after: float = 0.0,
) -> tuple[float, float] | None:
    """The first poll at or after `after` from which the live count holds for `hold` s
    within `band` of that hold's median, the hold inside one phase, as (time, median).
    None: it never did (a phase shorter than the hold never lets it)."""
    pts = _polls(live)
    for i, (t, _) in enumerate(pts):
        if t < after:
            continue
        med = _holds(pts, i, ends, hold, band)
        if med is not None:
            return t, med
    return None


def converged_time(
    live: Iterable[Sequence[Any]], ends: Sequence[float], limit: float
) -> float | None:
    """The first poll from which the run is settled (`settle_time`'s hold) at a count
    within the live-worker limit. None: never."""
    pts = _polls(live)
    for i, (t, _) in enumerate(pts):
        med = _holds(pts, i, ends, SETTLE_HOLD, SETTLE_BAND)
        if med is not None and med <= limit:
            return t
    return None


def window_seconds(window: Sequence[float]) -> list[int]:
    """The whole seconds of a window [start, end)."""
    return list(range(int(window[0]), int(window[1])))


def window_rps(per_second: Sequence[int], window: Sequence[float]) -> float:
    """Requests finished a second in the window (a second the run lacks counts 0)."""
    secs = window_seconds(window)
    return sum(per_second[s] if s < len(per_second) else 0 for s in secs) / max(len(secs), 1)


def live_at(live: Iterable[Sequence[Any]], t: float) -> int:
    """The live count at `t`: the last poll at or before it (the first poll, before any)."""
    pts = _polls(live)
    if not pts:
        return 0
    now = pts[0][1]
    for ts, n in pts:
        if ts > t + 1e-9:
            break
        now = n
    return now


def window_live(live: Iterable[Sequence[Any]], window: Sequence[float]) -> float:
    """Mean live workers over the window, one sample a second; times the window's
    length, the worker-seconds held there."""
    pts = list(live)
    secs = window_seconds(window)
    return sum(live_at(pts, s) for s in secs) / max(len(secs), 1)


def transient_seconds(phases: Sequence[Mapping[str, Any]], window: Sequence[float]) -> list[int]:
    """The seconds of the window within TRANSIENT_S after a change of load (the start of
    every phase but the first). Empty for a stationary load."""
    starts = phase_ends(phases)[:-1]
    return [s for s in window_seconds(window) if any(c <= s < c + TRANSIENT_S for c in starts)]


def pooled_p99(
    hists: Iterable[Sequence[Mapping[Any, int]]], seconds: Sequence[int]
) -> float | None:
    """The p99 (ms) of every request that ended in `seconds`, pooled over the runs'
    per-second histograms ({bucket: count}, bucket = round(log(ms) / log(HIST_BASE))).
    None when no request ended there."""
    counts: dict[int, int] = {}
    for hist in hists:
        for s in seconds:
            for bucket, n in (hist[s] if s < len(hist) else {}).items():
                counts[int(bucket)] = counts.get(int(bucket), 0) + int(n)
    total, seen = sum(counts.values()), 0
    for bucket in sorted(counts):
        seen += counts[bucket]
        if seen >= 0.99 * total:
            return float(HIST_BASE**bucket)
    return None


def live_limit(grid: Mapping[int, float]) -> tuple[int, float]:
    """From the grid's mean window throughput by static count: the fewest that reach
    RPS_TARGET of the best, and the live-worker limit max(1.5 x that, that + 2)."""
    best = max(grid.values())
    fewest = min(n for n, rps in grid.items() if rps >= RPS_TARGET * best)
    return fewest, max(1.5 * fewest, fewest + 2.0)


@dataclass(frozen=True)
class Peer:
    setup: str
    rps: float
    live: float
    p99_ratio: float | None  # over the grid best's, printed beside, never a filter


def peers(tuner_rps: float, algos: Iterable[Peer]) -> list[Peer]:
    """The algorithm runs the worker-seconds target compares with: every one that served
    at least PEER_RPS of the tuner's throughput in the window, whatever its p99."""
    return [a for a in algos if a.rps >= PEER_RPS * tuner_rps]


def recovery(per_second: Sequence[int], start: float, best: float, within: float) -> float | None:
    """Seconds from `start` until RECOVER_MEAN_S seconds of throughput first average
    RECOVER_SHARE of `best`, looked for up to `within` s (None: not by then)."""
    s0 = int(start)
    for t in range(s0, s0 + int(within) + 1):
        chunk = per_second[t : t + RECOVER_MEAN_S]
        if len(chunk) == RECOVER_MEAN_S and sum(chunk) / RECOVER_MEAN_S >= RECOVER_SHARE * best:
            return float(t - s0)
    return None


def _magic_third(n: int) -> tuple[list[int], list[int]]:
    """For odd n, two position maps that, with the identity, give every item the same sum
    of positions over three rounds (a 3 x n magic rectangle)."""
    m = (n - 1) // 2
    second = [(i + m) % n for i in range(n)]
    third = [n - 1 - 2 * i if i <= m else 2 * n - 1 - 2 * i for i in range(n)]
    return second, third


def round_order(setups: Sequence[str], rounds: int) -> list[list[str]]:
    """The setups' order in each round. Even rounds alternate forwards and backwards
    (A B C, C B A): each setup's mean position is the same, so a drift linear in time moves
    every setup's mean alike. An odd count ends with three rounds whose positions add up to
    the same for every setup (exact for an odd number of setups; for an even number a
    placeholder is added and dropped, which leaves at most one slot of difference)."""
    items = list(setups)
    out: list[list[str]] = []
    pairs = rounds if rounds % 2 == 0 else rounds - 3
    for k in range(max(pairs, 0)):
        out.append(items if k % 2 == 0 else items[::-1])
    if rounds % 2 == 1:
        if rounds < 3:
            return [items]
        padded: list[str | None] = [*items, None] if len(items) % 2 == 0 else list(items)
        n = len(padded)
        second, third = _magic_third(n)
        for pos in (list(range(n)), second, third):
            slots: list[str | None] = [None] * n
            for i, p in enumerate(pos):
                slots[p] = padded[i]
            out.append([s for s in slots if s is not None])
    return out


# --- the scenarios and setups (PROTOCOL.md's tables) ---------------------------------------

# The run lengths and windows of PROTOCOL.md v1 (its "Run lengths" section says why).
STATIONARY_S = 150.0
STATIONARY_WINDOW = (90.0, 150.0)  # the last 60 s: after every start has had 60 s + 30 s
PHASED_FROM = 15.0  # a phased scenario's window: from here to its end, every change in it


def _p(path: str, clients: int | None, seconds: float, rate: float | None = None) -> Phase:
    return Phase(path, clients, rate, seconds)


def _stationary(path: str, clients: int, grid: tuple[int, ...], threads: int = 1) -> Scenario:
    return Scenario((_p(path, clients, STATIONARY_S),), grid, STATIONARY_WINDOW, threads)


def _phased(phases: tuple[Phase, ...], grid: tuple[int, ...], *recover: Recover) -> Scenario:
    end = sum(p.seconds for p in phases)
    return Scenario(phases, grid, (PHASED_FROM, end), recover=recover)


SCENARIOS: dict[str, Scenario] = {
    # CPU-bound, 3 ms of CPU a request: the best is near the CPU count.
    "cpu": _stationary("/cpu/3", 64, (2, 4, 64)),
    # 2 ms CPU + 12 ms IO (the mixed case of issue 12): the best lies in between.
    "mixed": _stationary("/mixed/2/12", 64, (16, 24, 32)),
    # IO-bound: 50 ms of waiting; 40 clients need about 40 workers.
    "io": _stationary("/io/50", 40, (32, 40, 48)),
    # the load doubles, then halves
    "step": _phased(
        tuple(_p("/mixed/1/30", c, 50) for c in (16, 32, 16)),
        (16, 24, 32),
        Recover(1, 30.0, "2x step"),
    ),
    # a drop to near zero and back
    "drop": _phased(
        (_p("/mixed/2/12", 48, 50), _p("/io/5", None, 50, rate=2.0), _p("/mixed/2/12", 48, 50)),
        (16, 24, 32),
        Recover(2, 15.0, "return"),
    ),
    # bursts of 10 s: no phase lasts the 30 s a settle takes
    "bursty": _phased((_p("/mixed/1/25", 48, 10), _p("/mixed/1/25", 4, 10)) * 3, (16, 32, 64)),
    # The seed's pathology: fixed work over a 32 MiB per-worker heap (bench/scenario_app.py),
    # so 64 runnable workers thrash the caches.
    "thrash": _stationary("/ws/20000/32", 64, (2, 4, 64)),
    # Threads (issue 12): 4 threads a process. CPU-bound Python does not scale with threads
    # (one GIL a process): the best is still near the CPU count, in processes.
    "threads-cpu": _stationary("/cpu/3", 64, (2, 3, 4), threads=4),
    # IO-bound with threads: 64 clients waiting 50 ms need about 16 processes of 4 threads.
    "threads-io": _stationary("/io/50", 64, (12, 16, 24), threads=4),
}


ALGOS: dict[str, dict[str, str | int]] = {
    "spare": {"cheaper-algo": "spare"},
    "backlog": {"cheaper-algo": "backlog"},
    "busyness": {"cheaper-algo": "busyness"},
    # The settings uWSGI's cheaper docs suggest for a large pool: spawn several workers at a
    # time, react after a short overload, and (busyness) the backlog alert.
    "spare-docs": {"cheaper-algo": "spare", "cheaper-step": 4, "cheaper-overload": 1},
    "backlog-docs": {"cheaper-algo": "backlog", "cheaper-step": 4, "cheaper-overload": 4},
    "busyness-docs": {
        "cheaper-algo": "busyness",
        "cheaper-step": 8,
        "cheaper-overload": 10,
        "cheaper-busyness-min": 20,
        "cheaper-busyness-max": 70,
        "cheaper-busyness-backlog-alert": 16,
        "cheaper-busyness-backlog-step": 2,
    },
}


def setups_of(sc: Scenario) -> list[str]:
    """Every setup of a scenario, in the order of its first round: the grid, the
    algorithms (each from 64 and from 2), the tuners."""
    algos = [f"{a}-{n}" for a in ALGOS for n in STARTS]
    return [f"static-{n}" for n in sc.grid] + algos + [f"tuner-{n}" for n in STARTS]


def start_of(setup: str) -> int | None:
    """The live count an adaptive setup starts from (None: a static count)."""
    return None if setup.startswith("static-") else int(setup.rsplit("-", 1)[1])


def algo_of(setup: str) -> str:
    return setup.rsplit("-", 1)[0]


def sitting_seconds(sc: Scenario, rounds: int = MIN_ROUNDS) -> float:
    """How long a scenario's sitting takes: every setup in every round, each run its
    length plus OVERHEAD_S (PROTOCOL.md's arithmetic)."""
    return len(setups_of(sc)) * rounds * (sc.seconds + OVERHEAD_S)
