"""A real third-party application for the tuner's bench (issue 39 section 2): Django's own
admin and a generic ListView over a PostgreSQL server that the bench starts.

- `django-cpu`: the admin's change list of orders (`/admin/shop/order/`), 100 rows with
  related and computed columns. Logged in: every request carries the session cookie that
  `database()` made. The time is Django's template rendering, in the worker.
- `django-io`: a generic ListView (`/report/top-customers/`), the 20 top customers by spend:
  a join and an aggregate over the whole orders table. The time is the database's.

What each page is, measured on this machine (worker CPU time vs wall time per request), is in
bench/results/thirdparty.md; bench/thirdparty/grid.py measures it again.

Install: `apt-get install -y postgresql` (the server binaries; no system cluster is used) and
`pip install -e '.[bench]'` (Django, psycopg: never a runtime dependency of uwsgitune).

bench/tuner_bench.py runs these pages as PROTOCOL.md's `django-cpu` and `django-io`
through bench/thirdparty_scenarios.py: `database` is their service (entered once a sitting;
it yields `Database`, whose `uwsgi` options and `headers` every run of the sitting uses),
and `missing()` refuses them in one line where they cannot run. loadgen counts a 3xx as a
success: a lost session would read as fast 302s to the login page, so the bench counts every
answer but a 200 as failed (grid.py checks `LoadResult.statuses` is all 200 too).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from thirdparty import pg

HERE = Path(__file__).resolve().parent
WSGI = HERE / "tpsite" / "wsgi.py"
ORDERS = 50_000  # rows in the orders table (2,000 customers, 500 products)
CPU_PATH = "/admin/shop/order/"
IO_PATH = "/report/top-customers/"
DATABASE = "shop"


def missing() -> str | None:
    """Why the third-party scenarios cannot run here, or None."""
    try:
        import django  # noqa: F401
        import psycopg  # noqa: F401
    except ImportError as exc:
        return f"{exc.name} is not installed: pip install -e '.[bench]'"
    return pg.missing()


@dataclass
class Phase:
    """tuner_bench's Phase, field for field."""

    path: str
    clients: int | None
    rate: float | None
    seconds: float


@dataclass
class Scenario:
    """tuner_bench's Scenario, field for field, and what a third-party app adds: its uWSGI
    options, the load's headers and the database it needs (`database()`)."""

    phases: tuple[Phase, ...]
    grid: tuple[int, ...]
    grid_seconds: float | None = None
    threads: int = 1
    uwsgi: dict[str, str | int | bool | list[str]] = field(default_factory=dict)
    headers: tuple[tuple[str, str], ...] = ()

    @property
    def seconds(self) -> float:
        return sum(p.seconds for p in self.phases)

    @contextmanager
    def database(self, orders: int = ORDERS) -> Iterator[Scenario]:
        """The cluster started and loaded, `uwsgi` and `headers` filled; all undone after."""
        with database(orders) as db:
            self.uwsgi, self.headers = db.uwsgi, db.headers
            try:
                yield self
            finally:
                self.uwsgi, self.headers = {}, ()


@dataclass(frozen=True)
class Database:
    cluster: pg.Cluster
    uwsgi: dict[str, str | int | bool | list[str]]  # wsgi-file, chdir, env
    headers: tuple[tuple[str, str], ...]  # the session cookie


def _env(c: pg.Cluster) -> dict[str, str]:
    return {"UWT_PGHOST": c.host, "UWT_PGPORT": str(c.port), "UWT_PGDATABASE": DATABASE}


@contextmanager
def database(orders: int = ORDERS) -> Iterator[Database]:
    """Start a throw-away cluster, load the dataset, log the admin user in; stop it all after.
    The cookie goes into `headers` and nowhere else (never printed or logged)."""
    with pg.cluster() as c:
        c.psql(f"CREATE DATABASE {DATABASE}")
        env = {**os.environ, **_env(c)}
        out = subprocess.run(
            [sys.executable, str(HERE / "tpsite" / "load_data.py"), str(orders)],
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        if out.returncode:
            raise RuntimeError(f"loading the dataset failed: {out.stderr[-2000:]}")
        cookie = out.stdout.strip()
        uwsgi: dict[str, str | int | bool | list[str]] = {
            "wsgi-file": str(WSGI),
            "chdir": str(HERE),
            "env": [f"{k}={v}" for k, v in _env(c).items()],
            # preforked, as Django deploys: the app opens no connection at import, each
            # worker its own at its first request (kept: CONN_MAX_AGE)
        }
        yield Database(c, uwsgi, (("Cookie", f"sessionid={cookie}"),))


def _p(path: str, clients: int, seconds: float) -> Phase:
    return Phase(path, clients, None, seconds)


GRID = (1, 2, 3, 4, 6, 8, 16)
SCENARIOS: dict[str, Scenario] = {
    # the admin's change list: CPU in the worker (template rendering); 64 clients
    "django-cpu": Scenario((_p(CPU_PATH, 64, 75),), GRID, 40),
    # the top-customers report: the time is PostgreSQL's (on the same 2 CPUs here)
    "django-io": Scenario((_p(IO_PATH, 64, 75),), GRID, 40),
}
