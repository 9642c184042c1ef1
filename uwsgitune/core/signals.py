"""The per-frame signals every decision reads, each defined once.

The rules (`uwsgitune.rules.context`), the tuner (`uwsgitune.tuner.measures`), the TUI and the
exporter read these, never their own variants. Their thresholds are settings declared once
in `uwsgitune.core.settings` (`cpu_saturated`, `busy_full`); `DEFAULTS` holds their defaults.

- `cpu_saturation`: the instance's CPU against the CPU it can get (1.0 = all of it).
- `requests_waiting`: connections waiting, summed over the instance's sockets
  (`waiting_unless_full`: and none of them full).
- `fullest_fill`: queue / backlog of the fullest socket (the first to drop connections).
- `all_busy`: every worker busy in the poll.
- `listen_backlog`: the smallest known backlog (the first socket to fill).
"""

from __future__ import annotations

from uwsgitune.core.frame import Frame
from uwsgitune.core.settings import SharedSettings

DEFAULTS = SharedSettings()


def cpu_saturation(frame: Frame) -> float | None:
    """The instance's CPU use against the CPU it can get, at most 1: its effective CPUs,
    less what the rest of the host keeps busy (more workers cannot use CPU others hold).
    Niced batch work gives way to the workers, so it does not count as taken."""
    inst, cpus = frame.instance_cpu_cores, frame.effective_cpus
    if inst is None or not cpus or cpus < 0.01:  # below 1 ms a 100 ms period: no real limit
        return None
    available = cpus
    busy = frame.host_contended_pct
    if busy is not None and frame.cpu_count:
        idle = (1 - busy / 100) * frame.cpu_count
        available = min(cpus, inst + max(idle, 0.0))
    return min(inst / available, 1.0) if available > 0 else 1.0


def cpu_saturated(frame: Frame, threshold: float = DEFAULTS.cpu_saturated) -> bool:
    sat = cpu_saturation(frame)
    return sat is not None and sat >= threshold


def own_cpu_share(frame: Frame) -> float | None:
    """The instance's own CPU / its effective CPUs: what its workers themselves burn,
    whatever the neighbours do (`Frame.own_cpu_share`)."""
    return frame.own_cpu_share


def _queued(frame: Frame, unless_full: bool) -> int | None:
    """The known queues summed, in one loop over the sockets (every rule and the tuner read
    it per poll, per frame); None when none is known, or (`unless_full`) a socket is full."""
    total: int | None = None
    for s in frame.sockets:
        if unless_full and s.full:
            return None
        if s.queue is not None:
            total = s.queue if total is None else total + s.queue
    return total


def requests_waiting(frame: Frame) -> int | None:
    """Connections waiting to be accepted, summed over the sockets whose queue is known;
    None when none is."""
    return _queued(frame, False)


def waiting_unless_full(frame: Frame) -> int | None:
    """`requests_waiting`, but None as well when a socket is full (`Frame.queue_full`): a
    count the kernel cut at the backlog is not the demand."""
    return _queued(frame, True)


def fullest_fill(frame: Frame) -> float | None:
    """Queue / backlog of the fullest socket; None when no socket's fill is known."""
    fills = [s.fill for s in frame.sockets if s.fill is not None]
    return max(fills) if fills else None


def busy(ratio: float | None, busy_full: float = DEFAULTS.busy_full) -> bool:
    """A busy ratio (Little's L / capacity, one poll or a mean) that means all busy."""
    return ratio is not None and ratio >= busy_full


def all_busy(frame: Frame, busy_full: float = DEFAULTS.busy_full) -> bool:
    """Every worker busy in this poll: by Δrunning_time (exact over the interval, but lumpy,
    as a request's time counts when it ends), or by every live worker's status at the poll."""
    return busy(frame.busy_ratio, busy_full) or (frame.live > 0 and frame.busy >= frame.live)


def listen_backlog(frame: Frame) -> int | None:
    """The smallest known backlog among the sockets (the first to fill)."""
    known = [s.backlog for s in frame.sockets if s.backlog]
    return min(known) if known else None
