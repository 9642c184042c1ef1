"""A throw-away PostgreSQL cluster from the Debian package, for the bench only.

`initdb` into a fresh temp dir, `postgres` on a unix socket in that dir (no TCP port), trust
authentication (nothing listens outside the dir), stopped at the end by its PID (SIGINT:
PostgreSQL's "fast" shutdown) and the dir removed. A system cluster is never touched: no
`pg_ctlcluster`, no /var/lib/postgresql, no port 5432.

PostgreSQL refuses to run as root: as root, the cluster runs as the Debian package's
`postgres` user (through `runuser`), which then owns the temp dir.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

# The Debian package's binaries; initdb and postgres are not on PATH there.
BIN_GLOB = "/usr/lib/postgresql/*/bin"
RUN_AS = "postgres"  # the package's system user, used only when we are root
SETTINGS = {
    # the data fits in shared buffers: the IO page's time is the server's query work
    "shared_buffers": "128MB",
    "max_connections": "100",
    "listen_addresses": "",  # unix socket only
    "fsync": "off",  # a throw-away cluster: loading the data need not wait on the disk
    "synchronous_commit": "off",
    "full_page_writes": "off",
    # one core a query: the IO page's query does not take the second CPU from the workers
    "max_parallel_workers_per_gather": "0",
    "jit": "off",
    "log_min_messages": "warning",
}


def bindir() -> Path | None:
    """The newest installed PostgreSQL's bin dir, or None (the package is not installed)."""
    found = sorted(
        (p for p in glob.glob(BIN_GLOB) if os.path.exists(os.path.join(p, "postgres"))),
        key=lambda p: int(Path(p).parent.name) if Path(p).parent.name.isdigit() else 0,
    )
    return Path(found[-1]) if found else None


def missing() -> str | None:
    """Why a cluster cannot be started here, or None."""
    if bindir() is None:
        return f"no PostgreSQL server binaries ({BIN_GLOB}): apt-get install -y postgresql"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam(RUN_AS)
        except KeyError:
            return f"running as root and there is no {RUN_AS!r} user to run PostgreSQL as"
        if shutil.which("runuser") is None:
            return "running as root and there is no runuser to drop to the postgres user"
    return None


@dataclass
class Cluster:
    dir: Path  # data dir and socket dir, a fresh temp dir
    pid: int
    port: int = 5432  # only the socket's name: .s.PGSQL.<port> in `dir`

    @property
    def host(self) -> str:
        """libpq's host: a path is the socket's dir."""
        return str(self.dir)

    def psql(self, sql: str, db: str = "postgres") -> str:
        binp = bindir()
        assert binp is not None
        out = subprocess.run(
            [
                str(binp / "psql"),
                "-X",
                "-q",
                "-A",
                "-t",
                "-v",
                "ON_ERROR_STOP=1",
                "-h",
                self.host,
                "-p",
                str(self.port),
                "-U",
                "postgres",
                "-d",
                db,
                "-c",
                sql,
            ],
            check=True,
            capture_output=True,
            text=True,
        )
        return out.stdout


def _as_owner(cmd: list[str]) -> list[str]:
    return ["runuser", "-u", RUN_AS, "--", *cmd] if os.geteuid() == 0 else cmd


@contextmanager
def cluster(timeout: float = 30.0) -> Iterator[Cluster]:
    """A running cluster, stopped (by PID) and deleted on the way out."""
    why = missing()
    if why:
        raise RuntimeError(why)
    binp = bindir()
    assert binp is not None
    # short: the socket path (dir + /.s.PGSQL.5432) must stay under 108 bytes
    base = Path(tempfile.mkdtemp(prefix="uwt-pg-", dir="/tmp"))
    data = base / "data"
    if os.geteuid() == 0:
        ent = pwd.getpwnam(RUN_AS)
        os.chown(base, ent.pw_uid, ent.pw_gid)
    proc: subprocess.Popen[bytes] | None = None
    try:
        subprocess.run(
            _as_owner(
                [
                    str(binp / "initdb"),
                    "-D",
                    str(data),
                    "-U",
                    "postgres",
                    "--auth=trust",
                    "--no-sync",
                    "-E",
                    "UTF8",
                    "--locale=C",
                ]
            ),
            check=True,
            capture_output=True,
        )
        opts = [f"-c{k}={v}" for k, v in SETTINGS.items()]
        log = open(base / "postgres.log", "wb")  # noqa: SIM115 - closed below
        proc = subprocess.Popen(
            _as_owner([str(binp / "postgres"), "-D", str(data), "-k", str(base), *opts]),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log.close()
        c = Cluster(base, proc.pid)
        deadline = time.monotonic() + timeout
        while not (base / f".s.PGSQL.{c.port}").exists():
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(
                    "postgres did not start: " + (base / "postgres.log").read_text()[-2000:]
                )
            time.sleep(0.1)
        # the socket exists a moment before connections are accepted
        while subprocess.run(
            [str(binp / "pg_isready"), "-q", "-h", c.host, "-p", str(c.port)], check=False
        ).returncode:
            if time.monotonic() > deadline:
                raise RuntimeError("postgres did not accept connections")
            time.sleep(0.1)
        yield c
    finally:
        if proc is not None:
            _stop(proc, data)
        shutil.rmtree(base, ignore_errors=True)


def _stop(proc: subprocess.Popen[bytes], data: Path) -> None:
    """Fast shutdown of the postmaster we started: SIGINT to its PID (postmaster.pid's first
    line; through runuser, `proc` is runuser's), then SIGKILL to the same PIDs after 15 s."""
    if proc.poll() is not None:
        return
    pids = [proc.pid]
    with suppress(OSError, ValueError, IndexError):
        pids.insert(0, int((data / "postmaster.pid").read_text().split()[0]))
    os.kill(pids[0], signal.SIGINT)
    try:
        proc.wait(15)
    except subprocess.TimeoutExpired:
        for pid in pids:
            os.kill(pid, signal.SIGKILL)
        proc.wait(5)
