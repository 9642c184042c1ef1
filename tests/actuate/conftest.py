"""The actuator's tests that run the real daemon (a stop during a reload's wait, `doctor`
naming the lock's holder) share its fixture with tests/daemon."""

from tests.daemon.conftest import start_daemon

__all__ = ["start_daemon"]
