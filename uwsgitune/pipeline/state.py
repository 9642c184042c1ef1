"""The state of one instance after one poll: frozen, built once, read by every sink. Pure."""

from __future__ import annotations

from dataclasses import dataclass

from uwsgitune.core.frame import Frame
from uwsgitune.core.latencyreport import LatencyView
from uwsgitune.core.model import StatsDoc
from uwsgitune.core.samples import HostSample, Poll
from uwsgitune.rules.finding import Finding
from uwsgitune.tuner.result import StepResult, Waiting


@dataclass(frozen=True)
class PollCounts:
    """Poll accounting for one instance (cumulative)."""

    polls: int = 0
    errors: int = 0
    seconds: float = 0.0  # wall time of every poll, summed
    last_seconds: float = 0.0
    repairs: int = 0  # polls whose document needed request data repaired (core/repair.py)
    last_t: float | None = None  # wall clock of the last poll done, good or failed

    def after(
        self, ok: bool, seconds: float, repaired: bool = False, t: float | None = None
    ) -> PollCounts:
        return PollCounts(
            self.polls + 1,
            self.errors + (not ok),
            self.seconds + seconds,
            seconds,
            self.repairs + repaired,
            t if t is not None else self.last_t,
        )


Actions = tuple[tuple[str, str, int], ...]  # (kind, result, count), sorted


@dataclass(frozen=True, eq=False)
class InstanceState:
    """Everything known about one instance at one poll (compared by identity).

    `frame` is the latest frame (an error frame when the last poll failed), `poll` the good
    poll it was made from (`attempt`: the poll, good or failed), `frames` the window it
    belongs to. `findings` are the rules' (kept from the last good poll while the instance
    is unreachable), `tuning` the tuner's result for this poll (None without a tuner, or
    before its first good poll). A poll made while the tuner's apply waits keeps the
    findings and tuning of the step it is in (the same objects)."""

    stats_uri: str  # the address as a URI (uwsgi_exporter's label)
    name: str = ""
    mode: str = ""  # the tuner's mode; "" without a tuner
    frame: Frame | None = None
    poll: Poll | None = None
    attempt: Poll | None = None  # the poll just made, good or failed (what `record` writes)
    raw: bytes | None = None  # the good poll's document as read (repaired), for `record`
    frames: tuple[Frame, ...] = ()
    findings: tuple[Finding, ...] = ()
    tuning: StepResult | None = None
    counts: PollCounts | None = None
    actions: Actions = ()  # tuner actions so far, by kind and result
    retry_in: float | None = None  # seconds to the next attempt while unreachable
    rules_error: str | None = None  # the rules engine failed on this instance (a bug)
    tuner_error: str | None = None  # the tuner's step raised at this poll (a bug)
    waiting: Waiting | None = None  # a poll made while the tuner's apply waits: for what
    recommend: bool = True  # export recommended values (the daemon: not in observe mode)
    latency: LatencyView | None = None  # the request log's percentiles (None: no --latency)

    @property
    def up(self) -> bool:
        return self.frame is not None and self.frame.ok and self.doc is not None

    @property
    def doc(self) -> StatsDoc | None:
        return self.poll.doc if self.poll is not None else None

    @property
    def host(self) -> HostSample | None:
        return self.poll.host if self.poll is not None else None

    def finding_pairs(self) -> tuple[tuple[str, str], ...]:
        """(rule id, severity) of each standing finding."""
        return tuple((f.id, f.severity) for f in self.findings)

    def recommended(self) -> tuple[tuple[str, float], ...]:
        """(setting, value) the findings recommend, the worst finding's first; none unless
        `recommend`."""
        if not self.recommend:
            return ()
        out: dict[str, float] = {}
        for f in self.findings:
            rec = f.recommendation
            if rec is None or isinstance(rec.value, bool):
                continue
            if isinstance(rec.value, int | float):
                out.setdefault(rec.setting, float(rec.value))
        return tuple(sorted(out.items()))

    def decision(self) -> tuple[str, str, int] | None:
        """The tuner's decision (action, code, desired) at this poll."""
        d = self.tuning.decision if self.tuning is not None else None
        return None if d is None else (d.action, d.code, d.desired)


def count_actions(actions: Actions, result: StepResult | None) -> Actions:
    """`actions` plus what the tuner audited in one step: changes by route, verifications."""
    if result is None or not result.records:
        return actions
    counts = {(k, r): n for k, r, n in actions}
    for key in filter(None, (rec.counted() for rec in result.records)):
        counts[key] = counts.get(key, 0) + 1
    return tuple((k, r, n) for (k, r), n in sorted(counts.items()))
