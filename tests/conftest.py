from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest

from tests.uwsgi_harness import uwsgi_instance
from uwsgitune.launch import IniValue, UwsgiProcess

FIXTURES = Path(__file__).resolve().parent.parent.parent / "shared" / "fixtures" / "stats"
LOCAL_FIXTURES = Path(__file__).resolve().parent / "data" / "stats"


def stats_fixture(name: str) -> bytes:
    """A recorded stats document: tests/data/stats first, then ../shared/fixtures/stats."""
    for base in (LOCAL_FIXTURES, FIXTURES):
        path = base / name
        if path.exists():
            return path.read_bytes()
    raise FileNotFoundError(name)


@pytest.fixture
def uwsgi() -> Iterator[Callable[..., UwsgiProcess]]:
    """Factory: `uwsgi(processes=2, threads=2)` starts a real instance, stopped at teardown."""
    with ExitStack() as stack:

        def start(**overrides: IniValue) -> UwsgiProcess:
            return stack.enter_context(uwsgi_instance(**overrides))

        yield start
