"""The instance summary at the top of a pane: pure functions of a frame and its history."""

from __future__ import annotations

import time
from collections.abc import Sequence

from rich.text import Text

from uwsgitune.core.frame import Frame, SocketView
from uwsgitune.core.signals import all_busy, cpu_saturated
from uwsgitune.core.units import duration, ms, pct, reading, size

QUEUE_MINUTE = 60.0


def clock(t: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(t))


def bar(fill: float | None, width: int = 10) -> Text:
    """A depth-over-backlog bar: green, yellow from 50%, red when full."""
    if fill is None:
        return Text("?" * width, style="dim")
    cells = max(0, min(width, round(fill * width)))
    style = "red" if fill >= 1 else ("yellow" if fill >= 0.5 else "green")
    return Text.assemble(("█" * cells, style), ("░" * (width - cells), "dim"))


def socket_text(s: SocketView) -> Text:
    family = "unix" if s.unix else "tcp"
    out = Text.assemble((f"{s.name} ", "bold"), (f"{family} ", "dim"), bar(s.fill), " ")
    if s.queue is None:
        out.append("queue unknown", style="dim")
        return out
    out.append(f"{s.queue}/{s.backlog if s.backlog is not None else '?'}")
    if s.full:
        out.append(" FULL", style="bold red")
    if s.source == "kernel":
        out.append(" (kernel)", style="dim")
    return out


def queue_full_events(frames: Sequence[Frame]) -> tuple[int, int | None]:
    """Over the last minute: polls that saw a full queue, and the kernel's overflow growth."""
    if not frames:
        return 0, None
    edge = frames[-1].t - QUEUE_MINUTE
    recent = [f for f in frames if f.t >= edge]
    full = sum(1 for f in recent if f.ok and f.queue_full)
    deltas = [f.listen_overflows_delta for f in recent if f.listen_overflows_delta is not None]
    return full, (sum(deltas) if deltas else None)


def _title(f: Frame) -> Text:
    out = Text.assemble(("uWSGI ", "bold"), (f.version or "?", "bold cyan"))
    out.append(f"  master {f.master_pid or '?'}")
    if f.since_reload is not None:
        out.append(f"  up {duration(f.since_reload)}")
    if f.reloads_seen:
        out.append(f"  reloads {f.reloads_seen}", style="yellow")
    return out


def state_line(f: Frame, retry_in: float | None) -> Text | None:
    if f.kind == "error":
        since = clock(f.disconnected_since or f.t)
        retry = "" if retry_in is None else f"; reconnecting in {retry_in:.0f}s"
        return Text(f"DISCONNECTED since {since}{retry}: {f.error}", style="bold red")
    if f.kind in ("reload", "restart"):
        return Text(f"{f.kind.upper()} detected: counters reset, rates on the next poll", "yellow")
    if f.stats_repairs:
        text = f"{f.stats_repairs} request string(s) in the stats were invalid JSON; repaired"
        return Text(text, style="yellow")
    if f.kind == "first":
        return Text("first poll: rates after the next one", style="dim")
    return None


def _workers(f: Frame) -> Text:
    busy_style = "bold red" if all_busy(f) else "yellow"
    return Text.assemble(
        ("workers ", "bold"),
        f"{f.live}/{f.workers_max} live  ",
        (f"{f.busy} busy", busy_style),
        f"  {f.idle} idle  {f.cheap} cheap",
        (f"  x{f.threads} threads" if f.threads > 1 else "", "dim"),
    )


def _traffic(f: Frame) -> Text:
    return Text.assemble(
        ("traffic ", "bold"),
        (reading(f.rps, "req/s", "- req/s"), "bold"),
        f"  mean {ms(f.mean_rt_ms)}  busy {reading(f.busy_ratio, 'ratio', '-')}  "
        f"L {reading(f.littles_l, '', '-')}",
        (f"  exc {reading(f.eps, '', '-')}/s" if f.eps else "", "red"),
    )


def _queues(f: Frame, frames: Sequence[Frame]) -> list[Text]:
    lines = [Text.assemble(("queue ", "bold"), socket_text(s)) for s in f.sockets]
    full, over = queue_full_events(frames)
    tail = Text.assemble(
        ("  ", ""),
        (f"full {full}x/min", "bold red" if full else ""),
        f"  overflows +{over if over is not None else '?'}/min",
        f"  somaxconn {f.somaxconn if f.somaxconn is not None else '?'}",
    )
    return [*lines, tail]


def _host(f: Frame) -> list[Text]:
    cpu_style = "bold red" if cpu_saturated(f) else ""  # the rules' and the tuner's threshold
    src = {"stats": "memory-report", "psutil": "psutil", "none": "unknown"}[f.mem_source]
    return [
        Text.assemble(
            ("cpu ", "bold"),
            f"host {pct(f.host_cpu_pct)}  ",
            (f"instance {reading(f.instance_cpu_cores, 'cores', '-')}", cpu_style),
            f" of {reading(f.effective_cpus, 'cpus', '? CPUs')} ({f.cpu_count or '?'} on host)",
        ),
        Text.assemble(
            ("mem ", "bold"),
            f"{_sz(f.mem_per_worker)}/wkr {_sz(f.mem_total_rss)} total  ",
            f"avail {_sz(f.mem_available)}/{_sz(f.mem_limit)}",
            (f"  ({src})", "dim"),
        ),
    ]


def _sz(n: int | None) -> str:
    return size(n).replace(" ", "")


def summary_lines(
    f: Frame, frames: Sequence[Frame] = (), retry_in: float | None = None
) -> list[Text]:
    """Every line of the summary panel for one (non-Emperor) instance."""
    if f.kind == "error" and not f.master_pid:
        return [Text(f.source, "bold"), state_line(f, retry_in) or Text("")]
    lines = [_title(f)]
    state = state_line(f, retry_in)
    if state is not None:
        lines.append(state)
    lines += [_workers(f), _traffic(f), *_queues(f, frames), *_host(f)]
    return lines


def emperor_lines(f: Frame, retry_in: float | None = None) -> list[Text]:
    lines = [_title(f), Text(f"Emperor: {len(f.vassals)} vassals", style="bold")]
    state = state_line(f, retry_in)
    if state is not None:
        lines.insert(1, state)
    ready = sum(1 for v in f.vassals if v.ready)
    lines.append(Text(f"{ready} ready, {len(f.vassals) - ready} not ready; Enter drills down"))
    return lines
