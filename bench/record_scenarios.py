"""Record the rule scenarios from a real uWSGI under a bounded load.

    .venv/bin/python bench/record_scenarios.py [SCENARIO ...]

Each scenario starts its own uWSGI (free port, tmp dir, stopped by FIFO `q`/SIGINT), drives
a bounded load (duration *and* request count) with `uwsgitune.loadgen`, and records it with
the real `uwsgitune record` into tests/data/recordings/<scenario>.jsonl. The tests replay
those files; they never need a uWSGI or a load generator.
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.uwsgi_harness import base_options, http_port  # noqa: E402
from uwsgitune.launch import IniValue, UwsgiProcess, free_port  # noqa: E402
from uwsgitune.loadgen import LoadRun, _target, one_request  # noqa: E402

OUT = ROOT / "tests" / "data" / "recordings"
APP = ROOT / "bench" / "scenario_app.py"
WARMUP = 4.0
MAX_REQUESTS = 20_000


@dataclass
class Load:
    """One load stream: closed loop (`concurrency`), open loop (`rate`), or `bursts`."""

    path: str
    concurrency: int = 0
    rate: float = 0.0
    burst: int = 0  # requests fired at once every `every` seconds
    every: float = 6.0


@dataclass
class Scenario:
    options: dict[str, IniValue]
    loads: list[Load]
    seconds: float = 30.0
    http_stats: bool = False  # stats-http: record through http://
    setup: Callable[[Path], dict[str, IniValue]] = field(default=lambda _: {})


def _static_dir(workdir: Path) -> dict[str, IniValue]:
    (workdir / "static").mkdir()
    (workdir / "static" / "file.bin").write_bytes(b"s" * 32 * 1024)
    return {"static-map": f"/static={workdir / 'static'}"}


SCENARIOS: dict[str, Scenario] = {
    "healthy": Scenario({"processes": 2}, [Load("/mixed/5/30", rate=15)]),
    "listen_capacity_short": Scenario(
        {"processes": 2, "listen": 16}, [Load("/io/200", concurrency=40)]
    ),
    "listen_cpu_saturated": Scenario(
        {"processes": 2, "listen": 16}, [Load("/cpu/50", concurrency=30)]
    ),
    "listen_bursts": Scenario(
        {"processes": 2, "listen": 8}, [Load("/io/250", burst=20, every=6.0)], seconds=36
    ),
    "oversubscribed_cpu": Scenario(
        {"processes": 10, "listen": 128}, [Load("/cpu/30", concurrency=14)]
    ),
    "underprovisioned_io": Scenario(
        {"processes": 2, "listen": 128}, [Load("/io/300", concurrency=10)]
    ),
    "idle_overprovisioned": Scenario({"processes": 8}, [Load("/hello", rate=2)], seconds=40),
    "memory_leak": Scenario({"processes": 2}, [Load("/leak/2048", rate=4)]),
    "threads_gil": Scenario({"processes": 1, "threads": 4}, [Load("/cpu/50", concurrency=4)]),
    "health_errors": Scenario(
        {"processes": 2, "harakiri": 2},
        [Load("/error", rate=5), Load("/hello", rate=15), Load("/io/4000", concurrency=1)],
    ),
    "stuck_request": Scenario(
        {"processes": 2}, [Load("/io/60000", concurrency=1), Load("/hello", rate=5)], seconds=36
    ),
    "static_files": Scenario(
        {"processes": 2},
        [Load("/static/file.bin", rate=20), Load("/hello", rate=5)],
        setup=_static_dir,
    ),
    "config_hazards": Scenario(
        {"processes": 2, "memory-report": None}, [Load("/io/50", concurrency=3)], http_stats=True
    ),
}


async def _bursts(url: str, load: Load, duration: float) -> None:
    host, port, request = _target(url)
    end = time.monotonic() + duration
    sent = 0
    while time.monotonic() < end and sent < MAX_REQUESTS:
        batch = [one_request(host, port, request, 30.0) for _ in range(load.burst)]
        sent += load.burst
        await asyncio.gather(*batch, return_exceptions=True)
        await asyncio.sleep(load.every)


def _drive(base: str, load: Load, duration: float) -> None:
    url = base + load.path
    if load.burst:
        asyncio.run(_bursts(url, load, duration))
        return
    run = LoadRun(url, duration=duration, max_requests=MAX_REQUESTS, timeout=duration + 5)
    coro = run.closed_loop(load.concurrency) if load.concurrency else run.open_loop(load.rate)
    asyncio.run(coro)


def _options(workdir: Path, sc: Scenario) -> tuple[dict[str, IniValue], str]:
    extra = {**sc.options, **sc.setup(workdir), "wsgi-file": str(APP)}
    if not sc.http_stats:
        opts = base_options(workdir, **{k.replace("-", "_"): v for k, v in extra.items()})
        return opts, str(opts["stats"])
    port = free_port()
    extra.update({"stats": f"127.0.0.1:{port}", "stats-http": True})
    opts = base_options(workdir, **{k.replace("-", "_"): v for k, v in extra.items()})
    return opts, f"http://127.0.0.1:{port}"


def record(name: str) -> Path:
    sc = SCENARIOS[name]
    out = OUT / f"{name}.jsonl"
    workdir = Path(tempfile.mkdtemp(prefix="uwt-", dir="/tmp"))
    opts, addr = _options(workdir, sc)
    proc = UwsgiProcess(workdir, opts)
    proc.stats = addr
    proc.start()
    try:
        base = f"http://127.0.0.1:{http_port(proc)}"
        total = WARMUP + sc.seconds + 2
        threads = [
            threading.Thread(target=_drive, args=(base, load, total), daemon=True)
            for load in sc.loads
        ]
        for t in threads:
            t.start()
        time.sleep(WARMUP)
        cmd = [str(ROOT / ".venv/bin/uwsgitune"), "record", addr, "-o", str(out)]
        subprocess.run([*cmd, "--duration", str(sc.seconds)], check=True, timeout=sc.seconds + 30)
        for t in threads:
            t.join(timeout=60)
    finally:
        proc.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    print(f"{name}: {out.stat().st_size // 1024} KiB", flush=True)
    return out


def main(argv: list[str]) -> int:
    names = argv or list(SCENARIOS)
    unknown = [n for n in names if n not in SCENARIOS]
    if unknown:
        print(f"unknown scenario(s): {', '.join(unknown)}; known: {', '.join(SCENARIOS)}")
        return 2
    OUT.mkdir(parents=True, exist_ok=True)
    for name in names:
        record(name)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
