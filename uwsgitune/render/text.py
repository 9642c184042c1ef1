"""The `watch --once` summary and the `--plain` line, as pure functions of a frame (and, with
`--latency`, of the poll's `LatencyView`: its lines and fields are added, nothing else
changes)."""

from __future__ import annotations

import time

from uwsgitune.core.frame import Frame, SocketView
from uwsgitune.core.latencyreport import LatencyView, Percentiles
from uwsgitune.core.units import duration, ms, num, pct, percent, reading, size
from uwsgitune.rules.rulesettings import DEFAULT_SETTINGS


def _clock(t: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(t))


def socket_line(s: SocketView) -> str:
    family = "unix" if s.unix else "tcp"
    if s.queue is None:
        depth = "queue unknown (netlink sock_diag unavailable)"
    else:
        depth = f"queue {s.queue}/{s.backlog if s.backlog is not None else '?'}"
        if s.full:
            depth += "  FULL: new connections are refused or dropped"
        elif s.fill is not None and s.fill >= DEFAULT_SETTINGS.listen_fill:  # the rules' one
            depth += "  nearly full"
    src = " (kernel)" if s.source == "kernel" else ""
    return f"{s.name} ({s.proto}, {family}) {depth}{src}"


def error_line(f: Frame) -> str:
    """The one line naming the address, what failed and the likely fix (never the address twice:
    a poll error already starts with it)."""
    error = f.error or "no document"
    return error if error.startswith(f"{f.source}: ") else f"{f.source}: {error}"


def _reason(f: Frame) -> str:
    return error_line(f)[len(f.source) + 2 :]


def _title(f: Frame) -> str:
    head = f"uWSGI {f.version or '?'}  {f.source}  master {f.master_pid or '?'}"
    if f.since_reload is not None:
        head += f"  {duration(f.since_reload)} since last (re)load"
    return head


def _emperor_lines(f: Frame) -> list[str]:
    lines = [f"{_title(f)}  (Emperor, {len(f.vassals)} vassals)"]
    for v in f.vassals:
        state = "ready" if v.ready else "not ready"
        lines.append(f"  vassal {v.name:<24} pid {v.pid:<7} {state:<10} respawns {v.respawns}")
    return lines


def _state_lines(f: Frame) -> list[str]:
    """Disconnected, reloaded just now, or reloaded earlier: what the rates below mean."""
    lines = []
    if f.kind == "error":
        lines.append(f"  DISCONNECTED since {_clock(f.disconnected_since or f.t)}: {_reason(f)}")
    if f.stats_repairs:
        lines.append(
            f"  note      {f.stats_repairs} request string(s) in the stats were invalid JSON "
            "(uWSGI escapes too little); repaired, every counter is intact"
        )
    if f.kind in ("reload", "restart"):
        lines.append(f"  {f.kind.upper()} detected between polls: counters reset, no rates yet")
    elif f.reloads_seen:
        lines.append(
            f"  note      {f.reloads_seen} reload/restart seen between polls (counters reset, "
            "reported as a reload, not traffic); rates are from the polls after it"
        )
    return lines


def _traffic_lines(f: Frame) -> list[str]:
    return [
        f"  workers   {f.live} live / {f.workers_max} max: {f.busy} busy, {f.idle} idle, "
        f"{f.cheap} cheap   threads/worker {f.threads}",
        f"  traffic   {reading(f.rps, 'req/s', '-')}   {reading(f.eps, 'exceptions/s', '-')}",
        f"  latency   mean {ms(f.mean_rt_ms)} (Δrunning_time/Δrequests)   "
        f"uWSGI avg_rt {ms(f.avg_rt_ms)} (half-life average, not a mean)",
        f"  load      busy {reading(f.busy_ratio, 'ratio', '-')}   "
        f"Little's L {reading(f.littles_l, 'requests', '-')} in service",
    ]


def _socket_lines(f: Frame) -> list[str]:
    lines = [
        f"  {'sockets' if i == 0 else '':<9} {socket_line(s)}" for i, s in enumerate(f.sockets)
    ]
    if f.listen_overflows_delta is not None:
        grew = f.listen_overflows_delta
        note = "  (TCP backlogs overflowed)" if grew else ""
        lines.append(f"  {'':<9} kernel ListenOverflows +{grew} since last poll, host-wide{note}")
    return lines


def _resource_lines(f: Frame) -> list[str]:
    eff = num(f.effective_cpus, "g")
    cores = reading(f.instance_cpu_cores, "cores", "-")
    src = {"stats": "--memory-report", "psutil": "psutil", "none": "unknown"}[f.mem_source]
    return [
        f"  cpu       host {pct(f.host_cpu_pct)}   instance {cores} "
        f"cores of {eff} effective ({f.cpu_count or '?'} host CPUs)",
        f"  memory    {size(f.mem_per_worker)}/worker, {size(f.mem_total_rss)} total ({src})   "
        f"available {size(f.mem_available)} of {size(f.mem_limit)}",
        f"  health    harakiri {f.harakiri_total} (+{num(f.harakiri_delta, 'd', '?')})   "
        f"respawns {f.respawns_total} (+{num(f.respawns_delta, 'd', '?')})   "
        f"signal queue {f.signal_queue}",
    ]


def _spread(p: Percentiles | None, seconds: int) -> str:
    if p is None:
        return f"{seconds}s: no request"
    return (
        f"{seconds}s: p50 {ms(p.p50_ms)}  p95 {ms(p.p95_ms)}  p99 {ms(p.p99_ms)}  "
        f"max {ms(p.max_ms)}  ({reading(p.count, 'requests')})"
    )


def latency_lines(view: LatencyView) -> list[str]:
    """The request log's block (`--latency`): service time and queue wait over 10 s and
    60 s, the Little's-law estimate when the proxy stamps nothing, coverage, trust."""
    lines = [
        f"  service   {_spread(view.short.service, 10)}",
        f"  {'':<9} {_spread(view.long.service, 60)}",
    ]
    if view.stamped:
        lines.append(f"  queue     {_spread(view.short.queue, 10)}")
        lines.append(f"  {'':<9} {_spread(view.long.queue, 60)}")
        if view.long.total is not None:  # each request's wait + service
            lines.append(f"  total     {_spread(view.short.total, 10)}")
            lines.append(f"  {'':<9} {_spread(view.long.total, 60)}")
    elif view.little_wait_ms is not None:
        lines.append(
            f"  queue     ≈ {ms(view.little_wait_ms)} mean, an estimate (Little's law on the "
            "listen queue: the proxy stamps no X-Request-Start)"
        )
    else:
        lines.append("  queue     unknown (the proxy stamps no X-Request-Start)")
    logged = "?" if view.coverage is None else percent(view.coverage)
    if view.sample_every > 1:
        lines.append(
            f"  logged    1 in {view.sample_every} sampled; {logged} of the requests counted "
            f"  {view.lines} lines recorded"
        )
    else:
        lines.append(f"  logged    {logged} of the requests counted   {view.lines} lines recorded")
    if view.mismatch is not None:
        lines.append(f"  FORMAT MISMATCH: {view.mismatch}")
    if not view.trusted:
        lines.append(f"  UNTRUSTED: {view.trust_note or 'the sender is not proved'}")
    return lines


def summary(f: Frame, latency: LatencyView | None = None) -> list[str]:
    """The readable block of `watch --once` (with the request log's when `latency`)."""
    if f.kind == "error" and not f.master_pid:
        return [error_line(f)]
    if f.emperor:
        return _emperor_lines(f)
    return [
        _title(f),
        *_state_lines(f),
        *_traffic_lines(f),
        *(latency_lines(latency) if latency is not None else ()),
        *_socket_lines(f),
        *_resource_lines(f),
    ]


def latency_fields(view: LatencyView) -> list[str]:
    """`--plain`'s key=value fields of the request log, over the last 10 s (ms)."""
    p, q = view.short.service, view.short.queue
    values = (None,) * 4 if p is None else (p.p50_ms, p.p95_ms, p.p99_ms, p.max_ms)
    names = ("p50", "p95", "p99", "max")
    fields = [f"{k}_ms={num(v, '.2f')}" for k, v in zip(names, values, strict=True)]
    if q is not None:
        fields.append(f"queue_p99_ms={num(q.p99_ms, '.2f')}")
    else:
        fields.append(f"queue_est_ms={num(view.little_wait_ms, '.2f')}")
    fields.append(f"logged={num(view.coverage, '.3f')}")
    if view.sample_every > 1:
        fields.append(f"sampled=1/{view.sample_every}")
    if not view.trusted:
        fields.append("trusted=no")
    return fields


def plain_line(f: Frame, latency: LatencyView | None = None) -> str:
    """One line per poll for logs and pipes: key=value, stable order (the request log's
    fields last, with `latency`)."""
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(f.t))
    if f.kind == "error":
        since = _clock(f.disconnected_since or f.t)
        return f"{stamp} {f.source} disconnected since {since}: {_reason(f)}"
    queues = ",".join(
        f"{s.queue if s.queue is not None else '?'}/{s.backlog if s.backlog is not None else '?'}"
        for s in f.sockets
    )
    busy = None if f.busy_ratio is None else f.busy_ratio * 100
    parts = [
        stamp,
        f.source,
        f"event={f.kind}" if f.kind != "ok" else "",
        f"live={f.live}/{f.workers_max}",
        f"busy={f.busy}",
        f"rps={num(f.rps)}",
        f"eps={num(f.eps, '.2f')}",
        f"mean_rt_ms={num(f.mean_rt_ms, '.2f')}",
        f"busy_pct={num(busy, '.0f')}",
        f"L={num(f.littles_l, '.2f')}",
        f"queue={queues or '-'}",
        f"overflows={num(f.listen_overflows_delta, 'd')}",
        f"cpu_cores={num(f.instance_cpu_cores, '.2f')}/{num(f.effective_cpus, 'g')}",
        f"rss={size(f.mem_total_rss).replace(' ', '')}",
        *(latency_fields(latency) if latency is not None else ()),
    ]
    return " ".join(p for p in parts if p)
