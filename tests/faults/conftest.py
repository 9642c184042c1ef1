"""Fault injection: the daemon fixture is shared with tests/daemon."""

from tests.daemon.conftest import start_daemon

__all__ = ["start_daemon"]
