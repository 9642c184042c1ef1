from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest

from tests.uwsgi_harness import uwsgi_instance
from uwsgitune.launch import IniValue, UwsgiProcess

DATA = Path(__file__).resolve().parent / "data"

# Two test processes (`-n 2`, pyproject.toml): most real-uWSGI tests wait on sockets, polls
# and reloads, not on the CPUs. The tests that put CPU load on a real uWSGI, or measure it,
# and the CPU-heavy property runs, share one group: they run one at a time, in one process,
# beside at most one waiting test, as on the busy 2-core machine they are written for.
CPU_GROUP = frozenset({
    "daemon/test_apply.py", "daemon/test_daemon.py", "faults/test_clock.py",
    "faults/test_daemon_faults.py", "faults/test_fuzz.py", "observe/test_live.py",
    "rules/test_properties.py", "sweep/test_generator.py", "sweep/test_grid_real.py",
    "sweep/test_real.py", "tui/test_e2e.py", "tuner/test_model.py",
    "tuner/test_real_guards.py", "tuner/test_real_listen.py", "tuner/test_real_loop.py",
    "tuner/test_real_reload.py", "tuner/test_real_restart_background.py",
    "tuner/test_real_scale.py", "tuner/test_real_tui_tuner.py",
})  # fmt: skip


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
