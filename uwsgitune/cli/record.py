"""`uwsgitune record`: timestamped raw documents and host samples, as JSON lines."""

from __future__ import annotations

import argparse
import os
import stat
import sys
import time
from pathlib import Path
from typing import IO, Any

from uwsgitune.cli.common import addresses, duration_seconds, positive_float
from uwsgitune.cli.errors import UserError
from uwsgitune.core.samples import Poll
from uwsgitune.sources.recording import RecordingWriter
from uwsgitune.sources.watcher import InstanceWatch


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
    p.add_argument(
        "--keep-request-vars",
        action="store_true",
        help="keep request vars (cookies, auth headers!) in the recording",
    )
    p.set_defaults(func=run)


def open_output(path: Path, *, private: bool) -> IO[str]:
    """The recording's file. With request vars (cookies, auth headers) it is created 0600,
    and an existing file is made 0600 before a byte is written; else the umask decides."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600 if private else 0o666)
    except OSError as exc:
        raise UserError(f"{path}: cannot write ({exc.strerror})", code=2) from None
    try:
        regular = stat.S_ISREG(os.fstat(fd).st_mode)
        if private and regular and os.fstat(fd).st_mode & 0o077:
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


def run(args: argparse.Namespace) -> int:
    addrs = addresses(args.addrs)
    if args.output.exists() and args.output.is_dir():
        raise UserError(f"{args.output}: is a directory; give a file name", code=2)
    stream = open_output(args.output, private=args.keep_request_vars)
    count = errors = 0
    with stream:
        writer = RecordingWriter(stream, keep_vars=args.keep_request_vars)

        def on_poll(poll: Poll, raw: bytes | None) -> None:
            nonlocal count, errors
            writer.write(poll, raw)
            count += 1
            if not poll.ok:
                errors += 1
                print(f"uwsgitune: {poll.error}", file=sys.stderr)

        watches = [InstanceWatch(a, interval=args.interval, on_poll=on_poll) for a in addrs]
        end = None if args.duration is None else time.monotonic() + args.duration
        try:
            while end is None or time.monotonic() < end:
                for w in watches:
                    if w.due():
                        w.step()
                wake = min(w.next_due for w in watches)
                if end is not None:
                    wake = min(wake, end)
                time.sleep(max(0.0, wake - time.monotonic()))
        except KeyboardInterrupt:
            pass
    print(f"recorded {count} polls ({errors} failed) to {args.output}", file=sys.stderr)
    return 1 if count and errors == count else 0
