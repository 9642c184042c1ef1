"""The processes x threads grid on synthetic cells: the pick, the axis, the evidence, the chart;
and the grid runner against a fake master whose reload fails mid-sweep."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

import pytest

from tests.sweep.test_live import Clock, FakeMaster
from uwsgitune.core.frame import Frame
from uwsgitune.sweep import report
from uwsgitune.sweep.analysis import Criteria, StepMeasure
from uwsgitune.sweep.generator import LoadSpec, LoadWindow
from uwsgitune.sweep.grid import analyse_grid, gil_bound
from uwsgitune.sweep.gridchart import render_grid_svg
from uwsgitune.sweep.live import LiveCount
from uwsgitune.sweep.plan import WorkerRange
from uwsgitune.sweep.runner import Sweep, SweepConfig
from uwsgitune.sweep.threadaxis import ThreadsError


def cell(
    w: int, t: int, tput: float, *, cpu_ms: float, service: float, **kw: object
) -> StepMeasure:
    base = StepMeasure(
        workers=w,
        pass_no=0,
        seconds=10.0,
        ok=int(tput * 10),
        errors=0,
        throughput=tput,
        p50_ms=service,
        p90_ms=service * 1.5,
        p99_ms=service * 2,
        live=w,
        service_ms=service,
        cpu_cores=tput * cpu_ms / 1000,
        rss_bytes=w * 30 * 2**20,
        threads=t,
        littles_l=tput * service / 1000,
        runq_cores=0.0,
        gen_cpu_cores=0.1,
    )
    return replace(base, **kw)  # type: ignore[arg-type]


def cpu_grid() -> list[StepMeasure]:
    """10 ms of CPU per request on 2 cores: processes scale to 2; threads wait on the GIL."""
    out = []
    for w in (1, 2, 4):
        for t in (1, 4):
            tput = 100.0 * min(w, 2)
            out.append(cell(w, t, tput, cpu_ms=10.0, service=10.0 * t * max(1, w / 2)))
    return out


def io_grid() -> list[StepMeasure]:
    """50 ms waits, 0.5 ms of CPU: every slot adds 20 req/s."""
    return [cell(w, t, 20.0 * w * t, cpu_ms=0.5, service=50.0) for w in (1, 2, 4) for t in (1, 4)]


def test_cpu_bound_picks_one_thread_at_the_cpus() -> None:
    g = analyse_grid(cpu_grid(), Criteria(), 2.0)
    assert g.pick is not None and (g.pick.workers, g.pick.threads) == (2, 1)
    assert g.axis == "processes" and "CPU-bound" in g.reason
    assert any("GIL at 1x4" in e for e in g.evidence), g.evidence
    assert any("memory per worker 30-30 MiB" in e for e in g.evidence), g.evidence


def test_cpu_bound_never_picks_threads_that_took_host_cpu() -> None:
    """On a busy host more runnable threads win CPU share: still not the app's gain."""
    steps = [s if s.threads == 1 else replace(s, throughput=s.throughput * 1.4) for s in cpu_grid()]
    g = analyse_grid(steps, Criteria(), 2.0)
    assert g.pick is not None and g.pick.threads == 1


def test_io_bound_pays_on_both_axes_and_picks_the_cheapest_near_the_best() -> None:
    g = analyse_grid(io_grid(), Criteria(), 2.0)
    assert g.axis == "both"
    assert g.pick is not None and (g.pick.workers, g.pick.threads) == (4, 4)
    assert g.pick.workers * g.pick.threads > 2
    # A backend that tops out at 170 req/s: 2x4 (160) is near, and cheaper than 4x4.
    capped = [replace(s, throughput=min(s.throughput, 170.0)) for s in io_grid()]
    g = analyse_grid(capped, Criteria(), 2.0)
    assert g.pick is not None and (g.pick.workers, g.pick.threads) == (2, 4)


def test_generator_bound_cells_are_never_the_apps_throughput() -> None:
    steps = [replace(s, generator_bound=s.workers == 4) for s in io_grid()]
    g = analyse_grid(steps, Criteria(), 2.0)
    assert g.best is not None and g.best.workers < 4
    lines = report.grid_table(g)
    assert sum("GENERATOR-BOUND" in line for line in lines) == 2
    all_bound = analyse_grid([replace(s, generator_bound=True) for s in io_grid()], Criteria(), 2)
    assert all_bound.pick is None and "generator" in report.grid_summary(all_bound)[0]


def test_gil_is_cpu_below_threads_times_busy() -> None:
    g = analyse_grid(cpu_grid(), Criteria(), 2.0)
    flagged = {(p.workers, p.threads) for p in g.points if gil_bound(p)}
    assert (1, 4) in flagged and not any(t == 1 for _, t in flagged)


def test_chart_has_a_heat_map_and_a_line_per_thread_count() -> None:
    svg = render_grid_svg(analyse_grid(io_grid(), Criteria(), 2.0), title="t")
    assert svg.startswith("<svg") and svg.count("<polyline") == 2
    assert 'stroke="#ff7f0e" stroke-width="3"' in svg  # the recommended cell
    assert ">1 thread<" in svg and ">4 threads<" in svg


@dataclass
class FakeAxis:
    """Reloads succeed for `good` thread counts; restore puts threads back on the master."""

    master: FakeMaster
    good: tuple[int, ...]
    calls: list[str] = field(default_factory=list)
    threads: int = 1

    def set(self, threads: int, before: Frame) -> Frame:
        self.calls.append(f"set {threads}")
        if threads not in self.good:
            raise ThreadsError(f"reload to threads = {threads} failed: not back")
        self.threads = threads
        return replace(before, threads=threads)

    def restore(self) -> Frame | None:
        self.calls.append("restore")
        self.threads = 1
        return None


@dataclass
class FakeGen:
    name: str = "fake"

    def measure(self, warmup: float, seconds: float, mark: Callable[[], None]) -> LoadWindow:
        mark()
        mark()
        return LoadWindow(seconds, 100, 0, 1.0, 2.0, 3.0, 0.1, 1.0)


def test_a_reload_that_fails_mid_sweep_restores_the_instance() -> None:
    master = FakeMaster(live=3)
    clock = Clock()
    live = LiveCount(master.step, master, sleep=clock.sleep, mono=clock)
    axis = FakeAxis(master, good=(1,))
    cfg = SweepConfig(
        LoadSpec("http://127.0.0.1:1/"),
        WorkerRange((1, 2), False),
        (1, 2),
        1.0,
        1.0,
        threads=(1, 4),
    )
    lines: list[str] = []
    out = Sweep(cfg, live, FakeGen(), axis=axis, log=lines.append).run()  # type: ignore[arg-type]
    assert isinstance(out.failure, ThreadsError) and "threads = 4" in str(out.failure)
    assert axis.calls == ["set 1", "set 4", "restore"]
    assert [s.workers for s in out.steps] == [1, 2]
    assert out.restored and out.final_live == 3 and master.live == 3


def test_io_waits_are_not_the_gil_and_a_missing_corner_keeps_the_axis() -> None:
    """An IO-bound process is far below one core: its threads wait on IO, not on the GIL.
    A corner cell with errors (1x1 timing out) does not hide which axis pays."""
    steps = [replace(s, errors=s.ok) if (s.workers, s.threads) == (1, 1) else s for s in io_grid()]
    g = analyse_grid(steps, Criteria(), 2.0)
    assert not any(gil_bound(p) for p in g.points)
    assert g.axis == "both", g.reason


def test_restoring_threads_sees_a_reload_the_counters_missed(tmp_path: Path) -> None:
    # Found running the README's sweep by hand: the poll after `r` caught the workers not yet
    # spawned, the counters never showed the reload, and a good restore was called failed.
    from types import SimpleNamespace

    from tests.support.instances import Instance, Load
    from uwsgitune.actuate.reload import Limits
    from uwsgitune.sweep.threadaxis import Original, ThreadAxis

    override = tmp_path / "o.ini"
    override.write_text("[uwsgi]\nthreads = 2\n")
    inst = Instance("s")
    polls = iter(
        [inst.frame(i, Load(live=1, cheap=7, threads=1 if i > 1 else 2)) for i in range(6)]
    )
    next(polls)  # the first poll has no rates
    sent: list[str] = []
    reloader = SimpleNamespace(path=override, reload=lambda before: sent.append("r"))
    original = Original(b"[uwsgi]\n", 1, 8, 2, "manual", None)
    axis = ThreadAxis(
        reloader,
        tmp_path / "app.ini",
        Limits(None),
        lambda: next(polls),  # type: ignore[arg-type]
        original,
        sleep=lambda _s: None,
    )
    frame = axis.restore()
    assert sent == ["r"] and override.read_bytes() == b"[uwsgi]\n"
    assert frame is not None and frame.threads == 1 and frame.kind == "ok"


def test_a_bad_threads_list_is_bad_input_before_anything_is_touched() -> None:
    import subprocess
    import sys

    argv = [sys.executable, "-m", "uwsgitune", "sweep", "--url", "http://127.0.0.1:9/"]
    argv += ["--stats", "/nonexistent/stats.sock", "--fifo", "/nonexistent/fifo"]
    argv += ["--workers", "1,2", "--threads", "0,x"]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert out.returncode == 2
    assert (
        out.stderr.strip() == "uwsgitune: --threads 0,x: write a list of thread counts like 1,2,4,8"
    )


def test_no_threads_reload_while_the_stats_peer_is_refused(tmp_path: Path) -> None:
    """Issue 14.4 for sweep: neither the reload to a thread count nor the restore's reload
    happens while the stats socket is another uid's; the override file is left alone."""
    from types import SimpleNamespace

    from tests.support.instances import Instance, Load
    from uwsgitune.actuate.reload import Limits
    from uwsgitune.sweep.threadaxis import Original, ThreadAxis

    override = tmp_path / "o.ini"
    override.write_text("[uwsgi]\nthreads = 2\n")
    inst = Instance("s")
    frames = [inst.frame(i, Load(live=1, cheap=7, threads=2)) for i in range(3)]
    sent: list[str] = []
    applied: list[object] = []
    fifo = SimpleNamespace(send=lambda cmd, pid: sent.append(cmd))
    reloader = SimpleNamespace(path=override, fifo=fifo, apply=lambda *a: applied.append(a))
    original = Original(b"[uwsgi]\n", 1, 8, 2, "manual", None)
    axis = ThreadAxis(
        reloader,
        tmp_path / "app.ini",
        Limits(None),
        lambda: frames[-1],  # type: ignore[arg-type]
        original,
        refusal=lambda: "s.sock: served by uid 1000",
        sleep=lambda _s: None,
    )
    for act in (lambda: axis.set(4, frames[-1]), axis.restore):
        with pytest.raises(ThreadsError, match="served by uid 1000"):
            act()
    assert sent == [] and applied == [] and override.read_text() == "[uwsgi]\nthreads = 2\n"


def test_a_threads_reload_waits_for_the_inis_worker_reload_mercy(tmp_path: Path) -> None:
    """A sweep's reload of slow requests is not called failed before uWSGI's own mercy is
    over: the deadline is the ini's worker-reload-mercy + 15 s, not a fixed 30 s."""
    from types import SimpleNamespace

    from tests.support.instances import Instance, Load
    from uwsgitune.actuate.reload import Limits, ReloadOutcome
    from uwsgitune.sweep.threadaxis import ThreadAxis

    override = tmp_path / "o.ini"
    override.write_text("[uwsgi]\n")
    user = tmp_path / "app.ini"
    user.write_text(
        f"[uwsgi]\nprocesses = 8\nenable-threads = true\nworker-reload-mercy = 100\n"
        f"ini = {override}\n"
    )
    frame = Instance("s").frame(1, Load(live=2, cheap=6, threads=1))
    deadlines: list[float] = []

    def apply(ov: object, before: object, limits: object, deadline: float) -> ReloadOutcome:
        deadlines.append(deadline)
        return ReloadOutcome(True, "reloaded", 1.0, frame=frame)

    reloader = SimpleNamespace(path=override, apply=apply)
    axis = ThreadAxis(reloader, user, Limits(4096), lambda: frame)  # type: ignore[arg-type]
    axis.check(frame, (1, 2))
    axis.set(2, frame)
    assert deadlines == [115.0]
