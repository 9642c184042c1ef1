"""The rules' per-frame signals as columns, kept between polls.

The rules read a handful of signals (requests/s, busy ratio, CPU saturation, queued
connections, ...) over the same 1-2 minute look-backs at every poll. Reading them frame by
frame is most of what the rules cost: 14 rules x 120 frames of attribute reads and Python
calls each poll. A `Columns` keeps each signal's value of every rated frame, in poll order,
and a `RulesRunner` passes the same one at every poll: a poll computes its new frames'
values, drops the values of frames older than the look-back, and a rule's look-back is a
slice.

Frames are matched by their poll times (`mono`, `t`): the kept run must line up with the
new frames, or the columns start again. A frame the window compacts keeps its fields and
poll times (core/compact.py), so its values stand. Pure; not thread-safe (one runner, one
polling thread).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Sequence

from uwsgitune.core.frame import Frame

Signal = Callable[[Frame], float | int | bool | None]
Memo = dict[tuple[str, float, float], float | None]


class Columns:
    def __init__(self) -> None:
        self.monos: list[float] = []
        self.ts: list[float] = []
        # each column holds the values of the frames at monos[0 : len(column)]
        self.cols: dict[str, list[float | None]] = {}
        # single frames' signals by (signal, mono, t), for look-backs that are not a slice
        # of the rated frames (the polls a rule picked out)
        self.memo: Memo = {}

    def sync(self, monos: list[float], ts: list[float]) -> None:
        """Line the columns up with this poll's rated frames, by their poll times (`mono`,
        `t`), oldest first: keep the values of the frames still there, drop the rest."""
        old = self.monos
        if old and monos:
            k = bisect_left(old, monos[0])
            n = len(old) - k
            if n <= len(monos) and old[k:] == monos[:n] and self.ts[k:] == ts[:n]:
                if k:
                    del old[:k], self.ts[:k]
                    for col in self.cols.values():
                        del col[:k]
                old += monos[n:]
                self.ts += ts[n:]
                self._prune(monos[0])
                return
        self.monos, self.ts, self.cols = list(monos), list(ts), {}
        self._prune(monos[0] if monos else None)

    def column(
        self, name: str, get: Signal, rated: Sequence[Frame], start: int, stop: int
    ) -> list[float | None]:
        """`get` of the synced frames `rated[start:stop]`, as floats, None kept; computed
        only for frames no earlier poll computed."""
        col = self.cols.get(name)
        if col is None:
            col = self.cols[name] = []
        if len(col) < stop:
            for f in rated[len(col) : stop]:
                v = get(f)
                col.append(None if v is None else float(v))
        return col[start:stop]

    def _prune(self, edge: float | None) -> None:
        """Drop the memo's entries of polls before `edge` (the look-back), once there are
        many."""
        memo = self.memo
        if edge is None:
            memo.clear()
        elif len(memo) > 8 * len(self.monos) + 64:
            for key in [k for k in memo if k[1] < edge]:
                del memo[key]
