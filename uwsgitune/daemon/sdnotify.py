"""sd_notify without libsystemd: one datagram per state change to `$NOTIFY_SOCKET`.

A no-op when the variable is unset (not under systemd, or not Type=notify), like gunicorn's.
Abstract socket names start with '@' and become a leading NUL byte. The watchdog interval is
half of `$WATCHDOG_USEC` (systemd's advice), and only for us when `$WATCHDOG_PID` is unset or
names this process.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Mapping


def _address(value: str) -> str | None:
    if not value or value[0] not in "/@":
        return None  # e.g. vsock: addresses are not supported; stay a no-op
    return "\0" + value[1:] if value[0] == "@" else value


def watchdog_interval(env: Mapping[str, str] | None = None, pid: int | None = None) -> float | None:
    """Seconds between WATCHDOG=1 pings, or None when systemd does not watch us."""
    env = os.environ if env is None else env
    usec = env.get("WATCHDOG_USEC", "")
    owner = env.get("WATCHDOG_PID", "")
    if not usec.isdigit() or int(usec) == 0:
        return None
    if owner and owner != str(os.getpid() if pid is None else pid):
        return None
    return int(usec) / 1e6 / 2


class Notifier:
    def __init__(self, env: Mapping[str, str] | None = None) -> None:
        env = os.environ if env is None else env
        self.address = _address(env.get("NOTIFY_SOCKET", ""))
        self.watchdog = watchdog_interval(env)

    @property
    def enabled(self) -> bool:
        return self.address is not None

    def notify(self, *lines: str) -> bool:
        """Send `KEY=VALUE` lines in one datagram. Never raises: systemd may be gone."""
        if self.address is None:
            return False
        # A socket per message (they are rare). Non-blocking: a unix datagram send blocks
        # while the receiver's queue is full (net.unix.max_dgram_qlen, 10 by default), and a
        # stalled receiver must never stall the event loop; the message is dropped instead.
        flags = socket.SOCK_DGRAM | socket.SOCK_CLOEXEC | socket.SOCK_NONBLOCK
        try:
            with socket.socket(socket.AF_UNIX, flags) as sock:
                sock.sendto("\n".join(lines).encode(), self.address)
        except OSError:
            return False
        return True

    def ready(self, status: str = "") -> bool:
        return self.notify("READY=1", *([f"STATUS={status}"] if status else []))

    def reloading(self) -> bool:
        usec = int(time.clock_gettime(time.CLOCK_MONOTONIC) * 1e6)
        return self.notify("RELOADING=1", f"MONOTONIC_USEC={usec}")

    def stopping(self) -> bool:
        return self.notify("STOPPING=1")

    def ping(self) -> bool:
        return self.notify("WATCHDOG=1")

    def status(self, text: str) -> bool:
        return self.notify(f"STATUS={text}")
