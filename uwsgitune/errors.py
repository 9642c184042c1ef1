"""The one base of every failure a user can act on.

`str()` of a `UwsgituneError` is one line that names the thing and the fix (a config error
may hold one such line per problem: `lines()`). The CLI catches this base in one place
(`uwsgitune.cli.main`), prints each line as `uwsgitune: LINE` on stderr and exits with
`code` (1 by default, 2 for bad input), without a traceback.
"""

from __future__ import annotations


class UwsgituneError(Exception):
    """A failure the user can act on; `str()` names the thing and the fix."""

    code: int = 1  # the CLI's exit status: 2 for bad input (a flag, a file, an address)

    def lines(self) -> list[str]:
        """What the CLI prints, one `uwsgitune: ` line each."""
        return [str(self)]


class ConfigError(UwsgituneError):
    """One or more config problems (a config file, a web config, flags); `lines()` gives one
    line each, prefixed by the source."""

    code = 2

    def __init__(self, problems: list[str], source: str = "") -> None:
        super().__init__("; ".join(problems))
        self.problems = problems
        self.source = source

    def lines(self) -> list[str]:
        prefix = f"{self.source}: " if self.source else ""
        return [prefix + p for p in self.problems]

    def __str__(self) -> str:
        return "\n".join(self.lines())


class UserError(UwsgituneError):
    """Bad input or an unreachable instance, found by the command line (a flag, an address,
    a file it was given); `code` as the caller says."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code
