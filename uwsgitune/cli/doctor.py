"""`uwsgitune doctor`: is an instance ready to be tuned? Says exactly what to add where not."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from uwsgitune.actuate.doctor import checks, gather
from uwsgitune.actuate.doctor.checks import served
from uwsgitune.actuate.doctor.reqlogsetup import WAIT, gather_latency, latency_checks
from uwsgitune.cli.common import addresses
from uwsgitune.core.logline import MAX_SAMPLE
from uwsgitune.errors import UserError
from uwsgitune.sources.reqlog import ReqlogAddressError, parse_reqlog_address

MARK = {True: "ok  ", False: "FAIL", None: "??  "}


def register(sub: Any) -> None:
    p = sub.add_parser(
        "doctor",
        help="check that an instance is ready to be tuned",
        description="Check stats, FIFO, cheaper mode, memory-report, the override include, that "
        "a reload reads the ini again (no `lazy`), listen, and that uWSGI's user can read its "
        "ini and the override; print the exact ini lines to add (or the command to run) where "
        "something is missing.",
    )
    p.add_argument("addr", metavar="ADDR", help="stats address of the instance")
    p.add_argument("--fifo", metavar="PATH", help="master FIFO (default: from the ini)")
    p.add_argument("--ini", metavar="PATH", help="the instance's ini (default: from /proc)")
    p.add_argument("--override", metavar="PATH", help="the override ini uwsgitune will own")
    p.add_argument(
        "--latency",
        metavar="ADDR",
        help="also check that uWSGI sends its request log to ADDR (UDP on loopback, e.g. "
        "127.0.0.1:9118): print the ini lines to add and listen for a line "
        f"(up to {WAIT:g} s; docs/latency.md)",
    )
    p.add_argument(
        "--sample",
        metavar="K",
        type=int,
        default=1,
        help="with --latency: uWSGI logs 1 request in K, at random (a K-th of the logging's "
        "cost; the percentiles are the sample's): print and check the lines for it "
        "(default 1: every request)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    (address,) = addresses([args.addr])
    latency = None
    if args.latency:
        try:
            host, port = parse_reqlog_address(args.latency)
        except ReqlogAddressError as exc:
            raise UserError(str(exc), code=2) from None
        latency = f"{host}:{port}"
    if not 1 <= args.sample <= MAX_SAMPLE:
        raise UserError(
            f"--sample {args.sample}: give a whole number from 1 (every request) to "
            f"{MAX_SAMPLE}, e.g. --sample 20",
            code=2,
        )
    if args.sample > 1 and latency is None:
        raise UserError("--sample needs --latency ADDR (the request log it samples)", code=2)
    facts = gather(address, args.fifo, args.ini, args.override)
    results = checks(facts)
    if latency is not None:
        ini = Path(facts.ini) if facts.ini else None
        heard = gather_latency(
            latency, ini, facts.master_pid, sample=args.sample, requests=lambda: served(address)
        )
        results += latency_checks(heard)
    for c in results:
        print(f"{MARK[c.ok]} {c.name}: {c.detail}")
        if c.ok is not True and c.fix:
            for line in c.fix.splitlines():
                print(f"      {c.how}: {line}")
    bad = [c.name for c in results if c.ok is False]
    unknown = [c.name for c in results if c.ok is None]
    if bad:
        print(f"not ready: fix {', '.join(bad)}")
        return 1
    print("ready" + (f" (could not check: {', '.join(unknown)})" if unknown else ""))
    return 0
