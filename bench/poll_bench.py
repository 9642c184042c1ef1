"""Cost of one poll (read + parse + derive), of watching, and of uwsgitop on the same documents.

Run from the repository root (starts a real 64-worker uWSGI for about 75 s, stopped with FIFO q):

    .venv/bin/python bench/poll_bench.py [--watch-seconds 60] [--uwsgitop PATH]

uwsgitop is measured by executing its own `main()` (the 338-line script from PyPI, e.g.
`python3 -m venv /tmp/uwt-top-venv && /tmp/uwt-top-venv/bin/pip install uwsgitop`) with `curses`
replaced by a screen whose `addstr` does nothing: what is timed per refresh is its socket read
(4 KiB recv loop), `json.loads`, its per-worker RPS/percent computations and the string
formatting of every row, but not the terminal drawing. uwsgitune's figure is read + parse +
derive (the Frame every view renders from), without the host sample, which is timed apart.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import psutil  # noqa: E402

from tests.uwsgi_harness import uwsgi_instance  # noqa: E402
from uwsgitune.core.address import parse_address  # noqa: E402
from uwsgitune.core.derive import Tracker  # noqa: E402
from uwsgitune.core.model import parse_stats  # noqa: E402
from uwsgitune.core.samples import Poll  # noqa: E402
from uwsgitune.sources.host import HostSampler  # noqa: E402
from uwsgitune.sources.stats import read_stats  # noqa: E402

BUSY_FIXTURE = ROOT / "tests" / "data" / "stats" / "64-workers-2-threads-busy.json"
UWSGITOP = Path("/tmp/uwt-top-venv/bin/uwsgitop")


def stats(samples: list[float]) -> tuple[float, float]:
    data = sorted(samples)
    return statistics.median(data) * 1000, data[int(0.95 * (len(data) - 1))] * 1000


def time_ours(address: str, n: int) -> tuple[float, float, int]:
    addr = parse_address(address)
    tracker = Tracker(address)
    samples, cpu = [], []
    size = 0
    for _ in range(n):
        t0, c0 = time.perf_counter(), time.process_time()
        raw = read_stats(addr)
        doc = parse_stats(raw)
        now = time.monotonic()
        tracker.update(Poll(address, time.time(), now, doc=doc))
        samples.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
        size = len(raw)
    CPU_MEDIAN[address] = statistics.median(cpu) * 1000
    return (*stats(samples), size)


CPU_MEDIAN: dict[str, float] = {}


def time_host(address: str, n: int) -> tuple[float, float]:
    doc = parse_stats(read_stats(parse_address(address)))
    sampler = HostSampler()
    samples = []
    for _ in range(n):
        t0 = time.perf_counter()
        sampler.sample(doc)
        samples.append(time.perf_counter() - t0)
    return stats(samples)


class _Screen:
    def __init__(self, refreshes: int, stamps: list[float]) -> None:
        self.left = refreshes
        self.stamps = stamps

    def getch(self) -> int:
        self.stamps.append(time.perf_counter())
        self.left -= 1
        return ord("q") if self.left <= 0 else -1

    def __getattr__(self, name: str) -> Callable[..., None]:
        return lambda *a, **k: None


def time_uwsgitop(script: Path, address: str, n: int) -> tuple[float, float]:
    """Run uwsgitop's own main() for n refreshes against `address`, curses stubbed out."""
    stamps: list[float] = []
    fake = types.ModuleType("curses")
    fake.initscr = lambda: _Screen(n + 1, stamps)  # type: ignore[attr-defined]
    fake.error = Exception  # type: ignore[attr-defined]
    fake.A_REVERSE = 0  # type: ignore[attr-defined]
    for name in (
        "noecho",
        "echo",
        "endwin",
        "start_color",
        "use_default_colors",
        "init_pair",
        "curs_set",
    ):
        setattr(fake, name, lambda *a, **k: None)
    fake.color_pair = lambda n: 0  # type: ignore[attr-defined]
    saved = sys.modules.get("curses"), sys.argv, sys.excepthook
    sys.modules["curses"] = fake
    sys.argv = ["uwsgitop", "--frequency", "0", address]
    try:
        ns: dict[str, Any] = {"__name__": "uwsgitop_bench", "__file__": str(script)}
        exec(compile(script.read_text(), str(script), "exec"), ns)
        ns["main"]()
    finally:
        if saved[0] is not None:
            sys.modules["curses"] = saved[0]
        else:
            sys.modules.pop("curses", None)
        sys.argv, sys.excepthook = saved[1], saved[2]
    gaps = [b - a for a, b in itertools.pairwise(stamps[1:])]  # skip the warm-up refresh
    return stats(gaps)


@contextlib.contextmanager
def fixture_server(path: str, data: bytes | list[bytes]) -> Iterator[str]:
    """A unix stats server that answers `data` to every connection, like uWSGI's (a list:
    its documents in turn)."""
    docs = data if isinstance(data, list) else [data]
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(path)
    listener.listen(64)
    listener.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        i = 0
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                continue
            with conn:
                conn.sendall(docs[i % len(docs)])
            i += 1

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield path
    finally:
        stop.set()
        thread.join(2)
        listener.close()
        os.unlink(path)


def watch_cpu(address: str, seconds: float) -> tuple[float, float, int]:
    """CPU of `watch --plain --interval 1` over `seconds`, after its start-up."""
    exe = str(Path(sys.executable).parent / "uwsgitune")
    with tempfile.TemporaryFile("w+") as errors:
        proc = subprocess.Popen(
            [exe, "watch", address, "--plain", "--interval", "1"],
            stdout=subprocess.PIPE,
            stderr=errors,
            text=True,
            env={**os.environ, "PYTHONFAULTHANDLER": "1"},  # SIGABRT: every thread's stack
            # Started in the background (`bench/poll_bench.py &` from a script), this process
            # and its children ignore SIGINT, and a Python that starts with it ignored keeps
            # it so: the watcher would never see the Ctrl-C it is stopped with.
            preexec_fn=_default_sigint,
        )
        try:
            assert proc.stdout is not None
            proc.stdout.readline()  # first poll done: imports and start-up are behind us
            p = psutil.Process(proc.pid)
            start = p.cpu_times()
            startup = start.user + start.system
            lines = 0
            end = time.monotonic() + seconds
            while time.monotonic() < end:
                if proc.stdout.readline():
                    lines += 1
            t = p.cpu_times()
            used = (t.user + t.system) - startup
        finally:
            _interrupt(proc, errors)
    return used / seconds * 100, startup, lines


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _interrupt(proc: subprocess.Popen[str], errors: IO[str]) -> None:
    """Ctrl-C, as a user stops it. One that has not exited 10 s later is stopped with
    SIGABRT, which dumps its threads' stacks (faulthandler), and they end the run."""
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGABRT)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        errors.seek(0)
        sys.exit(f"watch --plain did not exit 10 s after SIGINT; its stacks:\n{errors.read()}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=300)
    parser.add_argument("--watch-seconds", type=float, default=60.0)
    parser.add_argument("--uwsgitop", type=Path, default=UWSGITOP)
    args = parser.parse_args()
    rows: list[tuple[str, str]] = []
    have_top = args.uwsgitop.exists()

    with uwsgi_instance(processes=64, disable_logging=True) as proc:
        time.sleep(1.0)
        ours64 = time_ours(proc.stats, args.n)
        host64 = time_host(proc.stats, 50)
        top64 = time_uwsgitop(args.uwsgitop, proc.stats, args.n) if have_top else None
        cpu, startup, lines = watch_cpu(proc.stats, args.watch_seconds)

    with tempfile.TemporaryDirectory(prefix="uwt-b", dir="/tmp") as d:  # noqa: SIM117
        with fixture_server(f"{d}/s.sock", BUSY_FIXTURE.read_bytes()) as addr:
            ours98 = time_ours(addr, args.n)
            top98 = time_uwsgitop(args.uwsgitop, addr, args.n) if have_top else None

    def ratio(top: tuple[float, float] | None, ours: tuple[float, float, int]) -> str:
        return f"{top[0] / ours[0]:.2f}x" if top else "n/a"

    rows = [
        (
            "64 workers, real uWSGI, unix: read+parse+derive, median / p95",
            f"{ours64[0]:.3f} / {ours64[1]:.3f} ms ({ours64[2] / 1024:.1f} KiB)",
            "<= 2 ms",
        ),
        (
            "64 workers: read+parse+derive, CPU time of this process (median)",
            f"{CPU_MEDIAN[proc.stats]:.3f} ms",
            "-",
        ),
        (
            "64 workers: host sample (/proc of 65 pids, kept open; cgroups), median / p95",
            f"{host64[0]:.3f} / {host64[1]:.3f} ms",
            "-",
        ),
        (
            "64 workers: uwsgitop per refresh, median / p95",
            f"{top64[0]:.3f} / {top64[1]:.3f} ms" if top64 else "not installed",
            "-",
        ),
        ("64 workers: uwsgitop / uwsgitune (median)", ratio(top64, ours64), "-"),
        (
            "98 KB busy fixture, fake unix server: read+parse+derive, median / p95",
            f"{ours98[0]:.3f} / {ours98[1]:.3f} ms ({ours98[2] / 1024:.1f} KiB)",
            "<= 5 ms",
        ),
        (
            "98 KB: read+parse+derive, CPU time of this process (median)",
            f"{CPU_MEDIAN[addr]:.3f} ms",
            "-",
        ),
        (
            "98 KB: uwsgitop per refresh, median / p95",
            f"{top98[0]:.3f} / {top98[1]:.3f} ms" if top98 else "not installed",
            "-",
        ),
        ("98 KB: uwsgitop / uwsgitune (median)", ratio(top98, ours98), "-"),
        (
            f"watch --plain --interval 1 on 64 workers, CPU over {args.watch_seconds:g} s "
            f"({lines} lines; start-up {startup:.2f} s CPU excluded)",
            f"{cpu:.2f}% of one core",
            "< 1%",
        ),
    ]
    head = ["| measurement | result | budget |", "|---|---|---|"]
    table = head + [f"| {a} | {b} | {c} |" for a, b, c in rows]
    env = (
        f"Python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load average "
        f"{os.getloadavg()[0]:.2f}, n={args.n}, {time.strftime('%Y-%m-%d %H:%M')}"
    )
    text = "# poll_bench\n\n" + env + "\n\n" + "\n".join(table) + "\n\n" + (__doc__ or "") + "\n"
    print("\n".join(table))
    print(env)
    out = ROOT / "bench" / "results" / "poll_bench.md"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)


if __name__ == "__main__":
    main()
