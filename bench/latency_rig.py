"""What the latency benchmarks share: a real uWSGI 2.0 started from examples/uwsgi.ini's
options plus the doctor's lines, wrk with a stamping Lua script, exact percentiles, and
Prometheus's `histogram_quantile`.

- `instance(workdir, logger=...)`: the example ini's options (master, cheaper mode with the
  manual algorithm, stats socket, FIFO, memory-report), the app bench/latency_app.py on an
  `http11-socket` (kept-alive connections, no proxy), and, with a logger, the doctor's lines:
  `req-logger = socket:127.0.0.1:PORT` and `log-format = core.logline.log_format(None)`, plus
  optionally a second `req-logger = file:...` that gets the same lines byte for byte.
- `wrk(url, seconds, connections)`: wrk as our child, bounded by its `-d`, with
  bench/latency_wrk.lua: every request carries `X-Request-Start: t=<µs since the epoch>`,
  set when wrk writes it (the instant wrk starts its latency clock), and the run ends with
  one line of JSON: requests, errors, and wrk's latency percentiles in µs (wrk keeps one
  count per µs, so these are exact).
- `nearest_rank(sorted, q)`: the exact percentile the recorder approximates (the value at
  rank ceil(q n)).
- `histogram_quantile(q, bounds, cumulative)`: Prometheus's `bucketQuantile`
  (promql/quantile.go, v2), line for line.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from uwsgitune.actuate.doctor.reqlogsetup import HOOK  # noqa: E402
from uwsgitune.core.logline import log_format  # noqa: E402
from uwsgitune.launch import IniValue, UwsgiProcess, free_port  # noqa: E402

APP = ROOT / "bench" / "latency_app.py"
LUA = ROOT / "bench" / "latency_wrk.lua"
WRK = "/usr/bin/wrk"
MARK = '{"h38wrk": 1,'


def options(
    workdir: Path,
    *,
    logger_port: int | None,
    log_file: Path | None = None,
    workers: int = 4,
    fmt: str | None = None,
    sample: int = 1,
) -> dict[str, IniValue]:
    """`fmt`: the log-format (default: the doctor's, uWSGI's default line then the tail);
    `sample` K > 1: the doctor's lines for `--sample K` (uwsgitune/uwsgi_sample.py logs 1
    request in K through `disable-logging`, with the sampled tail)."""
    opts: dict[str, IniValue] = {
        "master": True,
        "http11-socket": f"127.0.0.1:{free_port()}",  # kept-alive connections
        "http-socket": f"127.0.0.1:{free_port()}",  # one request per connection
        "wsgi-file": str(APP),
        "stats": str(workdir / "stats.sock"),
        "master-fifo": str(workdir / "fifo"),
        "memory-report": True,
        "processes": 8,
        "cheaper": 2,
        "cheaper-initial": workers,
        "cheaper-algo": "manual",
        "listen": 128,
        "die-on-term": True,
    }
    if logger_port is not None:
        loggers = [f"socket:127.0.0.1:{logger_port}"]
        if log_file is not None:
            loggers.append(f"file:{log_file}")
        opts["req-logger"] = loggers
        opts["log-format"] = fmt if fmt is not None else log_format(None, sampled=sample > 1)
        if sample > 1:
            opts["disable-logging"] = True
            opts["uwsgitune-sample"] = sample
            opts["import"] = str(HOOK)
    else:
        opts["disable-logging"] = True
    return opts


def instance(workdir: Path, **kw: Any) -> UwsgiProcess:
    workdir.mkdir(parents=True, exist_ok=True)
    return UwsgiProcess(workdir, options(workdir, **kw)).start()


def url(proc: UwsgiProcess, path: str, *, keepalive: bool = True) -> str:
    """The app's URL on the kept-alive socket, or on the one that closes after each answer."""
    return f"http://{proc.options['http11-socket' if keepalive else 'http-socket']}{path}"


def wrk(
    target: str,
    seconds: float,
    connections: int,
    *,
    threads: int = 1,
    script: Path = LUA,
    env: dict[str, str] | None = None,
) -> dict[str, Any]:
    """One bounded wrk run: its JSON line (latency in µs, exact)."""
    cmd = [WRK, f"-t{threads}", f"-c{connections}", f"-d{seconds:g}s", "--timeout=5s"]
    cmd += ["-s", str(script), target]
    run_env = {**os.environ, **(env or {})}
    out = subprocess.run(
        cmd, capture_output=True, text=True, timeout=seconds + 30, env=run_env
    ).stdout
    line = next((x for x in out.splitlines() if x.startswith(MARK)), None)
    if line is None:
        raise RuntimeError(f"wrk gave no result: {out[-300:]}")
    data: dict[str, Any] = json.loads(line)
    return data


def nearest_rank(values: Sequence[float], q: float) -> float:
    """The exact nearest-rank percentile of sorted `values` (the recorder's definition)."""
    n = len(values)
    return values[max(1, min(n, math.ceil(q * n - 1e-9))) - 1]


def histogram_quantile(q: float, bounds: Sequence[float], cumulative: Sequence[int]) -> float:
    """Prometheus's histogram_quantile over one histogram: `bounds` the finite `le` bounds,
    `cumulative` their counts then +Inf's (promql/quantile.go `bucketQuantile`)."""
    les = [*bounds, math.inf]
    if q < 0:
        return -math.inf
    if q > 1:
        return math.inf
    if len(les) < 2:
        return math.nan
    observations = cumulative[-1]
    if observations == 0:
        return math.nan
    rank = q * observations
    b = next(i for i, c in enumerate(cumulative) if c >= rank)  # sort.Search
    if b == len(les) - 1:
        return les[-2]
    if b == 0 and les[0] <= 0:
        return les[0]
    start, end, count = 0.0, les[b], float(cumulative[b])
    if b > 0:
        start = les[b - 1]
        count -= cumulative[b - 1]
        rank -= cumulative[b - 1]
    return start + (end - start) * (rank / count)


def commit() -> str:
    sha = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    dirty = subprocess.run(
        ["git", "-C", str(ROOT), "status", "--porcelain", "uwsgitune", "bench", ":!bench/results"],
        capture_output=True,
        text=True,
    ).stdout.strip()
    return sha + (" (with uncommitted changes)" if dirty else "")


def machine() -> str:
    load = os.getloadavg()
    return (
        f"{os.cpu_count()} CPUs, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}, "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}"
    )


def udp_socket(port: int) -> tuple[int, int, int] | None:
    """(bytes queued, datagrams the kernel dropped, inode) of the UDP socket bound to
    127.0.0.1:`port`, from /proc/net/udp; None when nothing is bound there."""
    want = f"0100007F:{port:04X}"
    with open("/proc/net/udp") as f:
        for line in f.readlines()[1:]:
            fields = line.split()
            if fields[1] == want:
                rx = int(fields[4].split(":")[1], 16)
                return rx, int(fields[12]), int(fields[9])
    return None


def scrape(port: int) -> dict[str, Any] | None:
    """From uwsgitune's /metrics on 127.0.0.1:`port`: `lines` (uwsgitune_latency_lines_total),
    `count` and `p99_ms` of uwsgi_request_duration_seconds (histogram_quantile over its
    cumulative buckets since uwsgitune began listening); None when it does not answer."""
    import urllib.request

    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
            text = r.read().decode()
    except OSError:
        return None
    lines = 0.0
    buckets: list[tuple[float, float]] = []
    for row in text.splitlines():
        if row.startswith("uwsgitune_latency_lines_total"):
            lines += float(row.rsplit(" ", 1)[1])
        elif row.startswith("uwsgi_request_duration_seconds_bucket"):
            le = row.split('le="', 1)[1].split('"', 1)[0]
            buckets.append((math.inf if le == "+Inf" else float(le), float(row.rsplit(" ", 1)[1])))
    buckets.sort()
    count = buckets[-1][1] if buckets else 0.0
    p99 = None
    if count:
        cum = [int(c) for _, c in buckets]
        p99 = histogram_quantile(0.99, [b for b, _ in buckets[:-1]], cum) * 1e3
    return {"lines": int(lines), "count": int(count), "p99_ms": p99}
