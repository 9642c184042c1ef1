"""HTTP basic auth against the web config's bcrypt hashes.

A bcrypt check costs ~50-100 ms of CPU at cost 10, so, as exporter-toolkit does, a
successful (user, password, hash) is remembered: Prometheus sends the same credentials every
scrape. The cache holds SHA-256 digests, never a password, and is bounded. A failed check is
never cached, and an unknown user still costs one bcrypt check, so timing tells nothing.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import threading

import bcrypt

# A valid hash of a random string: unknown users are checked against it (constant work).
_DUMMY = b"$2b$10$tWS9VNP.Asi.0c74fgbe7.j430qEUvVrjhVHA0B38XNRky6DAQDw."
MAX_CACHED = 64


def credentials(header: str | None) -> tuple[str, str] | None:
    """(user, password) from an `Authorization: Basic ...` value, or None."""
    if not header:
        return None
    scheme, _, token = header.strip().partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        text = base64.b64decode(token.strip(), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return None
    user, sep, password = text.partition(":")
    return (user, password) if sep else None


class BasicAuth:
    def __init__(self, users: dict[str, bytes]) -> None:
        self.users = dict(users)
        self._ok: set[bytes] = set()
        self._lock = threading.Lock()

    @property
    def enabled(self) -> bool:
        return bool(self.users)

    def check(self, header: str | None) -> bool:
        """Whether the header carries a known user with the right password (blocking)."""
        if not self.users:
            return True
        creds = credentials(header)
        if creds is None:
            return False
        user, password = creds
        hashed = self.users.get(user)
        key = hashlib.sha256(b"\0".join((user.encode(), password.encode(), hashed or b""))).digest()
        with self._lock:
            if hashed is not None and key in self._ok:
                return True
        try:
            good = bcrypt.checkpw(password.encode(), hashed or _DUMMY) and hashed is not None
        except ValueError:  # a malformed hash: the config check refuses those
            return False
        if good:
            with self._lock:
                if len(self._ok) >= MAX_CACHED:
                    self._ok.clear()
                self._ok.add(key)
        return good
