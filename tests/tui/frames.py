"""Deterministic frames for the TUI tests: no clock, no uWSGI.

Every frame comes out of the real `Tracker`, fed synthetic stats documents and host samples
(`tests.support.instances.Instance`): a demo instance of `workers` slots, `busy` of them in a
request, worker s serving 10+s req/s (46 in all with 4) at a mean of 12.5 ms, `cpu` cores
used of 2 effective CPUs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tests.support.instances import MIB, Instance, Load, document
from uwsgitune.core.derive import Tracker
from uwsgitune.core.frame import Frame, RequestView, SocketView
from uwsgitune.core.model import parse_stats
from uwsgitune.core.samples import Poll

T0 = 1_700_000_000.0  # a fixed epoch: every view reads time from the frames only
MONO0 = 1000.0
SOURCE = "/tmp/demo/stats.sock"
GIB = 1024 * MIB


def load(
    *,
    workers: int = 4,
    busy: int = 2,
    cheap: int = 0,
    queue: int = 3,
    backlog: int = 16,
    cpu: float = 0.5,
    rss: int = 32 * MIB,
) -> Load:
    """The demo instance's load: `busy` workers each serving GET /io/<slot> for 1.5+slot s."""
    live = workers - cheap
    rps = sum(10.0 + s for s in range(live))  # worker s serves 10+s req/s
    return Load(
        live=live,
        cheap=cheap,
        busy=busy,
        rps=rps,
        in_service=rps * 0.0125,  # a mean of 12.5 ms
        worker_cpu=cpu / live if live else 0.0,
        host_busy=max(0.4 * 4, cpu),  # 40% of the host's 4 CPUs, the instance's included
        cpus=4,
        effective_cpus=2.0,
        somaxconn=4096,
        rss=rss,
        mem_available=8 * GIB,
        mem_total=16 * GIB,
        sockets=(
            SocketView("127.0.0.1:8000", "http", False, queue, backlog, "stats"),
            SocketView("/tmp/demo/app.sock", "uwsgi", True, 0, 100, "kernel"),
        ),
        requests=tuple(RequestView(0, "GET", f"/io/{s}", 1.5 + s) for s in range(busy)),
        avg_rt_us=12_000,
        weights=tuple(10.0 + s for s in range(live)),
        spawned=T0 - 600,
    )


def varying(
    n: int, fn: Callable[[int], dict[str, Any]], *, reload_at: int | None = None
) -> tuple[Frame, ...]:
    """Polls 0..n-1, 1 s apart, of one demo instance whose load at poll i is `load(**fn(i))`;
    the workers respawn (`r`) at poll `reload_at`."""
    inst = instance()
    inst.frame(-1, load(**fn(0)))  # the first poll has no rates
    return tuple(inst.frame(i, load(**fn(i)), reload=i == reload_at) for i in range(n))


def history(n: int = 30, *, reload_at: int | None = None, **kw: Any) -> tuple[Frame, ...]:
    return varying(n, lambda _: kw, reload_at=reload_at)


def history_polls(n: int = 30, **kw: Any) -> tuple[Poll, ...]:
    """The polls behind `history(n)` (its frames, from the second on): polls 0..n-1."""
    inst = instance()
    return tuple(inst.poll(i, load(**kw)) for i in range(n))


def frame(i: int = 0, **kw: Any) -> Frame:
    """The poll at T0+i of a demo instance polled a second before."""
    inst = instance()
    inst.frame(i - 1, load(**kw))
    return inst.frame(i, load(**kw))


def instance() -> Instance:
    return Instance(SOURCE, T0, MONO0)


def disconnected(n: int, error: str = "connection refused", **kw: Any) -> tuple[Frame, ...]:
    """`history(n)` and then a failed poll at n (the tracker's error frame)."""
    inst = instance()
    inst.frame(-1, load(**kw))
    frames = [inst.frame(i, load(**kw)) for i in range(n)]
    return (*frames, inst.error(n, error))


def emperor_frame(i: int = 0) -> Frame:
    """An Emperor's stats: two vassals, no workers (its second poll)."""
    vassals = [
        {
            "id": "app1.ini",
            "pid": 2001,
            "ready": 1,
            "accepting": 1,
            "respawns": 0,
            "born": T0 - 100,
            "last_mod": T0 - 100,
        },
        {
            "id": "app2.ini",
            "pid": 2002,
            "ready": 0,
            "accepting": 0,
            "respawns": 3,
            "born": T0 - 50,
            "last_mod": T0 - 50,
        },
    ]
    doc = parse_stats(
        document(2000, [], vassals=vassals, emperor=["/etc/uwsgi/vassals"], sockets=[])
    )
    tracker = Tracker("/tmp/emperor.sock")
    tracker.update(Poll("/tmp/emperor.sock", T0 + i - 1, MONO0 + i - 1, doc=doc))
    return tracker.update(Poll("/tmp/emperor.sock", T0 + i, MONO0 + i, doc=doc))
