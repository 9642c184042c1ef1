"""What one scrape reads about one instance: a frozen snapshot, built once per poll (the
daemon) or per scrape (`watch --metrics-listen`). The collector never reaches into live
objects, so a poll finishing mid-scrape cannot tear the output."""

from __future__ import annotations

from dataclasses import dataclass

from uwsgitune.core.frame import Frame
from uwsgitune.core.model import StatsDoc
from uwsgitune.core.samples import HostSample, Poll
from uwsgitune.sources.watcher import InstanceWatch


@dataclass(frozen=True)
class PollCounts:
    """The daemon's own poll accounting for one instance (cumulative)."""

    polls: int = 0
    errors: int = 0
    seconds: float = 0.0  # wall time of every poll, summed
    last_seconds: float = 0.0


@dataclass(frozen=True)
class Snapshot:
    stats_uri: str  # uwsgi_exporter's label: the address as a URI
    name: str = ""
    mode: str = ""
    frame: Frame | None = None  # the latest frame (an error frame when the last poll failed)
    poll: Poll | None = None  # the good poll `frame` was made from; None unless frame.ok
    findings: tuple[tuple[str, str], ...] = ()  # (rule id, severity) of active findings
    recommended: tuple[tuple[str, float], ...] = ()  # (setting, value)
    actions: tuple[tuple[str, str, int], ...] = ()  # (kind, result, count)
    decision: tuple[str, str, int] | None = None  # the tuner's last (action, code, desired)
    counts: PollCounts | None = None

    @property
    def up(self) -> bool:
        return self.frame is not None and self.frame.ok and self.doc is not None

    @property
    def doc(self) -> StatsDoc | None:
        return self.poll.doc if self.poll is not None else None

    @property
    def host(self) -> HostSample | None:
        return self.poll.host if self.poll is not None else None


def pair(frame: Frame | None, last_good: Poll | None) -> Poll | None:
    """The poll behind `frame`, or None when the frame is an error or they do not match."""
    if frame is None or not frame.ok or last_good is None:
        return None
    return last_good if last_good.t == frame.t and last_good.mono == frame.mono else None


def from_watch(watch: InstanceWatch, name: str = "", mode: str = "") -> Snapshot:
    """Read a live InstanceWatch stepped by another thread (the TUI, `watch --plain`).

    The tracker sets `prev` and `last_frame` one after the other; a scrape landing between
    the two sees them mismatched, so it reads again (the gap is a few microseconds)."""
    tracker = watch.tracker
    frame, poll = tracker.last_frame, None
    for _ in range(5):
        frame = tracker.last_frame
        poll = pair(frame, tracker.prev)
        if frame is None or not frame.ok or poll is not None:
            break
    return Snapshot(stats_uri=watch.address.uri, name=name, mode=mode, frame=frame, poll=poll)
