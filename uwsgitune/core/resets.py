"""Reset and reload detection between two stats documents of one instance.

uWSGI's per-worker counters (`requests`, `exceptions`, `running_time`, `tx`, `harakiri_count`,
`respawn_count`) live in the worker *slot*: they survive a worker respawn (`w`, `c`,
harakiri, max-requests, cheaping) and all reset to 0 on a graceful reload `r`. So:

- a slot is *reset* when a counter went down, or when its pid changed while `respawn_count`
  did not grow (a respawn adds one; a reload puts it back to 1);
- the instance *reloaded* when the master pid is unchanged and most previously live slots
  reset; it *restarted* when the master pid changed.
"""

from __future__ import annotations

from uwsgitune.core.model import StatsDoc, Worker


def slot_reset(prev: Worker, cur: Worker) -> bool:
    """True when this slot's counters restarted from zero between the two documents."""
    if (
        cur.requests < prev.requests
        or cur.running_time < prev.running_time
        or cur.exceptions < prev.exceptions
        or cur.tx < prev.tx
    ):
        return True
    respawned = prev.pid > 0 and cur.pid > 0 and cur.pid != prev.pid
    return respawned and cur.respawn_count <= prev.respawn_count


def slot_resets(prev: StatsDoc, cur: StatsDoc) -> list[bool]:
    """`slot_reset` of each slot the two documents share, in order: once a poll."""
    return [slot_reset(p, c) for p, c in zip(prev.workers, cur.workers, strict=False)]


def detect_reload(prev: StatsDoc, cur: StatsDoc, resets: list[bool] | None = None) -> bool:
    """A graceful reload: same master, and most slots that were live have reset. `resets`:
    `slot_resets(prev, cur)`, when the caller has it."""
    if len(prev.workers) != len(cur.workers):
        return True  # `processes` changed: only a reload re-reads it
    if resets is None:
        resets = slot_resets(prev, cur)
    pairs = n = 0
    for p, c, reset in zip(prev.workers, cur.workers, resets, strict=True):
        if p.pid > 0 and c.pid > 0:
            pairs += 1
            n += reset
    return pairs > 0 and n * 2 > pairs


def loaded_at_estimate(doc: StatsDoc) -> float | None:
    """Best guess of the last (re)load from spawn times: slots spawned once since then."""
    first = [w.last_spawn for w in doc.workers if w.pid > 0 and w.respawn_count == 1]
    spawned = first or [w.last_spawn for w in doc.workers if w.pid > 0 and w.last_spawn > 0]
    return min(spawned) if spawned else None


def respawns_between(prev: StatsDoc, cur: StatsDoc) -> int:
    """Worker respawns between two documents, not counting uncheaps: a cheap slot brought
    back (by `+` or a cheaper algorithm) gets a new pid and `respawn_count` + 1, but nothing
    died. A slot that was live and respawned did die (crash, harakiri, max-requests, `r`)."""
    n = 0
    for p, c in zip(prev.workers, cur.workers, strict=False):
        d = max(c.respawn_count - p.respawn_count, 0)
        if d and not p.live and c.live:
            d -= 1  # the uncheap itself
        n += d
    return n
