"""The two third-party scenarios of bench/PROTOCOL.md v1 (issue 39 section 2): Django's own
admin and a generic ListView (bench/thirdparty) over a PostgreSQL cluster that the bench
starts once a sitting (`thirdparty:database`, which yields the app's uWSGI options and the
session cookie every request carries).

Clients and grids were chosen from the pilot (bench/results/thirdparty.md, the static grid 1,
2, 3, 4, 6, 8, 16 at 64 clients, two rounds run in turn) before any protocol run, as
PROTOCOL.md says, by its rule: three points bracketing the fewest count at 95% of the best,
with the best among them.

- `django-cpu` (the orders change list, logged in: the time is Django's rendering): best 2,
  fewest at 95% 2; the floor is 2, so the grid brackets from above only: 2, 3, 4.
- `django-io` (the top-customers report: the time is PostgreSQL's, on the same CPUs): best
  6, fewest at 95% 6 (4 reached 89%): 4, 6, 8.

Both run PROTOCOL.md's stationary shape: 64 clients for 150 s, the window 90-150 s.
"""

from __future__ import annotations

from thirdparty import CPU_PATH, IO_PATH
from tuner_protocol import Phase, Scenario

CLIENTS = 64
SECONDS = 150.0
WINDOW = (90.0, 150.0)
SERVICE = "thirdparty:database"  # the cluster, the dataset, the logged-in session
# the app's options come from the service; the bench's default app is left out
OPTIONS = {"wsgi-file": None}

SCENARIOS: dict[str, Scenario] = {
    "django-cpu": Scenario(
        (Phase(CPU_PATH, CLIENTS, None, SECONDS),),
        (2, 3, 4),
        WINDOW,
        service=SERVICE,
        options=OPTIONS,
    ),
    "django-io": Scenario(
        (Phase(IO_PATH, CLIENTS, None, SECONDS),),
        (4, 6, 8),
        WINDOW,
        service=SERVICE,
        options=OPTIONS,
    ),
}
