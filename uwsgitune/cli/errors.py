"""User-facing failures: one line on stderr, a non-zero exit, no traceback."""

from __future__ import annotations

from uwsgitune.errors import UwsgituneError


class UserError(UwsgituneError):
    """Bad input or an unreachable instance. `str()` names the thing and the fix."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code
