from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest

from tests.uwsgi_harness import uwsgi_instance
from uwsgitune.launch import IniValue, UwsgiProcess

DATA = Path(__file__).resolve().parent / "data"
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
