"""A latency target (`p99=250ms`) and how one window of real traffic reads against it. Pure.

The rules (the latency findings, rules/taillatency.py) and the tuner (tuner/targeting.py)
read the same target (`SharedSettings.latency_target`) the same way, here, so a finding
and a decision never disagree on whether the target is missed, by what, or whether the data
may be judged at all.

**The target.** `p99=250ms` or `p95=0.25s`: a percentile of real traffic (p95 or p99) and a
time (`ms`, `s` or `us`; a bare number is ms). `parse_latency_target` reads it, and says in
one line what is wrong and the form to use otherwise.

**What is judged** (`read_latency`) is the time a request spends in the instance: the wait
for a worker plus the service time.
- Stamped (the proxy sets X-Request-Start, and no clock skew is stated): the target's
  percentile of each request's wait plus its service (`LatencyWindow.total`, within 0.5%).
  When under `WHOLE_SHARE` of the window's requests are stamped, the percentile of queue
  wait plus that of service time instead: an upper bound (measured 2-32% above the
  percentile of the sums, bench/results/latency_accuracy.md), so it errs high, never low.
- Not stamped (or the stamps show a skew, so their waits read short): the target's
  percentile of service time plus the *mean* queue wait from the kernel's listen queue by
  Little's law (Lq / λ, `LatencyView.little_wait_ms`). A mean, not a percentile: the
  evidence says `basis: little` so that no one mistakes it for a measured tail.
- Neither (no queue known): service time alone, `basis: service`.

**Why it is missed.** Service time alone at or above the target: more workers cannot fix it
(`cause: service`). Service time under the target and the wait on top of it past: the
requests wait for a worker, which more workers fix (`cause: queue`). This is the split the
issue asks for ("more workers fix queue wait, never service time"), made on the same
percentile as the target.

**When nothing is judged** (`LatencyReading.problem`, one line saying why): no request log;
a sender not proved to be the master's (untrusted lines are shown, never acted on); a log
format that does not match; coverage (lines ÷ requests the stats counted) unknown or below
`min_coverage` (the lines dropped may be the slow ones); no line for `SILENT_SECONDS` (a
stale window); fewer than `min_requests` requests in the window (a p99 of 50 requests is
their maximum). A reading with a problem still carries its numbers, for the evidence.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, PlainSerializer

from uwsgitune.core.latencyreport import LatencyView, LatencyWindow, Percentiles
from uwsgitune.core.units import ms, percent

Quantile = Literal["p95", "p99"]
Basis = Literal["stamped", "little", "service"]
Cause = Literal["queue", "service"]
SILENT_SECONDS = 5.0  # no line for this long: the window describes a load that stopped
NEAR = 0.8  # within 20% of the target: close enough that shrinking is not tried

_FORM = "give it as p99=250ms or p95=0.25s"
_TARGET = re.compile(r"(p95|p99)\s*[=:]\s*([0-9]*\.?[0-9]+(?:e[+-]?[0-9]+)?)\s*(ms|s|us|µs)?")
_UNIT_MS = {None: 1.0, "ms": 1.0, "s": 1000.0, "us": 0.001, "µs": 0.001}
MAX_TARGET_MS = 600_000.0  # ten minutes: past any request a worker should hold
# The unit of each evidence key a reading gives (`LatencyReading.evidence`).
LATENCY_UNITS: dict[str, str] = {
    "latency_target_ms": "ms",
    "p95_ms": "ms",
    "p99_ms": "ms",
    "service_p50_ms": "ms",
    "service_p95_ms": "ms",
    "service_p99_ms": "ms",
    "queue_p50_ms": "ms",
    "queue_p99_ms": "ms",
    "little_wait_ms": "ms",
    "latency_window_s": "s",
    "latency_requests": "requests",
    "latency_coverage": "ratio",
}


@dataclass(frozen=True)
class LatencyTarget:
    """A percentile of real traffic (`quantile`) that must stay at or under `ms`."""

    quantile: Quantile
    ms: float

    def __str__(self) -> str:
        """`p99=250ms`: what `parse_latency_target` reads back as this target."""
        value = repr(self.ms)
        return f"{self.quantile}={value.removesuffix('.0')}ms"

    def of(self, p: Percentiles) -> float:
        """This target's percentile of a spread (ms)."""
        return p.p99_ms if self.quantile == "p99" else p.p95_ms


def parse_latency_target(text: str) -> LatencyTarget:
    """`p99=250ms`, `p99=0.25s`, `p95=800` (ms) -> a target. ValueError: one line, the fix."""
    m = _TARGET.fullmatch(text.strip().lower())
    if m is None:
        raise ValueError(f"{text!r} is not a latency target; {_FORM}")
    value = float(m.group(2)) * _UNIT_MS[m.group(3)]
    if not math.isfinite(value) or value <= 0 or value > MAX_TARGET_MS:
        raise ValueError(f"{text!r}: the time must be above 0 and at most 600s; {_FORM}")
    q: Quantile = "p99" if m.group(1) == "p99" else "p95"
    return LatencyTarget(q, value)


def _target(value: Any) -> Any:
    return parse_latency_target(value) if isinstance(value, str) else value


# The settings' field type: a string in the config file and on the command line, a
# `LatencyTarget` in the settings, written back as the string.
TargetField = Annotated[
    LatencyTarget | None,
    BeforeValidator(_target),
    PlainSerializer(lambda t: None if t is None else str(t), return_type=str | None),
]


@dataclass(frozen=True)
class LatencyReading:
    """One window of real traffic read against a target (see the module's docstring)."""

    target: LatencyTarget
    window: int  # seconds
    requests: int
    observed_ms: float | None  # queue (stamped or Little's mean) + service, at the quantile
    service: Percentiles | None
    queue: Percentiles | None  # stamped and trusted waits; None otherwise
    little_wait_ms: float | None  # Little's mean wait, when it is what was added
    basis: Basis
    coverage: float | None
    problem: str | None  # why this reading must not be acted on (None: it may)

    @property
    def service_ms(self) -> float | None:
        return None if self.service is None else self.target.of(self.service)

    @property
    def queue_ms(self) -> float | None:
        """The queue wait added to service time: stamped at the quantile, or Little's mean."""
        if self.queue is not None:
            return self.target.of(self.queue)
        return self.little_wait_ms

    @property
    def missed(self) -> bool:
        return self.observed_ms is not None and self.observed_ms > self.target.ms

    @property
    def near(self) -> bool:
        """At or above `NEAR` of the target (missed included): no room to shrink."""
        return self.observed_ms is not None and self.observed_ms >= NEAR * self.target.ms

    @property
    def cause(self) -> Cause | None:
        """Why a miss: service time alone reaches the target, or the wait on top of it."""
        if not self.missed:
            return None
        service = self.service_ms
        return "service" if service is not None and service >= self.target.ms else "queue"

    def basis_text(self) -> str:
        """How the judged time was made, in words."""
        q = self.target.quantile
        if self.basis == "stamped":
            return f"{q} of queue wait (proxy stamp) + service time"
        if self.basis == "little":
            return f"{q} service time + mean queue wait (Little's law; no usable stamp)"
        return f"{q} service time only (no stamp, no listen queue known)"

    def evidence(self) -> dict[str, float | int | str | None]:
        """The numbers behind a finding or a decision, raw (ms, ratios, counts)."""
        s = self.service
        out: dict[str, float | int | str | None] = {
            "latency_target_ms": _r(self.target.ms),
            f"{self.target.quantile}_ms": _r(self.observed_ms),
            "service_p50_ms": _r(s.p50_ms if s else None),
            "service_p95_ms": _r(s.p95_ms if s else None),
            "service_p99_ms": _r(s.p99_ms if s else None),
        }
        if self.queue is not None:
            out["queue_p50_ms"] = _r(self.queue.p50_ms)
            out["queue_p99_ms"] = _r(self.queue.p99_ms)
        if self.little_wait_ms is not None:
            out["little_wait_ms"] = _r(self.little_wait_ms)
        out["latency_basis"] = self.basis
        out["latency_window_s"] = self.window
        out["latency_requests"] = self.requests
        out["latency_coverage"] = None if self.coverage is None else round(self.coverage, 3)
        return out

    def summary(self) -> str:
        """`p99 310 ms > target 250 ms (p99 queue wait (proxy stamp) + p99 service time)`."""
        q, t = self.target.quantile, self.target.ms
        if self.observed_ms is None:
            return f"{q} unknown (target {ms(t)})"
        sign = ">" if self.missed else "<="
        return f"{q} {ms(self.observed_ms)} {sign} target {ms(t)} ({self.basis_text()})"


def _r(v: float | None) -> float | None:
    return None if v is None else round(v, 2)


def latency_problem(
    view: LatencyView, w: LatencyWindow, min_requests: int, min_coverage: float
) -> str | None:
    """Why window `w` of `view` must not be judged (one line), or None: it may be."""
    if not view.trusted:
        return view.trust_note or "request log sender not proved to be the master's"
    if view.mismatch is not None:
        return view.mismatch
    if view.silent_for is None or view.silent_for > SILENT_SECONDS:
        silent = "none yet" if view.silent_for is None else f"none for {view.silent_for:.0f}s"
        return f"request log lines: {silent} (stale)"
    if view.coverage is None:
        return "request log coverage unknown (no requests counted yet)"
    if view.coverage < min_coverage:
        return (
            f"request log coverage {percent(view.coverage)} < {percent(min_coverage)}: "
            "lines are being lost (see doctor --latency)"
        )
    if w.requests < min_requests:
        return f"{w.requests} requests in the last {w.seconds}s (< {min_requests} to judge)"
    return None


WHOLE_SHARE = 0.9  # stamped share of a window's requests for their whole time to be judged


def read_latency(
    view: LatencyView,
    target: LatencyTarget,
    window: LatencyWindow,
    *,
    min_requests: int,
    min_coverage: float,
) -> LatencyReading:
    """`window` (one of `view`'s) read against `target`: what is judged, on what basis, and
    whether it may be acted on."""
    service = window.service
    queue = window.queue if view.queue_trusted() else None
    little = None
    if queue is not None:
        basis: Basis = "stamped"
    elif view.little_wait_ms is not None:
        basis, little = "little", view.little_wait_ms
    else:
        basis = "service"
    observed = None
    whole = window.total if queue is not None else None
    if service is not None:
        observed = target.of(service)
        if whole is not None and whole.count >= WHOLE_SHARE * service.count:
            observed = target.of(whole)  # each request's wait + service: exact
        elif queue is not None:
            observed += target.of(queue)  # some requests unstamped: the sum, an upper bound
        elif little is not None:
            observed += little
    return LatencyReading(
        target=target,
        window=window.seconds,
        requests=window.requests,
        observed_ms=observed,
        service=service,
        queue=queue,
        little_wait_ms=little,
        basis=basis,
        coverage=view.coverage,
        problem=latency_problem(view, window, min_requests, min_coverage),
    )
