"""`uwsgitune record`: timestamped raw documents and host samples, as JSON lines.

One driver per instance polls on the schedule; each poll it publishes, good or failed, is
written as it was read (`InstanceState.attempt` and `.raw`), request vars stripped unless
asked for. With `--latency ADDR` (one instance) each poll also carries its latency summary
(`InstanceState.latency`; sources/recording.py), which a replay shows again.
"""

from __future__ import annotations

import argparse
import errno
import os
import stat
import sys
import threading
import time
from pathlib import Path
from typing import IO, Any

from uwsgitune.cli.common import (
    add_latency_flag,
    addresses,
    check_latency,
    duration_seconds,
    latency_stage,
    positive_float,
)
from uwsgitune.errors import UserError
from uwsgitune.nofollow import Directory, open_dir, writable_by_others
from uwsgitune.pipeline import InstanceState, live_driver
from uwsgitune.sources.recording import RecordingWriter


def register(sub: Any) -> None:
    p = sub.add_parser(
        "record",
        help="record stats documents and host samples to a JSONL file",
        description="Record polls for replay (`watch --replay`, `recommend --replay`) and tests.",
    )
    p.add_argument("addrs", nargs="+", metavar="ADDR")
    p.add_argument("-o", "--output", type=Path, required=True, metavar="FILE.jsonl")
    p.add_argument("--duration", type=duration_seconds, default=None, metavar="SECONDS")
    p.add_argument("--interval", type=positive_float, default=1.0, metavar="SECONDS")
    add_latency_flag(p)
    p.add_argument(
        "--keep-request-vars",
        action="store_true",
        help="keep request vars (cookies, auth headers!) in the recording",
    )
    p.set_defaults(func=run)


PRIVATE_FIX = (
    "a recording with request vars (cookies, auth headers) goes only to a new file or to a "
    "regular file of yours with one name (another owner could read it, whatever its mode): "
    "remove it, or give a new name"
)
PLAIN_FIX = "remove it, or give a new name"


def open_output(path: Path, *, private: bool) -> IO[str]:
    """The recording's file, opened relative to its directory (uwsgitune/nofollow.py).

    With request vars (`private`): a new file is created 0600 (O_CREAT|O_EXCL|O_NOFOLLOW);
    an existing one is used only when it is a regular file of ours with one name, made 0600
    and emptied before a byte is written. Anything else (a link, someone else's file, a
    second name) is refused: its owner could read the cookies whatever its mode.

    Without: the umask decides a new file's mode and an existing file keeps its own, as for
    any output. A symlink is followed only when it and its directory belong to us or root
    and nobody else can write that directory (`-o /dev/stdout` works; a link planted in
    /tmp does not), and a regular file with a second name is refused."""
    try:
        with open_dir(path.parent) as d:
            fd = _private(d, path.name) if private else _plain(d, path.name)
    except OSError as exc:
        raise UserError(f"{path}: cannot write ({exc.strerror})", code=2) from None
    try:
        regular = stat.S_ISREG(os.fstat(fd).st_mode)
        if private and os.fstat(fd).st_mode & 0o077:
            os.fchmod(fd, 0o600)  # an existing file: private before it holds anything
        if regular:
            os.ftruncate(fd, 0)
    except OSError as exc:
        os.close(fd)
        raise UserError(
            f"{path}: cannot make it private and empty ({exc.strerror}); remove it or "
            "give another name",
            code=2,
        ) from None
    return os.fdopen(fd, "w", encoding="utf-8")


def _private(d: Directory, name: str) -> int:
    try:
        return d.create(name, os.O_WRONLY, 0o600)
    except FileExistsError:
        fd, _ = d.open(name, os.O_WRONLY, fix=PRIVATE_FIX, owners={os.geteuid()})
        return fd


def _plain(d: Directory, name: str) -> int:
    flags = os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC
    st = d.lstat(name)
    if st is None or not stat.S_ISLNK(st.st_mode) or not _trusted_link(d, st):
        flags |= os.O_NOFOLLOW
    try:
        fd = os.open(name, flags, 0o666, dir_fd=d.fd)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            why = f"{d.link_why(name)} another user could have planted or could swap"
            raise d.refusal(name, why, PLAIN_FIX) from None
        raise
    st = os.fstat(fd)
    if stat.S_ISREG(st.st_mode) and st.st_nlink != 1:
        os.close(fd)
        raise d.refusal(name, f"has {st.st_nlink} hard links", PLAIN_FIX)
    return fd


def _trusted_link(d: Directory, link: os.stat_result) -> bool:
    """A link only we or root could have made, in a directory nobody else can write."""
    ours = (0, os.geteuid())
    return link.st_uid in ours and d.stat.st_uid in ours and not writable_by_others(d.stat)


def run(args: argparse.Namespace) -> int:
    if args.latency is not None and len(args.addrs) != 1:
        raise UserError("--latency receives one instance's request log: give exactly one ADDR", 2)
    check_latency(args.latency)
    addrs = addresses(args.addrs)
    if args.output.exists() and args.output.is_dir():
        raise UserError(f"{args.output}: is a directory; give a file name", code=2)
    stage = latency_stage(args.latency)  # a busy address refused before the file is touched
    try:
        stream = open_output(args.output, private=args.keep_request_vars)
    except UserError:
        if stage is not None:
            stage.close()
        raise
    count = errors = 0
    guard = threading.Lock()
    with stream:
        writer = RecordingWriter(stream, keep_vars=args.keep_request_vars)

        def on_poll(state: InstanceState) -> None:
            nonlocal count, errors
            poll = state.attempt
            if poll is None:
                return
            with guard:  # each instance's driver writes from its own thread
                writer.write(poll, state.raw, state.latency)
                count += 1
                errors += not poll.ok
            if not poll.ok:
                print(f"uwsgitune: {poll.error}", file=sys.stderr)

        drivers = [
            live_driver(a, interval=args.interval, rules=False, latency=stage) for a in addrs
        ]
        end = None if args.duration is None else time.monotonic() + args.duration
        for d in drivers:
            d.subscribe(on_poll)
            d.start(deadline=end)
        try:
            while any(not d.join(0.5) for d in drivers):
                pass
        except KeyboardInterrupt:
            for d in drivers:
                d.stop()
            for d in drivers:
                d.join(5.0)
    print(f"recorded {count} polls ({errors} failed) to {args.output}", file=sys.stderr)
    return 1 if count and errors == count else 0
