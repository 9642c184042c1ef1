"""The suite's own scheduling (tests/conftest.py): the CPU-sizing tests reach pytest-xdist as
one group, so they run in one test process, back to back, and not in every process, each
waiting for its turn while its process idles. And a test that takes the `uwsgi` fixture is
marked `uwsgi`."""

from __future__ import annotations

import os
from collections.abc import Callable

import pytest

from uwsgitune.launch import UwsgiProcess


def test_the_cpu_group_reaches_xdist_before_it_schedules(request: pytest.FixtureRequest) -> None:
    if not os.environ.get("PYTEST_XDIST_WORKER") or not request.config.getvalue("loadgroup"):
        pytest.skip("checks pytest-xdist's loadgroup (the suite's default: -n 3 --dist loadgroup)")
    impls = request.config.pluginmanager.hook.pytest_collection_modifyitems.get_hookimpls()
    called = list(reversed(impls))  # pluggy calls the last registered (and tryfirst) first
    names = [type(impl.plugin).__name__ + " " + impl.plugin_name for impl in called]
    ours = [i for i, impl in enumerate(called) if impl.plugin_name.endswith("tests/conftest.py")]
    xdist = [i for i, impl in enumerate(called) if type(impl.plugin).__name__ == "WorkerInteractor"]
    assert ours and xdist and ours[0] < xdist[0], names
    groups = {
        item.nodeid: str(mark.args[0])
        for item in request.session.items
        if (mark := item.get_closest_marker("xdist_group")) is not None
    }
    late = [node for node, group in groups.items() if not node.endswith(f"@{group}")]
    assert not late, late


def test_a_test_that_takes_the_uwsgi_fixture_is_marked_uwsgi(
    uwsgi: Callable[..., UwsgiProcess], request: pytest.FixtureRequest
) -> None:
    """`-m "not uwsgi"` leaves out every test that can start a real uWSGI (the fixture starts
    nothing until called)."""
    assert request.node.get_closest_marker("uwsgi") is not None


def test_a_test_without_it_is_not(request: pytest.FixtureRequest) -> None:
    assert request.node.get_closest_marker("uwsgi") is None
