"""The request log stage of a poll loop: lines in on readiness, one `LatencyView` per poll out.

`LatencyStage` owns the request log receiver (sources/reqlog.py), the sender proof
(sources/logsender.py) and the latency recorder (core/latency.py) of one instance:

- **In, on readiness.** A thread of its own (`reqlog:<address>`) waits on the receiver's
  socket (at most `DRAIN_EVERY` seconds) and drains it: at 10k requests/s a drain once per
  poll would overflow the kernel's buffer, so the lines never wait for a poll. After a
  small drain it rests, so that each drain takes a batch of lines instead of waking for
  every burst: `BATCH_EVERY` (20 ms), or longer when the socket's buffer is large enough
  that even a burst of `BURST_RATE` lines/s fills no more than a quarter of it meanwhile
  (at most `BATCH_MAX`, 100 ms; 50 ms with an 8 MiB buffer). A batch costs less per line
  the larger it is (the parser and the recorder work on a whole drain at once). Each
  source's lines are recorded only when their sender is proved to be the master's; lines
  from a sender proved foreign are refused and counted; lines whose sender could not be
  proved (uwsgitune not root and the master another user's) are recorded but mark the
  view untrusted for `SLICES` seconds, so they are shown and never drive an apply.
  Nothing is drained before the first good poll names the master's pid: lines wait in the
  kernel's queue (its drops are counted).
- **Out, once per poll.** `view(frame, frames)` reads the recorder under the lock (the 10 s
  and 60 s windows, the p99 series, the Prometheus totals) and adds what only the stats
  know: coverage (lines recorded ÷ requests counted over the last 60 s, each line of a
  sampled log counting for the K requests it stands for) and the mean queue
  wait by Little's law from the kernel's listen queue.

Never harms the instance: UDP on loopback, so a stalled or stopped uwsgitune only fills its
own socket's buffer (the kernel drops the rest); the master's `sendmsg` never blocks on it.

Threads: the reader thread records; the poll loop's thread reads (`view`) and names the
master (`set_master`); the lock is held for a drain's recording or a view's reading.
"""

from __future__ import annotations

import select
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence

from uwsgitune.core.frame import Frame
from uwsgitune.core.latency import SLICES, TOP_ROUTES, LatencyRecorder
from uwsgitune.core.latencyreport import LatencyView, coverage
from uwsgitune.core.logline import LineFault
from uwsgitune.core.reqstamp import little_wait
from uwsgitune.sources.logsender import SenderCheck
from uwsgitune.sources.reqlog import DEFAULT_RCVBUF, Receiver

DRAIN_EVERY = 0.05  # seconds: the longest a line waits in the socket when others keep coming
# Seconds the reader rests after a drain, so that the next drain takes a batch: at 10k
# lines/s a wake per burst of datagrams (every ms or so) costs more than the lines do
# (bench/results/latency_overhead.md: the reader thread's 14-17 µs per line without the
# rest, 8-10 with it). It rests only after a drain that took less than a quarter of what
# the socket's buffer holds (`LINE_TRUESIZE` a line), so the rest never fills the buffer
# (the kernel would drop).
BATCH_EVERY = 0.02
# A longer rest where the buffer allows it: the time a quarter of the buffer takes to fill
# at BURST_RATE lines/s (a rate set for the buffer, not measured: traffic that comes back
# after a lull must not find the reader asleep for longer than its buffer lasts), and no
# longer than BATCH_MAX, so that a line waits at most ~0.1 s before a poll can see it.
BURST_RATE = 50_000
BATCH_MAX = 0.1
LINE_TRUESIZE = 832  # bytes the kernel charges a queued 100-byte line (sources/reqlog.py)
SHORT, LONG = 10, 60  # the windows shown (seconds)
LITTLE_SECONDS = 10.0  # the span of the Little's-law estimate
# The receiver's counters a view adds to the parser's faults (`LatencyView.faults`' keys,
# with the `LineFault` names lowercased): every kind a view can report, for the exporter.
RECEIVER_FAULTS = ("oversized", "empty", "cut", "kernel_drops")
FAULT_KINDS = tuple(dict.fromkeys((*(f.name.lower() for f in LineFault), *RECEIVER_FAULTS)))


class LatencyStage:
    """The request log of one instance, from its socket to a `LatencyView` per poll."""

    def __init__(
        self,
        address: str | tuple[str, int],
        *,
        top: int = TOP_ROUTES,
        rcvbuf: int = DEFAULT_RCVBUF,
        check: SenderCheck | None = None,
        receiver: Receiver | None = None,
        clock: Callable[[], float] = time.monotonic,
        batch_every: float = BATCH_EVERY,
    ) -> None:
        self.receiver = receiver if receiver is not None else Receiver(address, rcvbuf=rcvbuf)
        host, port = self.receiver.address
        self.address = f"{host}:{port}"
        self.recorder = LatencyRecorder(top)
        self._check = check
        self._clock = clock
        self._batch_every = batch_every
        self._lock = threading.Lock()
        self.master_pid = 0
        self.refused = 0
        self._untrusted_at: float | None = None  # the last line recorded from an unproven sender
        self._trust_note: str | None = None
        self._last_line: float | None = None
        self._history: deque[tuple[float, int, int]] = deque()  # (mono, lines, requests)
        self._seen_lines = 0  # recorder.recorded at the last view
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.drain_error: str | None = None  # a bug in the reader: said in the view's note

    # -- the reader ----------------------------------------------------------------------

    def start(self) -> None:
        """The reader thread (once; a daemon, so it never holds the process at exit)."""
        if self._thread is not None or self._stop.is_set():
            return
        self._thread = threading.Thread(
            target=self._read, name=f"reqlog:{self.address}", daemon=True
        )
        self._thread.start()

    def _read(self) -> None:
        fd = self.receiver.fileno()
        quarter = max(1, self.receiver.rcvbuf // LINE_TRUESIZE // 4)
        while not self._stop.is_set():
            if self.master_pid <= 0:  # nothing to prove the senders against yet
                self._stop.wait(DRAIN_EVERY)
                continue
            try:
                ready, _, _ = select.select([fd], [], [], DRAIN_EVERY)
            except (OSError, ValueError):  # closed under us: the stage is closing
                return
            if ready:
                before = self.receiver.totals.received
                try:
                    self.drain_once()
                except Exception as exc:  # a bug: said, and the reading goes on
                    self.drain_error = f"request log reader failed: {exc!r}"
                    self._stop.wait(1.0)
                if self.receiver.totals.received - before < quarter:
                    self._stop.wait(self._rest(quarter))

    def _rest(self, quarter: int) -> float:
        """How long to rest after a small drain, with a buffer whose quarter holds `quarter`
        lines: `batch_every`, or the time a quarter takes to fill at `BURST_RATE` when that
        is longer (`BATCH_MAX` at most)."""
        return max(self._batch_every, min(BATCH_MAX, quarter / BURST_RATE))

    def drain_once(self) -> int:
        """Drain what is queued now and record it; the lines recorded. (The reader thread's
        work, callable directly by a test that runs no thread.)"""
        drained = self.receiver.drain()
        if not drained.received:
            return 0
        now = self._clock()
        check = self._sender_check()
        recorded = 0
        with self._lock:
            for source, lines in drained.lines.items():
                verdict = check.verdict(source, self.master_pid)
                if verdict.foreign:
                    self.refused += len(lines)
                    continue
                if not verdict.proven:
                    self._untrusted_at = now
                    self._trust_note = (
                        f"request log sender not proved to be the master's: {verdict.reason}; "
                        "shown, never acted on (run uwsgitune as the instance's user or root)"
                    )
                recorded += self.recorder.ingest(lines, now)
            self._last_line = now
        return recorded

    def _sender_check(self) -> SenderCheck:
        if self._check is None:
            self._check = SenderCheck()
        return self._check

    def set_master(self, pid: int) -> None:
        """The master's pid, from the latest good poll: the senders are proved against it."""
        if pid > 0:
            self.master_pid = pid

    # -- the view ------------------------------------------------------------------------

    def view(self, frame: Frame | None, frames: Sequence[Frame] = ()) -> LatencyView:
        """The latency at this poll; `frame` the poll's (its requests for coverage, its master
        pid), `frames` the window it belongs to (the queue for Little's law)."""
        if frame is not None and frame.ok:
            self.set_master(frame.master_pid)
        now = self._clock()
        with self._lock:
            rec = self.recorder
            short = rec.window(now, SHORT)
            long = rec.window(now, LONG)
            series = rec.p99_series(now, LONG)
            export = rec.export()
            lines = rec.recorded
            every = rec.sample_every
            faults = {k.name.lower(): n for k, n in rec.tally.faults.items() if n}
            mismatch = rec.tally.mismatch()
            untrusted_at, note = self._untrusted_at, self._trust_note
            last = self._last_line
            refused = self.refused
        totals = self.receiver.totals
        for key in RECEIVER_FAULTS:
            n = getattr(totals, key)
            if n:
                faults[key] = faults.get(key, 0) + n
        trusted = untrusted_at is None or now - untrusted_at > SLICES
        if self.drain_error is not None:
            note = self.drain_error if note is None else f"{note}; {self.drain_error}"
        return LatencyView(
            address=self.address,
            short=short,
            long=long,
            p99_series=series,
            export=export,
            lines=lines,
            coverage=self._coverage(frame, lines, every),
            trusted=trusted,
            trust_note=None if trusted and self.drain_error is None else note,
            refused=refused,
            faults=faults,
            mismatch=mismatch,
            little_wait_ms=_little_ms(frames, frame),
            silent_for=None if last is None else max(0.0, now - last),
            sample_every=every,
        )

    def _coverage(self, frame: Frame | None, lines: int, every: int = 1) -> float | None:
        """Lines recorded ÷ requests the stats counted, over the polls of the last 60 s; a
        sampled line (1 in `every`) counts for `every` requests."""
        new_lines, self._seen_lines = lines - self._seen_lines, lines
        if frame is None or not frame.has_rates or frame.rps is None or frame.dt is None:
            return self._share(frame)
        self._history.append((frame.mono, new_lines * every, round(frame.rps * frame.dt)))
        return self._share(frame)

    def _share(self, frame: Frame | None) -> float | None:
        if frame is not None:
            while self._history and frame.mono - self._history[0][0] > LONG:
                self._history.popleft()
        got = sum(n for _, n, _ in self._history)
        asked = sum(r for _, _, r in self._history)
        return coverage(got, asked)

    def close(self) -> None:
        """The reader stopped, the socket and the netlink socket closed (once)."""
        if self._stop.is_set() and self._thread is None and self._check is None:
            return
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join(2.0)
        self.receiver.close()
        check, self._check = self._check, None
        if check is not None:
            check.close()


def _little_ms(frames: Sequence[Frame], frame: Frame | None) -> float | None:
    """Lq / λ over the good polls of the last `LITTLE_SECONDS` (ms); None when unknown."""
    if frame is None:
        return None
    since = frame.mono - LITTLE_SECONDS
    queues: list[float] = []
    rates: list[float] = []
    for f in frames:
        if f.mono < since or not f.has_rates or f.rps is None:
            continue
        known = [s.queue for s in f.sockets if s.queue is not None]
        if not known:
            continue
        queues.append(float(sum(known)))
        rates.append(f.rps)
    if not queues:
        return None
    wait = little_wait(sum(queues) / len(queues), sum(rates) / len(rates))
    return None if wait is None else wait * 1000.0
