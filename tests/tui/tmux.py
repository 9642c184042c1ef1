"""A real terminal for end-to-end tests: one tmux session per test, on a server of its own
(`-L`), always killed. Sessions of tests running at once on the default server raced to
start it on a fresh machine ("server exited unexpectedly", a CI failure)."""

from __future__ import annotations

import re
import subprocess
import time
import uuid
from collections.abc import Callable

TMUX = "/usr/bin/tmux"


class Tmux:
    def __init__(self, command: str, width: int = 120, height: int = 40) -> None:
        self.name = f"uwt-{uuid.uuid4().hex[:8]}"
        self.tmux = [TMUX, "-L", self.name]  # a server of this session's own
        subprocess.run(
            [
                *self.tmux,
                "new-session",
                "-d",
                "-s",
                self.name,
                "-x",
                str(width),
                "-y",
                str(height),
                command,
            ],
            check=True,
        )
        subprocess.run(
            [*self.tmux, "set-option", "-t", self.name, "remain-on-exit", "on"], check=True
        )
        self.pid = int(self._display("#{pane_pid}"))

    def _display(self, fmt: str) -> str:
        out = subprocess.run(
            [*self.tmux, "display-message", "-p", "-t", self.name, fmt],
            capture_output=True,
            text=True,
            check=True,
        )
        return out.stdout.strip()

    def screen(self) -> str:
        out = subprocess.run(
            [*self.tmux, "capture-pane", "-p", "-t", self.name], capture_output=True, text=True
        )
        return out.stdout

    def keys(self, *keys: str) -> None:
        subprocess.run([*self.tmux, "send-keys", "-t", self.name, *keys], check=True)

    def dead(self) -> bool:
        return self._display("#{pane_dead}") == "1"

    def exit_status(self) -> int | None:
        """The status a `with_status` command echoed (tmux 3.3 leaves pane_dead_status empty)."""
        found = re.findall(r"EXIT=(\d+)", self.screen())
        return int(found[-1]) if found else None

    def wait_for(self, cond: Callable[[str], bool], timeout: float = 20.0) -> str:
        deadline = time.monotonic() + timeout
        text = ""
        while time.monotonic() < deadline:
            text = self.screen()
            if cond(text):
                return text
            time.sleep(0.3)
        raise AssertionError(f"screen never matched in {timeout}s:\n{text}")

    def wait_dead(self, timeout: float = 20.0) -> int | None:
        """Wait until the program ended: the pane died, or a `with_status` line printed."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            status = self.exit_status()
            if status is not None or self.dead():
                return status
            time.sleep(0.2)
        raise AssertionError(f"the program did not exit in {timeout}s:\n{self.screen()}")

    def kill(self) -> None:
        subprocess.run([*self.tmux, "kill-server"], capture_output=True)


def with_status(command: str) -> str:
    """A shell line that runs `command` and leaves its exit status on the screen."""
    return f"{command}; echo EXIT=$?; sleep 60"


def master_pid(screen: str) -> int:
    m = re.search(r"master (\d+)", screen)
    assert m, screen
    return int(m.group(1))
