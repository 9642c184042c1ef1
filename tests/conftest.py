from __future__ import annotations

import fcntl
import os
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest

from tests.uwsgi_harness import uwsgi_instance
from uwsgitune.launch import IniValue, UwsgiProcess

DATA = Path(__file__).resolve().parent / "data"

# Two test processes (`-n 2`, pyproject.toml): most real-uWSGI tests wait on sockets, polls
# and reloads, not on the CPUs. The tests whose verdict rests on measuring the CPUs under
# load (the tuner's and sweep's sizing) share one group (one process) and take turns with
# the rest: while one of them runs, the other process waits (`_cpu_turns`), so they see
# what a serial run sees.
CPU_GROUP = frozenset(
    {
        "actuate/test_real_guards.py",
        "actuate/test_real_loop.py",
        "actuate/test_real_scale.py",
        "core/test_staffing.py",
        "daemon/test_apply.py",
        "sources/test_reqlog_stall.py",
        "sweep/test_grid_real.py",
        "sweep/test_real.py",
    }
)


@pytest.fixture(autouse=True)
def _cpu_turns(request: pytest.FixtureRequest) -> Iterator[None]:
    """A readers-writer lock across the test processes: a CPU-group test holds it alone."""
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID")
    if not run:  # one process (-n 0): nothing runs beside anything
        yield
        return
    path = Path(tempfile.gettempdir()) / f"uwsgitune-tests-{run}.lock"
    waiting = path.with_suffix(".waiting")  # a CPU test waits: no new test starts beside it
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        if request.node.get_closest_marker("xdist_group") is not None:
            waiting.touch()
            fcntl.flock(fd, fcntl.LOCK_EX)
            waiting.unlink(missing_ok=True)
        else:
            end = time.monotonic() + 300  # a CPU test that died waiting holds no one up
            while waiting.exists() and time.monotonic() < end:
                time.sleep(0.05)
            fcntl.flock(fd, fcntl.LOCK_SH)
        yield
    finally:
        os.close(fd)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    root = Path(__file__).resolve().parent
    for item in items:
        if item.path.relative_to(root).as_posix() in CPU_GROUP:
            item.add_marker(pytest.mark.xdist_group("cpu"))


FIXTURES = DATA / "stats"  # recorded stats documents; tests read nothing outside the repository


def stats_fixture(name: str) -> bytes:
    """A recorded stats document from tests/data/stats."""
    return (FIXTURES / name).read_bytes()


@pytest.fixture
def uwsgi() -> Iterator[Callable[..., UwsgiProcess]]:
    """Factory: `uwsgi(processes=2, threads=2)` starts a real instance, stopped at teardown."""
    with ExitStack() as stack:

        def start(**overrides: IniValue) -> UwsgiProcess:
            return stack.enter_context(uwsgi_instance(**overrides))

        yield start
