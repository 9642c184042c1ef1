"""The restart route: `listen` changes only with a fresh bind, so only a restart command
the user configured applies it.

A reload (`r`, SIGHUP, an Emperor touch) keeps the bound sockets and their backlog, so a
new `listen` written for a reload would silently do nothing. uwsgitune therefore never
reloads for `listen`. With a restart command configured (`--restart-command`, or
`restart_command` in the daemon's config: an argv, run without a shell), a listen change:

1. takes the tuner's listen decision (tuner/backlog.py: the rules' `listen_queue.bursts`
   advice, capped at somaxconn: uWSGI refuses to start above it);
2. validates the configuration uWSGI would read (the user's ini with the override on top);
3. writes the override atomically with `listen = N` (the previous kept as `.prev`);
4. runs the restart command (`UWSGITUNE_LISTEN` and `UWSGITUNE_OVERRIDE` in its
   environment), which must stop the instance and start it again;
5. waits until the stats answer with every socket's backlog at N. Otherwise it restores the
   previous override, runs the restart command once more, and reports a failure: the caller
   stops applying. A stop asked meanwhile (`Halt`, actuate/reload.py) leaves the wait its
   grace, then rolls back the same way and reports the restart `interrupted`.

A restart drops the connections waiting in the old backlog: that is why it is opt-in, paced
by `listen_cooldown` and counted against the hourly change limit.

Running the command
-------------------
The command's *exit* is what counts. A script that starts the new uWSGI in the background
(`uwsgi --ini app.ini &`) exits 0 while that uWSGI still holds the script's stdout: waiting
for the end of the output would wait for the new instance to stop. So:

- it runs in a new session (its own process group), with stdin from /dev/null;
- its stdout and stderr are pipes read while it runs, keeping only the last `KEEP` bytes of
  each; once it exited, what is already in the pipes is read and the pipes are closed. A
  background child it left is neither waited for nor killed (it may be the new uWSGI); it
  writes to a closed pipe from then on (uWSGI ignores SIGPIPE): redirect its output;
- past the timeout the whole group gets SIGTERM, then SIGKILL after `GRACE` seconds;
- its environment is minimal (`command_env`): no secret of the caller's environment leaks
  into it, and no `NOTIFY_SOCKET` lets a uWSGI it starts talk to the caller's systemd unit;
- nothing raises: every failure, whatever it is, comes back as one line, so the caller can
  restore the override it wrote before running the command.
"""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO

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
from uwsgitune.actuate.reload import Halt, ReloadOutcome, check_include
from uwsgitune.core.frame import Frame
from uwsgitune.core.redact import printable

# Running the command -----------------------------------------------------------------------------

KEEP = 4096  # bytes of each output stream kept (the end: the error is usually last)
GRACE = 3.0  # seconds between SIGTERM and SIGKILL to a command's group past its timeout
SAFE_PATH = ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin")
DRAIN = 1 << 20  # at most this many bytes read from the pipes once the command exited


@dataclass(frozen=True)
class RestartCommand:
    argv: tuple[str, ...]
    timeout: float = 120.0  # seconds the command itself may take

    def __str__(self) -> str:
        return " ".join(self.argv)


def command_env(extra: Mapping[str, str], caller: Mapping[str, str]) -> dict[str, str]:
    """The whole environment of the command: PATH (the caller's absolute entries, then the
    system directories), HOME, a C.UTF-8 locale, and `extra` (UWSGITUNE_LISTEN and
    UWSGITUNE_OVERRIDE). Nothing else of the caller's."""
    path = [p for p in caller.get("PATH", "").split(os.pathsep) if p.startswith("/")]
    path += [p for p in SAFE_PATH if p not in path]
    env = {"PATH": os.pathsep.join(path), "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8"}
    if caller.get("HOME", "").startswith("/"):
        env["HOME"] = caller["HOME"]
    return {**env, **extra}


class _Output:
    """The last `KEEP` bytes of each of the command's pipes, read without ever blocking."""

    def __init__(self, streams: list[IO[bytes]]) -> None:
        self.sel = selectors.DefaultSelector()
        self.kept: dict[int, bytes] = {}
        for s in streams:
            os.set_blocking(s.fileno(), False)
            self.sel.register(s, selectors.EVENT_READ)
            self.kept[s.fileno()] = b""

    def read(self, timeout: float) -> int:
        """Read what is ready within `timeout`; the number of bytes read."""
        got = 0
        for key, _ in self.sel.select(timeout) if self.sel.get_map() else ():
            fd = key.fd
            try:
                chunk = os.read(fd, 65536)
            except BlockingIOError:
                continue
            if not chunk:  # EOF: every writer closed it
                self.sel.unregister(key.fileobj)
                continue
            self.kept[fd] = (self.kept[fd] + chunk)[-KEEP:]
            got += len(chunk)
        return got

    def close(self) -> None:
        for key in list(self.sel.get_map().values()):
            self.sel.unregister(key.fileobj)
        self.sel.close()

    def tail(self) -> str:
        """The last line of stderr, else of stdout, cut and safe to print."""
        for data in reversed(list(self.kept.values())):  # stderr was registered last
            lines = data.decode(errors="replace").strip().splitlines()
            if lines:
                return printable(lines[-1].strip())[:200]
        return ""


def _wait(
    proc: subprocess.Popen[bytes], out: _Output, until: float, mono: Callable[[], float]
) -> bool:
    """Read while `proc` runs, until it exits (True) or `until` passes (False)."""
    while proc.poll() is None:
        left = until - mono()
        if left <= 0:
            return False
        if not out.read(min(left, 0.1)) and not out.sel.get_map():
            time.sleep(min(left, 0.1))  # both pipes closed, the command still running
    return True


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except OSError:  # ESRCH: none left; EPERM: none of ours (a sudo'ed child) left
        return False
    return True


def _kill_group(
    proc: subprocess.Popen[bytes], pause: Callable[[float], object], mono: Callable[[], float]
) -> None:
    """SIGTERM to the command's group, SIGKILL to what is left of it after `GRACE`. The
    group's id stays reserved while one member lives, so it names no one else."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except OSError:
            return
        until = mono() + GRACE
        while mono() < until and (proc.poll() is None or _group_alive(proc.pid)):
            pause(0.05)  # reading the pipes: a command blocked on a full one cannot die
        if proc.poll() is not None and not _group_alive(proc.pid):
            return


def _drain(out: _Output) -> None:
    """What the pipes already hold, without waiting for an EOF a background child may hold."""
    total = 0
    while total < DRAIN:
        got = out.read(0)
        if not got:
            return
        total += got


def _said(code: int, tail: str) -> str:
    if code < 0:
        try:
            what = f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            what = f"was killed by signal {-code}"
    else:
        what = f"exited {code}"
    return f"restart command {what}" + (f": {tail}" if tail else "")


def _run(cmd: RestartCommand, env: dict[str, str], mono: Callable[[], float]) -> str | None:
    try:
        proc = subprocess.Popen(
            cmd.argv,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
    except OSError as exc:
        return f"restart command {cmd.argv[0]!r} failed to run: {exc.strerror or exc}"
    assert proc.stdout is not None and proc.stderr is not None
    out = _Output([proc.stdout, proc.stderr])
    try:
        if not _wait(proc, out, mono() + cmd.timeout, mono):
            _kill_group(proc, out.read, mono)
            return f"restart command timed out after {cmd.timeout:g}s; its process group was killed"
        _drain(out)
        return None if proc.returncode == 0 else _said(proc.returncode, out.tail())
    except Exception:
        if proc.poll() is None:  # never two restart commands at once: the caller runs it again
            _kill_group(proc, time.sleep, mono)
        raise
    finally:
        out.close()
        proc.stdout.close()
        proc.stderr.close()


def run_restart(
    cmd: RestartCommand,
    extra_env: Mapping[str, str],
    *,
    caller_env: Mapping[str, str] | None = None,
    mono: Callable[[], float] = time.monotonic,
) -> str | None:
    """Run `cmd`. None: it exited 0 (children it left in the background keep running);
    else one line saying what went wrong. Never raises an Exception."""
    try:
        env = command_env(extra_env, os.environ if caller_env is None else caller_env)
        return _run(cmd, env, mono)
    except Exception as exc:  # any: the caller must restore the override it wrote
        return f"restart command {str(cmd)[:80]!r} failed: {type(exc).__name__}: {exc}"


# The route: validate, write, restart, verify, else roll back -------------------------------------


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
        """Run the restart command (`run_restart`). None: it exited 0; else what went
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
