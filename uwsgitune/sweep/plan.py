"""Plan a sweep: parse `--workers`, choose the steps, estimate the time, check the instance.

Pure: no I/O, no clock. Step choice: every value when there are few, else the powers of two
inside the range plus both ends; after the first pass, the runner may add the midpoints around
the knee (`refine`), so the estimate counts those too.
"""

from __future__ import annotations

from dataclasses import dataclass

from uwsgitune.core.frame import Frame
from uwsgitune.errors import UwsgituneError

MAX_WORKERS = 1024
EVERY_VALUE_UP_TO = 8  # at most this many values: measure them all
REFINE_MAX = 2
SETTLE_SECONDS = 2.5  # typical: one 1 s master cycle to apply +/-, a poll, the drain


class PlanError(UwsgituneError, ValueError):
    """Bad `--workers` text or an unsuitable instance; the message names the fix."""

    code = 2


@dataclass(frozen=True)
class WorkerRange:
    values: tuple[int, ...]  # every count the user allows, ascending
    contiguous: bool  # `A..B`: refinement may pick counts in between

    @property
    def top(self) -> int:
        return self.values[-1]


def parse_workers(text: str) -> WorkerRange:
    """`1..32`, `1,2,4,8` or `4`. Counts are 1..1024: a sweep never goes to 0 live workers."""
    text = text.strip()
    try:
        if ".." in text:
            lo_text, hi_text = text.split("..", 1)
            lo, hi = int(lo_text), int(hi_text)
            if lo >= hi:
                raise PlanError(f"--workers {text}: write LOW..HIGH with LOW < HIGH, e.g. 1..16")
            values = tuple(range(lo, hi + 1))
            contiguous = True
        else:
            values = tuple(sorted({int(v) for v in text.split(",") if v.strip()}))
            contiguous = False
    except ValueError as exc:
        if isinstance(exc, PlanError):
            raise
        raise PlanError(
            f"--workers {text}: write a range like 1..16 or a list like 1,2,4,8"
        ) from None
    if not values or values[0] < 1 or values[-1] > MAX_WORKERS:
        raise PlanError(f"--workers {text}: counts must be between 1 and {MAX_WORKERS}")
    return WorkerRange(values, contiguous)


def choose_steps(rng: WorkerRange) -> tuple[int, ...]:
    """Every value if few, else the powers of two in the range plus both ends."""
    if len(rng.values) <= EVERY_VALUE_UP_TO or not rng.contiguous:
        return rng.values
    lo, hi = rng.values[0], rng.values[-1]
    powers = {p for p in (2**i for i in range(11)) if lo <= p <= hi}
    return tuple(sorted(powers | {lo, hi}))


def refine(rng: WorkerRange, measured: tuple[int, ...], knee: int | None) -> tuple[int, ...]:
    """Up to two unmeasured counts: the midpoints between the knee and its measured neighbours."""
    if knee is None or not rng.contiguous or knee not in measured:
        return ()
    done = sorted(measured)
    i = done.index(knee)
    out: list[int] = []
    for j in (i - 1, i + 1):
        if 0 <= j < len(done):
            mid = (done[j] + knee) // 2
            if mid not in done and mid in rng.values and mid not in out:
                out.append(mid)
    return tuple(out[:REFINE_MAX])


def serpentine(steps: tuple[int, ...], pass_no: int) -> tuple[int, ...]:
    """Up on even passes, down on odd ones: fewer big jumps, and a slow drift averages out."""
    return steps if pass_no % 2 == 0 else tuple(reversed(steps))


def estimate_seconds(
    n_steps: int, repeat: int, step_seconds: float, warmup: float, *, refinable: bool
) -> float:
    per_step = SETTLE_SECONDS + warmup + step_seconds
    extra = REFINE_MAX if refinable else 0
    return (n_steps + extra) * repeat * per_step + 2 * SETTLE_SECONDS  # + the restore


def ini_fix(top: int) -> str:
    return f"add to the ini: cheaper-algo = manual, processes = {top}, cheaper = 1; then restart"


def check_instance(frame: Frame, top: int) -> str | None:
    """Why this instance cannot be swept to `top` workers (one line with the fix), or None."""
    src = frame.source
    if not frame.ok:
        return f"stats {src}: {frame.error}; check --stats against `stats =` in the ini"
    if frame.emperor:
        return f"stats {src} is an Emperor; point --stats at one vassal's stats socket"
    if frame.workers_max < top:
        return (
            f"{src} has processes = {frame.workers_max}, below the top of --workers ({top}): "
            f"{ini_fix(top)} (or sweep up to {frame.workers_max})"
        )
    if frame.cheap == 0 and frame.live >= frame.workers_max:
        return (
            f"{src}: all {frame.workers_max} workers are live and no slot is cheap, so cheaper "
            f"mode looks off and FIFO +/- would do nothing; {ini_fix(max(top, frame.workers_max))}"
        )
    if frame.live < 1:
        return f"{src}: no live worker; send + to the master FIFO or restart the instance"
    return None
