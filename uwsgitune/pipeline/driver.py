"""One instance's poll loop: when to poll, every stage of a poll, and who is told.

Theory of operation
-------------------
An `InstanceDriver` owns everything between a stats source and the sinks, for one instance:

- **The schedule.** A poll every `interval` seconds on the monotonic clock (a wall-clock
  jump neither stalls nor floods the polls), backing off 1, 2, 4 ... intervals, at most
  `BACKOFF_CAP` seconds, while the instance is unreachable. A replay source is not paced:
  its polls are read as fast as they come, each with its recorded clocks (and its
  recorded latency: a replay has no request log of its own).
- **The stages of a poll.** Read (`Source.poll`: connect, read, close, parse, sample the
  host), derive (`Tracker`: counter deltas and reloads into a `Frame`), keep (`Window`),
  judge (`RulesRunner`, once per poll, on good polls), decide and act (the tuner, when there
  is one, on every poll: a failed one says why it waits), and publish one frozen
  `InstanceState`. With a request log (`--latency`, pipeline/latencystage.py) its lines come
  in on a thread of their own as they arrive; each poll reads them once into
  `state.latency`, before the rules and the tuner see the state.
- **The subscribers.** Each published state goes to every subscriber, in the driver's
  thread, in order: the TUI posts it to its screen, the exporter renders ahead of a due
  scrape, the daemon logs what changed, `tune` prints the tuner's notes, `watch --plain`
  prints a line, `record` writes the poll. A subscriber that raises is a bug: it is said
  once per kind on stderr and never stops the polls.

A tuner's apply may wait on a reload or a restart, and it polls meanwhile through the
function the driver gave it when it was built (`poll_in_step`). Those polls go through the
same stages but the rules and the tuner, and are published at once, findings and tuning of
the step they are in kept: no sink sees a stale state during a long apply. The step then
ends on the latest poll.

Nothing else polls. The CLI, the TUI, the daemon, `record`, `recommend`, sweep's observation
and /probe each build a driver and read what it publishes (`tests/test_layout.py` holds
every other module to that). A driver runs in one thread: `run` in the caller's, or
`start` in a thread of its own. Other threads reach it only through `stop`, `poll_now`,
`set_interval`, `call_soon`, `next_state` and `state`, which are safe from any thread.
The tuner is built in the driver's thread and closed there when the loop ends; a new one
(`replace_tuner`, the daemon's SIGHUP) takes over between two steps, so two tuners never
act at once.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Protocol

from uwsgitune.core.derive import Tracker
from uwsgitune.core.frame import Frame
from uwsgitune.core.latencyreport import LatencyView
from uwsgitune.core.samples import Poll
from uwsgitune.core.window import Window
from uwsgitune.pipeline.latencystage import LatencyStage
from uwsgitune.pipeline.rules import RulesRunner
from uwsgitune.pipeline.state import InstanceState, PollCounts, count_actions
from uwsgitune.rules.finding import Finding
from uwsgitune.sources.recording import ReplaySource
from uwsgitune.tuner.result import StepResult, Waiting

BACKOFF_CAP = 30.0  # seconds: the longest wait between two polls of an unreachable instance
MAX_WAIT = 0.5  # seconds a paced loop sleeps at most before it looks at `stop` again

PollFn = Callable[[], InstanceState]  # a poll from inside a tuner's step, published at once
Subscriber = Callable[[InstanceState], object]


class Source(Protocol):
    """Where polls come from: a live stats address (`sources.poller.LiveSource`) or a
    recording (`sources.recording.ReplaySource`)."""

    @property
    def name(self) -> str:
        """The address as the user gave it: every frame's `source`."""
        ...

    @property
    def uri(self) -> str:
        """The address as a URI (uwsgi_exporter's `stats_uri` label)."""
        ...

    @property
    def kind(self) -> str | None:
        """ "unix", "abstract", "tcp" or "http"; None when unknown (a replay's odd name)."""
        ...

    @property
    def paced(self) -> bool:
        """True: poll on the schedule. False: each poll as soon as the last is done."""
        ...

    @property
    def exhausted(self) -> bool:
        """No poll will come any more (the end of a recording)."""
        ...

    def poll(self) -> Poll:
        """One poll; never raises for anything the peer does (a failed poll has `error`)."""
        ...

    def raw(self) -> bytes | None:
        """The document of the last good poll as read (repaired), for a recording."""
        ...


class TunerStage(Protocol):
    """What the driver needs of a tuner (`actuate.service.TunerService`)."""

    @property
    def mode(self) -> str: ...

    @property
    def waiting(self) -> Waiting | None:
        """What an apply in flight waits for (set only during a step)."""
        ...

    def step(self, state: InstanceState) -> StepResult | None: ...

    def request(self, action: str, desired: int) -> None:
        """Apply (action, desired) at the next step if still advised (any thread)."""
        ...

    def halt(self) -> None: ...

    def close(self) -> None: ...


TunerFactory = Callable[[PollFn], TunerStage]


def backoff_delay(interval: float, failures: int, cap: float = BACKOFF_CAP) -> float:
    """1, 2, 4 ... intervals after consecutive failures, never more than `cap` seconds."""
    if failures <= 0:
        return interval
    return min(interval * 2.0 ** min(failures - 1, 32), max(cap, interval))


class InstanceDriver:
    def __init__(
        self,
        source: Source,
        *,
        interval: float = 1.0,
        window_seconds: float = 600.0,
        whole_frames: int | None = None,
        rules: RulesRunner | None = None,
        tuner: TunerFactory | None = None,
        name: str = "",
        mode: str = "",
        recommend: bool = True,
        window_maxlen: int | None = 7200,
        mono: Callable[[], float] = time.monotonic,
        latency: LatencyStage | None = None,
    ) -> None:
        self.source = source
        self.latency = latency  # the request log's stage (`--latency`), closed with the driver
        self.rules = rules
        self.interval = interval
        self.next_due = 0.0
        self.failures = 0
        self.tracker = Tracker(source.name)
        # None: every frame whole (the TUI's), else all but the newest compact (the daemon's)
        self.window = Window(window_seconds, window_maxlen, whole=whole_frames)
        self._mono = mono
        self._counts = PollCounts()
        self._since: float | None = None  # the tuner's last listen restart (monotonic)
        self._latest: Frame | None = None  # the last poll made from inside the tuner's step
        self._last_poll: Poll | None = None
        # Polls are numbered as they start. `fresh` waits for a state whose latest poll
        # started after it was asked; a poll asked for while one is in flight comes next.
        self._started = 0  # polls started
        self._latest_seq = 0  # the number of the latest poll done
        self._published_seq = 0  # the number of the latest poll in the published state
        self._asked_during: int | None = None  # poll_now while this poll was in flight
        self._subscribers: list[Subscriber] = []
        self._failed_subscribers: set[str] = set()
        self._jobs: list[Callable[[], object]] = []
        self._guard = threading.Condition()
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self.stepping = False  # the tuner's step is in flight (an apply may be waiting)
        self.crashed: str | None = None  # what ended the thread `start` made, if it raised
        self.tuner: TunerStage | None = tuner(self.poll_in_step) if tuner is not None else None
        self.state = InstanceState(
            source.uri, name=name, mode=mode, counts=self._counts, recommend=recommend
        )

    # -- what other threads may call -----------------------------------------------------

    def subscribe(self, subscriber: Subscriber) -> None:
        """`subscriber(state)` after every published state, in the driver's thread."""
        self._subscribers.append(subscriber)

    def stop(self, interrupt: bool = True) -> None:
        """End the loop after the poll or step in flight. `interrupt`: an apply in flight
        ends within its grace (verified, else rolled back); else it runs to its end."""
        if interrupt and self.tuner is not None:
            self.tuner.halt()
        self._stopping.set()
        self._wake.set()

    def poll_now(self) -> None:
        """Poll at once (the TUI's apply key acts on fresh stats, not on the last poll): a
        poll that starts after this call, even when one is in flight now."""
        with self._guard:
            self._asked_during = self._started
        self.next_due = self._mono()
        self._wake.set()

    def set_interval(self, interval: float) -> None:
        """A new poll interval, from the next poll (which comes no later than now + it)."""
        self.interval = interval
        self.next_due = min(self.next_due, self._mono() + interval)
        self._wake.set()

    def call_soon(self, job: Callable[[], object]) -> None:
        """Run `job` in the driver's thread, between two polls."""
        with self._guard:
            self._jobs.append(job)
        self._wake.set()

    def replace_tuner(self, tuner: TunerFactory | None, mode: str, recommend: bool = True) -> None:
        """From the next poll on, a new tuner (or none): the old one finishes the step it is
        in (its apply runs to its end) and is closed first, in the driver's thread."""

        def swap() -> None:
            self._close_tuner()
            self.tuner = tuner(self.poll_in_step) if tuner is not None else None
            self._publish(replace(self.state, mode=mode, recommend=recommend))

        self.call_soon(swap)

    def next_state(self, after: InstanceState | None, timeout: float) -> InstanceState | None:
        """The first state published after `after` (None: the current one), waiting up to
        `timeout` seconds; None when none came."""
        end = self._mono() + timeout
        with self._guard:
            while self.state is after:
                left = end - self._mono()
                if left <= 0 or (self._stopping.is_set() and not self._running()):
                    return None
                self._guard.wait(min(left, MAX_WAIT))
            return self.state

    def fresh(self, timeout: float) -> InstanceState | None:
        """The first state whose latest poll started after this call (never one from a poll
        already in flight), waiting up to `timeout` seconds; None when none came."""
        with self._guard:
            asked = self._started
        self.poll_now()
        end = self._mono() + timeout
        with self._guard:
            while self._published_seq <= asked:
                left = end - self._mono()
                if left <= 0 or (self._stopping.is_set() and not self._running()):
                    return None
                self._guard.wait(min(left, MAX_WAIT))
            return self.state

    def start(
        self,
        name: str | None = None,
        until: Callable[[InstanceState], bool] | None = None,
        deadline: float | None = None,
    ) -> threading.Thread:
        """`run` in a daemon thread of its own: a hung poll delays this instance only, and
        never holds the process at exit."""
        label = name or f"poll:{self.source.name}"

        def body() -> None:
            try:
                self.run(until, deadline)
            except Exception as exc:  # a bug: the thread ends; its owner may start it again
                self.crashed = repr(exc)
            finally:
                self.close()

        self._thread = threading.Thread(target=body, name=label, daemon=True)
        self._thread.start()
        return self._thread

    def join(self, timeout: float) -> bool:
        """Wait for the thread `start` made to end (its tuner closed); whether it did."""
        if self._thread is None:
            return True
        self._thread.join(timeout)
        return not self._thread.is_alive()

    # -- the loop ------------------------------------------------------------------------

    def run(
        self,
        until: Callable[[InstanceState], bool] | None = None,
        deadline: float | None = None,
    ) -> InstanceState:
        """Poll on the schedule until `stop`, the source's end, `until(state)` or the
        monotonic `deadline`. The last state published. The tuner stays open: whoever runs
        the loop in its own thread `close`s it there when done (`start`'s thread does)."""
        if self.latency is not None:
            self.latency.start()
        try:
            while not self._stopping.is_set() and not self.source.exhausted:
                self._run_jobs()
                now = self._mono()
                if deadline is not None and now >= deadline:
                    break
                if self.source.paced and now < self.next_due:
                    wait = self.next_due - now
                    if deadline is not None:
                        wait = min(wait, deadline - now)
                    self._wake.wait(min(wait, MAX_WAIT))
                    self._wake.clear()
                    continue
                state = self._step()
                if until is not None and until(state):
                    break
        finally:
            self._run_jobs()
        return self.state

    def _running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def _run_jobs(self) -> None:
        with self._guard:
            jobs, self._jobs = self._jobs, []
        for job in jobs:
            job()

    def close(self) -> None:
        """The tuner closed (its lock released) and the request log's stage, in the thread
        that ran the loop."""
        self._close_tuner()
        latency, self.latency = self.latency, None
        if latency is not None:
            latency.close()

    def _close_tuner(self) -> None:
        tuner, self.tuner = self.tuner, None
        if tuner is not None:
            tuner.close()

    # -- one poll ------------------------------------------------------------------------

    def _poll(self) -> Frame:
        """Read, derive, keep; schedule the next poll."""
        with self._guard:
            self._started += 1
            seq = self._started
        start = time.perf_counter()
        poll = self.source.poll()
        frame = self.tracker.update(poll)
        self.window.add(frame)
        self.failures = 0 if poll.ok else self.failures + 1
        self.next_due = self._mono() + backoff_delay(self.interval, self.failures)
        with self._guard:
            self._latest_seq = seq
            if self._asked_during == seq:  # asked while this poll ran: the next one now
                self.next_due = self._mono()
            if self._asked_during is not None and self._asked_during < seq:
                self._asked_during = None  # this poll started after the ask: served
        seconds = time.perf_counter() - start
        self._counts = self._counts.after(frame.ok, seconds, frame.stats_repairs > 0, frame.t)
        self._last_poll = poll
        return frame

    def _step(self) -> InstanceState:
        """One poll through every stage; the state published."""
        frame = self._poll()
        old = self.state
        findings, error = old.findings, old.rules_error
        frames = self.window.frames()  # one copy of the window per poll
        self._latest = None
        state = self._state(frame, frames, findings, None, error)  # the poll's latency view
        if frame.ok and self.rules is not None:
            findings = self.rules.run(frames, self._since, state.latency)
            error = self.rules.error
            state = replace(state, findings=findings, rules_error=error)
        tuning, failed = None, None
        if self.tuner is not None:
            self.stepping = True
            try:
                tuning = self.tuner.step(state)
            except Exception as exc:  # a bug in the tuner must not stop the polls
                failed = f"tuner failed: {exc!r}"
            finally:
                self.stepping = False
            if tuning is not None and tuning.listen_since is not None:
                self._since = tuning.listen_since
        if self._latest is not None:  # the tuner polled since: end on the latest poll
            state = self._state(self._latest, self.window.frames(), findings, None, error)
        return self._publish(replace(self._with_tuning(state, tuning), tuner_error=failed))

    def poll_in_step(self) -> InstanceState:
        """A poll from inside the tuner's step (a reload or a restart waiting), published
        at once: the frame and the window move on; findings and tuning stay the step's."""
        frame = self._latest = self._poll()
        old = self.state
        new = self._state(frame, self.window.frames(), old.findings, None, old.rules_error)
        waiting = self.tuner.waiting if self.tuner is not None else None
        return self._publish(replace(new, tuning=old.tuning, actions=old.actions, waiting=waiting))

    def _state(
        self,
        frame: Frame,
        frames: tuple[Frame, ...],
        findings: tuple[Finding, ...],
        tuning: StepResult | None,
        error: str | None,
    ) -> InstanceState:
        poll = self._last_poll
        retry = None if frame.ok else max(0.0, self.next_due - self._mono())
        return replace(
            self.state,
            frame=frame,
            poll=poll if frame.ok else None,
            attempt=poll,
            raw=self.source.raw() if frame.ok else None,
            frames=frames,
            findings=findings,
            tuning=tuning,
            counts=self._counts,
            retry_in=retry,
            rules_error=error,
            latency=self._latency(frame, frames, poll),
        )

    def _latency(
        self, frame: Frame, frames: tuple[Frame, ...], poll: Poll | None
    ) -> LatencyView | None:
        """The request log's view at this poll: the stage's (`--latency`), else the one a
        replayed poll carries (None when it recorded none)."""
        if self.latency is not None:
            return self.latency.view(frame, frames)
        return poll.latency if poll is not None else None

    def _with_tuning(self, state: InstanceState, tuning: StepResult | None) -> InstanceState:
        if tuning is None:
            return state
        return replace(state, tuning=tuning, actions=count_actions(state.actions, tuning))

    def _publish(self, state: InstanceState) -> InstanceState:
        with self._guard:
            self.state = state
            self._published_seq = self._latest_seq
            self._guard.notify_all()
        for subscriber in self._subscribers:
            try:
                subscriber(state)
            except Exception as exc:  # a sink's bug must not stop the polls
                key = f"{getattr(subscriber, '__qualname__', subscriber)}: {exc!r}"
                if key not in self._failed_subscribers:
                    self._failed_subscribers.add(key)
                    print(f"uwsgitune: a subscriber failed: {key}", file=sys.stderr)
        return state


def run_replay(
    polls: Iterable[Poll],
    make: Callable[[ReplaySource], InstanceDriver],
    stop: threading.Event | None = None,
) -> list[InstanceDriver]:
    """Drive a recording's instances in the recorded order: each poll, as read, through the
    driver of its instance (`make` builds one for each instance as it first appears), until
    the recording ends or `stop` is set. The drivers, in that order, each with its last
    state."""
    drivers: dict[str, tuple[ReplaySource, InstanceDriver]] = {}
    for poll in polls:
        if stop is not None and stop.is_set():
            break
        pair = drivers.get(poll.source)
        if pair is None:
            source = ReplaySource(poll.source)
            pair = drivers[poll.source] = (source, make(source))
        pair[0].feed(poll)
        pair[1].run(until=lambda _state: True)  # the one poll fed
    return [driver for _source, driver in drivers.values()]


def poll_once(source: Source, rules: RulesRunner | None = None) -> InstanceState:
    """One poll through the stages, published to no one (/probe)."""
    return InstanceDriver(source, rules=rules).run(until=lambda _s: True)
