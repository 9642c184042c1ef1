"""`listen`: only a fresh bind changes it, so only a restart the user configured applies it.

A reload (`r`, SIGHUP, an Emperor touch) keeps the bound sockets and their backlog, so a
new `listen` written for a reload would silently do nothing. uwsgitune therefore never
reloads for `listen`. With a restart command configured (`--restart-command`, or
`restart_command` in the daemon's config: an argv, run without a shell), a listen change:

1. takes the tuner's listen decision (tuner/listen.py: the rules' `listen_queue.bursts`
   advice, capped at somaxconn: uWSGI refuses to start above it);
2. validates the configuration uWSGI would read (the user's ini with the override on top);
3. writes the override atomically with `listen = N` (the previous kept as `.prev`);
4. runs the restart command (`UWSGITUNE_LISTEN` and `UWSGITUNE_OVERRIDE` in its
   environment), which must stop the instance and start it again;
5. waits until the stats answer with every socket's backlog at N. Otherwise it restores the
   previous override, runs the restart command once more, and reports a failure: the caller
   stops applying. A stop asked meanwhile (`Halt`) leaves the wait its grace, then rolls back
   the same way and reports the restart `interrupted`.

A restart drops the connections waiting in the old backlog: that is why it is opt-in, paced
by `listen_cooldown` and counted against the hourly change limit.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from uwsgitune.actuate.halt import Halt
from uwsgitune.actuate.override import (
    IniError,
    OverrideError,
    decode_or_refuse,
    load_config,
    override_bytes,
    problems,
    read_keys,
    render_keys,
    write_atomic,
)
from uwsgitune.actuate.reload import ReloadOutcome, check_include
from uwsgitune.actuate.restartcmd import RestartCommand as RestartCommand
from uwsgitune.actuate.restartcmd import run_restart
from uwsgitune.core.frame import Frame


def backlogs(frame: Frame) -> list[int]:
    return [s.backlog for s in frame.sockets if s.backlog is not None]


class ListenApplier:
    def __init__(
        self,
        override_path: Path,
        user_ini: Path | None,
        restart: RestartCommand,
        poll: Callable[[], Frame],
        *,
        interval: float = 0.5,
        sleep: Callable[[float], None] = time.sleep,
        mono: Callable[[], float] = time.monotonic,
        halt: Halt | None = None,
    ) -> None:
        self.halt = halt
        self.path = Path(override_path)
        self.user_ini = user_ini
        self.restart = restart
        self.poll = poll
        self.interval = interval
        self._sleep = sleep
        self._mono = mono

    def plan(self, target: int, somaxconn: int | None) -> dict[str, str]:
        """The override keys with `listen = target`; raise OverrideError unless it is safe."""
        if self.user_ini is None:
            raise OverrideError("the instance's ini is unknown; pass --ini so it can be validated")
        keys = {**read_keys(self.path), "listen": str(target)}
        try:
            check_include(self.user_ini, self.path)
            config = load_config(self.user_ini)
        except (IniError, OSError) as exc:
            raise OverrideError(str(exc)) from None
        found = problems({**config, **keys}, somaxconn=somaxconn)
        if found:
            raise OverrideError("; ".join(found))
        return keys

    def apply(
        self,
        target: int,
        before: Frame,
        deadline: float,
        intent: Callable[[], str | None] = lambda: None,
    ) -> ReloadOutcome:
        """Validate, write, restart, verify; roll back on failure. Raises OverrideError (and
        OSError) before anything is written; `intent()` as in `Reloader.apply`."""
        keys = self.plan(target, before.somaxconn)
        problem = intent()
        if problem:
            raise OverrideError(problem)
        old = override_bytes(self.path)  # never through a link (SetupError)
        old_text = decode_or_refuse(old, self.path) if old is not None else render_keys({})
        write_atomic(self.path, render_keys(keys))
        start = self._mono()
        ran = self._run(target)  # bounded by the command's own timeout
        # the deadline counts from the command's exit: a slow `systemctl restart` that
        # succeeds is not a failure
        if ran is None and self._wait(target, before, self._mono() + deadline):
            took = self._mono() - start
            return ReloadOutcome(True, f"restarted with listen {target} in {took:.1f}s", took)
        took = self._mono() - start
        halted = ran is None and self.halt is not None and self.halt.is_set()
        within = "when uwsgitune was stopped" if halted else f"within {deadline:g}s"
        what = ran or f"not back with every backlog at {target} {within}"
        write_atomic(self.path, old_text, keep_prev=False)
        previous = min(backlogs(before), default=0)
        again = self._run(previous)
        what += "; previous override restored, restart run again"
        what += f" ({again})" if again else ""
        return ReloadOutcome(False, what, took, restored=True, interrupted=halted)

    def _run(self, listen: int) -> str | None:
        """Run the restart command (actuate/restartcmd.py). None: it exited 0; else what went
        wrong, whatever it was: this never raises, so the override is always restored."""
        env = {"UWSGITUNE_LISTEN": str(listen), "UWSGITUNE_OVERRIDE": str(self.path)}
        return run_restart(self.restart, env)

    def _wait(self, target: int, before: Frame, until: float) -> bool:
        while self._mono() < (until if self.halt is None else self.halt.until(until)):
            if self.halt is None:
                self._sleep(self.interval)
            else:
                self.halt.pause(self.interval, self._sleep)
            frame = self.poll()
            if frame.kind == "error" or frame.master_pid is None:
                continue
            found = backlogs(frame)
            if found and all(b == target for b in found):
                return True
        return False
