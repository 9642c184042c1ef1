"""Long fault cases against the real daemon in apply mode; writes bench/results/faults.md.

    .venv/bin/python bench/faults_bench.py

1. A 1 GiB stats document: the daemon cuts it at 16 MiB each poll; its RSS stays bounded.
2. The master killed with -9 right after an action (mid-apply): disconnected, no write to the
   dead master's FIFO, connected again when a new master starts on the same paths.
3. uWSGI reloaded (`r`) by someone else while the daemon applies under load: no failed
   request, the daemon reports the reload and goes on.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.support.instances import fake_server  # noqa: E402
from tests.support.tuned import manual  # noqa: E402
from tests.uwsgi_harness import url, uwsgi_instance  # noqa: E402
from uwsgitune.launch import UwsgiProcess, free_port  # noqa: E402
from uwsgitune.loadgen import LoadResult, run_closed  # noqa: E402

EXE = str(Path(sys.executable).parent / "uwsgitune")
Row = tuple[str, bool, int, int, str]


def daemon(tmp: Path, proc: UwsgiProcess | None, extra: str = "") -> subprocess.Popen[bytes]:
    cfg = f'[daemon]\nmetrics_listen = "127.0.0.1:{free_port()}"\nstate_dir = "{tmp}"\n'
    if proc is not None:
        cfg += (f'[[instance]]\nname = "app"\nstats = "{proc.stats}"\nfifo = "{proc.fifo}"\n'
                f'override = "{tmp}/o.ini"\nmode = "apply"\nmax_workers = 6\ninterval = 0.2\n'
                "timeout = 1.0\n")  # fmt: skip
    (tmp / "d.toml").write_text(cfg + extra)
    env = {**os.environ, "UWSGITUNE_LOCK_DIR": str(tmp / "locks")}
    log = (tmp / "d.log").open("ab")
    return subprocess.Popen([EXE, "daemon", "--config", str(tmp / "d.toml")], stdout=log,
                            stderr=log, env=env)  # fmt: skip


def until(check: Callable[[], bool], timeout: float) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if check():
            return True
        time.sleep(0.1)
    return False


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def huge(conn: socket.socket) -> None:
    conn.sendall(b'{"version": "2.0.31", "workers": [')
    chunk = b'{"id": 1, "pid": 1, "status": "idle", "requests": 0},' * 20000  # ~1 MiB
    for _ in range(1024):  # 1 GiB, unless the reader leaves first
        conn.sendall(chunk)


def case_1gib(tmp: Path) -> Row:
    with fake_server(huge, unix_path=str(tmp / "huge.sock")) as path:
        extra = f'[[instance]]\nname = "huge"\nstats = "{path}"\ninterval = 0.5\ntimeout = 5\n'
        d = daemon(tmp, None, extra)
        peak = 0.0
        end = time.monotonic() + 20
        while time.monotonic() < end and d.poll() is None:
            peak = max(peak, rss_mib(d.pid))
            time.sleep(0.2)
        alive = d.poll() is None
        d.send_signal(signal.SIGINT)
        d.wait(10)
    log = (tmp / "d.log").read_text()
    ok = alive and peak < 150 and "larger than 16 MiB" in log and "Traceback" not in log
    return (
        "1 GiB stats document (20 s of polls)",
        ok,
        0,
        0,
        f"document larger than 16 MiB; peak RSS {peak:.0f} MiB",
    )


def load_during(proc: UwsgiProcess, seconds: float, out: list[LoadResult]) -> threading.Thread:
    t = threading.Thread(target=lambda: out.append(run_closed(url(proc, "/io/50"), 6, seconds)))
    t.start()
    return t


def case_kill_mid_apply(tmp: Path) -> Row:
    override = tmp / "o.ini"
    with uwsgi_instance(**manual(override, processes=6, initial=1)) as proc:  # type: ignore[arg-type]
        d = daemon(tmp, proc)
        res: list[LoadResult] = []
        t = load_during(proc, 8, res)
        audit = tmp / "app.audit.jsonl"
        acted = until(lambda: audit.exists() and '"sent"' in audit.read_text(), 8)
        os.kill(proc.pid, signal.SIGKILL)
        assert proc.proc is not None
        proc.proc.wait(5)
        proc._reap_group()
        t.join()
        n_before = len(audit.read_text().splitlines())
        down = until(lambda: "event=disconnected" in (tmp / "d.log").read_text(), 5)
        time.sleep(2)
        sent_after = [json.loads(x) for x in audit.read_text().splitlines()[n_before:]]
        proc.start()
        back = until(lambda: (tmp / "d.log").read_text().count("event=connected") >= 2, 10)
        d.send_signal(signal.SIGINT)
        d.wait(10)
    wrote = [r for r in sent_after if r.get("result") == "sent"]
    ok = acted and down and back and not wrote
    seen = [x for x in (tmp / "d.log").read_text().splitlines() if "event=disconnected" in x]
    message = seen[0].split("error=", 1)[-1] if seen else "none"
    return ("master kill -9 mid-apply, then a new master", ok, 0, 0, message)


def case_foreign_reload(tmp: Path) -> Row:
    override = tmp / "o.ini"
    with uwsgi_instance(**manual(override, processes=6, initial=1)) as proc:  # type: ignore[arg-type]
        d = daemon(tmp, proc)
        res: list[LoadResult] = []
        t = load_during(proc, 12, res)
        time.sleep(3)
        for _ in range(3):
            proc.fifo_write("r")  # someone else reloads while the daemon applies
            time.sleep(2.5)
        t.join()
        alive = d.poll() is None
        d.send_signal(signal.SIGINT)
        d.wait(10)
    log = (tmp / "d.log").read_text()
    failed = res[0].errors
    ok = alive and "event=uwsgi_reload" in log and "Traceback" not in log and failed == 0
    return (
        "uWSGI reloaded by someone else during applies",
        ok,
        failed,
        0,
        "event=uwsgi_reload; counters reset, no rate spike",
    )


def main() -> int:
    rows = []
    for case in (case_1gib, case_kill_mid_apply, case_foreign_reload):
        with tempfile.TemporaryDirectory(prefix="uwt-fb-", dir="/tmp") as tmp:
            rows.append(case(Path(tmp)))
            print(rows[-1], flush=True)
    head = "| fault | survived | requests failed | data lost | message seen |"
    lines = ["# Long fault cases (`bench/faults_bench.py`)", "", head, "|---|---|---|---|---|"]
    lines += [f"| {f} | {'yes' if ok else 'NO'} | {rf} | {dl} | {m} |" for f, ok, rf, dl, m in rows]
    (ROOT / "bench" / "results" / "faults.md").write_text("\n".join(lines) + "\n")
    return 0 if all(r[1] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
