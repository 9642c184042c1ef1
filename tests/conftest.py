from __future__ import annotations

import fcntl
import os
import signal
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest

from tests.uwsgi_harness import uwsgi_instance
from uwsgitune.launch import IniValue, UwsgiProcess

DATA = Path(__file__).resolve().parent / "data"

# Three test processes on two CPUs (`-n 3`, pyproject.toml): most real-uWSGI tests wait on
# sockets, polls, reloads and uWSGI's 1 s master cycle, not on the CPUs (through a run with
# two, the CPUs sat idle about half the time). The tests whose verdict rests on measuring
# the CPUs under load (the tuner's and sweep's sizing, the throughput comparisons) share
# one group (one process) and take turns with the rest: while one of them runs, the other
# processes wait (`_cpu_turns`), so they see what a serial run sees.
CPU_GROUP = frozenset(
    {
        "actuate/test_real_guards.py",
        "actuate/test_real_loop.py",
        "actuate/test_real_scale.py",
        "daemon/test_apply.py",
        "sources/test_reqlog_stall.py",
        "sweep/test_grid_real.py",
        "sweep/test_real.py",
    }
)
# Tests in those files whose verdict measures no CPU (pure, refused input, a clock, a blocked
# master): they run beside the others, two at a time. Each waiting for its turn alone cost a
# whole test of the other process's.
NOT_CPU = frozenset(
    {
        "actuate/test_real_guards.py::test_vassal_detection",
        "actuate/test_real_guards.py::test_no_action_before_the_metrics_settle_after_a_reload",
        "actuate/test_real_loop.py::test_stale_stats_get_no_action",
        "actuate/test_real_loop.py::test_cli_bad_input_is_one_line",
        "actuate/test_real_loop.py::test_cli_doctor_and_observe",
        "sources/test_reqlog_stall.py::test_why_not_unix_a_stalled_unix_datagram_reader_blocks_the_master",
        "sweep/test_grid_real.py::test_refused_grids_are_one_line_and_change_nothing",
        "sweep/test_real.py::test_bad_input_is_one_line_with_the_fix",
        "sweep/test_real.py::test_ctrl_c_mid_sweep_restores_the_count",
    }
)


def _alone(item: pytest.Item) -> bool:
    return item.get_closest_marker("xdist_group") is not None


class _CpuTurns:
    """A readers-writer lock across the test processes: a CPU-group test holds it alone.

    Taken before the test's fixtures are set up (a module-scoped baseline measures alone too)
    and let go after they are torn down (its uWSGI stopped). A CPU-group test followed by
    another keeps it: the group runs as one block, not one CPU test, then one of the other
    process's tests alone while the next CPU test waits for it, and so on."""

    def __init__(self) -> None:
        self.fd: int | None = None
        self.exclusive = False

    def paths(self, run: str) -> tuple[Path, Path]:
        path = Path(tempfile.gettempdir()) / f"uwsgitune-tests-{run}.lock"
        return path, path.with_suffix(".waiting")  # a CPU test waits: no new test starts

    def take(self, item: pytest.Item) -> None:
        run = os.environ.get("PYTEST_XDIST_TESTRUNUID")
        if not run:  # one process (-n 0): nothing runs beside anything
            return
        alone = _alone(item)
        if self.fd is not None and alone and self.exclusive:
            return  # still held from the CPU test before
        self.give()
        path, waiting = self.paths(run)
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        if alone:
            waiting.touch()
            fcntl.flock(self.fd, fcntl.LOCK_EX)
            waiting.unlink(missing_ok=True)
        else:
            end = time.monotonic() + 300  # a CPU test that died waiting holds no one up
            while waiting.exists() and time.monotonic() < end:
                time.sleep(0.05)
            fcntl.flock(self.fd, fcntl.LOCK_SH)
        self.exclusive = alone

    def give(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd, self.exclusive = None, False


_turns = _CpuTurns()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    _turns.take(item)


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    if not (_alone(item) and nextitem is not None and _alone(nextitem)):
        _turns.give()


def pytest_configure(config: pytest.Config) -> None:
    """Started as a background job of a shell without job control, this process inherits
    SIGINT ignored, and so would every process a test starts (an ignored signal stays
    ignored across exec): a test that stops its uWSGI, load or watcher with SIGINT would
    wait in vain. Python's own handler here makes the children start with the default."""
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


# First: pytest-xdist's own hook (in each test process) turns the mark into the group it
# schedules by (a `@cpu` suffix on the test's id); run after it, the mark came too late and
# the group's tests went to every process, each then waiting for a test of another's (the
# suite took a minute longer; tests/test_conftest.py checks the suffix).
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    root = Path(__file__).resolve().parent
    for item in items:
        if "uwsgi" in getattr(item, "fixturenames", ()):
            # starts a real uWSGI through the fixture: marked, so `-m "not uwsgi"` leaves it
            # out where uWSGI is not installed (18 such tests were not marked by hand)
            item.add_marker(pytest.mark.uwsgi)
        path = item.path.relative_to(root).as_posix()
        name = getattr(item, "originalname", item.name)
        if path in CPU_GROUP and f"{path}::{name}" not in NOT_CPU:
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
