"""A real Prometheus scraping real exporters beside a real uWSGI, for `recommend --prometheus`.

`prom_stack` starts, in a temporary directory on loopback: `uwsgitune daemon` on the
instance's stats socket (job `uwsgitune`), the Go uwsgi_exporter 1.3 on the same socket when
its binary is given ($UWSGI_EXPORTER, as .ci/run sets it; job `exporter`), and Prometheus
scraping both every `scrape` seconds.
Everything it started is stopped by its PID when the block ends (the caller owns the uWSGI).
Used by tests/cli/test_recommend_prom_live.py and bench/prom_recommend_accuracy.py.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from uwsgitune.launch import free_port

UWSGITUNE = str(Path(sys.executable).parent / "uwsgitune")

SCRAPE = """
global:
  scrape_interval: {scrape}
  scrape_timeout: {timeout}
scrape_configs:
"""
JOB = """  - job_name: {job}
    static_configs:
      - targets: ["127.0.0.1:{port}"]
        labels: {{deployment: {deployment}}}
"""


def prometheus_binary() -> str | None:
    return shutil.which("prometheus")


def go_exporter() -> Path | None:
    """The prebuilt Go exporter, outside the repository: $UWSGI_EXPORTER, or on PATH."""
    found = os.environ.get("UWSGI_EXPORTER") or shutil.which("uwsgi_exporter")
    return Path(found) if found and Path(found).is_file() else None


@dataclass
class PromStack:
    url: str  # Prometheus's base URL
    daemon_port: int
    exporter_port: int | None
    workdir: Path

    def ready(self, job: str) -> bool:
        """Prometheus has scraped `job` and found it up."""
        q = urllib.request.quote(f'uwsgi_up{{job="{job}"}}')
        try:
            with urllib.request.urlopen(f"{self.url}/api/v1/query?query={q}", timeout=5) as r:
                return b'"1"]' in r.read()
        except OSError:
            return False


def _wait(check: object, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():  # type: ignore[operator]
            return True
        time.sleep(0.2)
    return False


def _ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            return r.status == 200
    except OSError:
        return False


def _stop(proc: subprocess.Popen[bytes], sig: int) -> None:
    if proc.poll() is None:
        proc.send_signal(sig)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


@contextlib.contextmanager
def prom_stack(
    stats: str,
    scrape: float = 1.0,
    interval: float = 0.5,
    exporter: bool = True,
    config: str | None = None,
) -> Iterator[PromStack]:
    """`stats`: the uWSGI's stats socket path. Prometheus must be installed. `config`: the
    daemon's TOML (its instances) instead of `--stats stats` (the dashboards' test)."""
    binary = prometheus_binary()
    assert binary is not None, "prometheus is not installed"
    workdir = Path(tempfile.mkdtemp(prefix="uwtp-", dir="/tmp"))
    procs: list[tuple[subprocess.Popen[bytes], int]] = []
    log = (workdir / "stack.log").open("wb")
    try:
        dport = free_port()
        argv = [UWSGITUNE, "daemon", "--stats", stats, "--name", "a", "--interval", str(interval)]
        if config is not None:
            (workdir / "uwsgitune.toml").write_text(config)
            argv = [UWSGITUNE, "daemon", "--config", str(workdir / "uwsgitune.toml")]
        argv += ["--metrics-listen", f"127.0.0.1:{dport}"]
        procs.append((subprocess.Popen(argv, stdout=log, stderr=log), signal.SIGINT))
        jobs = JOB.format(job="uwsgitune", port=dport, deployment="tuned")
        eport = None
        go = go_exporter() if exporter else None
        if go is not None:
            eport = free_port()
            argv = [str(go), f"--stats.uri=unix://{stats}"]
            argv += [f"--web.listen-address=127.0.0.1:{eport}"]
            procs.append((subprocess.Popen(argv, stdout=log, stderr=log), signal.SIGTERM))
            jobs += JOB.format(job="exporter", port=eport, deployment="plain")
        pport = free_port()
        cfg = workdir / "prometheus.yml"
        ms = f"{round(scrape * 1000)}ms"
        cfg.write_text(SCRAPE.format(scrape=ms, timeout=ms) + jobs)
        argv = [
            binary,
            f"--config.file={cfg}",
            f"--web.listen-address=127.0.0.1:{pport}",
            f"--storage.tsdb.path={workdir / 'tsdb'}",
            "--log.level=warn",
        ]
        procs.append((subprocess.Popen(argv, stdout=log, stderr=log), signal.SIGTERM))
        url = f"http://127.0.0.1:{pport}"
        assert _wait(lambda: _ready(f"{url}/-/ready"), 60), "Prometheus did not start"
        stack = PromStack(url, dport, eport, workdir)
        assert _wait(lambda: stack.ready("uwsgitune"), 60), "no scrape of the daemon"
        if eport is not None:
            assert _wait(lambda: stack.ready("exporter"), 60), "no scrape of uwsgi_exporter"
        yield stack
    finally:
        for proc, sig in reversed(procs):
            _stop(proc, sig)
        log.close()
        if (workdir / "stack.log").exists():
            sys.stderr.write((workdir / "stack.log").read_text()[-3000:])
        shutil.rmtree(workdir, ignore_errors=True)
