"""`uwsgitune recommend`: observe an instance for a window, print findings with evidence.

The instance's driver polls for the window (or replays a recording through the same
stages); the rules then judge the whole window at once, with every look-back set to it.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from uwsgitune.cli.common import addresses, positive_float
from uwsgitune.cli.progress import timed
from uwsgitune.cli.recommend_prom import add_flags, run_prometheus
from uwsgitune.core.address import AddressError, parse_address
from uwsgitune.core.frame import Frame
from uwsgitune.core.ini import NotUtf8, decode_ini, read_ini_facts
from uwsgitune.core.settings import add_flag
from uwsgitune.errors import UserError
from uwsgitune.pipeline import InstanceDriver, RulesRunner, live_driver, run_replay
from uwsgitune.render.text import error_line
from uwsgitune.rules.facts import ConfigFacts, Facts
from uwsgitune.rules.finding import SEVERITY_RANK, Finding, finding_to_dict
from uwsgitune.rules.render import report
from uwsgitune.rules.rulesettings import whole_window_settings
from uwsgitune.sources.recording import ReplaySource, read_recording
from uwsgitune.tuner.tunersettings import TunerSettings

EXIT_NONE, EXIT_WARNING, EXIT_CRITICAL, EXIT_UNOBSERVED = 0, 1, 2, 3

EPILOG = """exit status:
  0  no findings, or only informational ones
  1  at least one warning
  2  at least one critical finding
  3  could not observe (no stats document with rates in the window); with --prometheus:
     an instance not observed, or Prometheus could not be read (down, slow, 5xx)
  bad arguments or files also exit 2, with one line on stderr naming the fix"""


def register(sub: Any) -> None:
    p = sub.add_parser(
        "recommend",
        help="observe for a window, then print findings with evidence and recommendations",
        description="Observe an instance for a window (or replay a recording) and print what "
        "a senior operator would say: findings, their evidence, and the setting to change.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("addr", nargs="?", metavar="ADDR", help="stats address, as for `watch`")
    p.add_argument(
        "--window",
        type=positive_float,
        default=None,
        metavar="SECONDS",
        help="observe this long (default 60; with --replay: the whole recording)",
    )
    add_flag(p, TunerSettings, "interval", type=positive_float, metavar="SECONDS")
    p.add_argument("--json", action="store_true", help="findings as JSON")
    p.add_argument("--replay", type=Path, metavar="FILE.jsonl", help="evaluate a recording")
    p.add_argument(
        "--ini",
        type=Path,
        metavar="FILE.ini",
        help="the instance's ini: facts the stats lack (cheaper-algo, offload-threads)",
    )
    add_flags(p)
    p.set_defaults(func=run)


def _read_ini(path: Path, what: str, fix: str = "") -> str:
    """The ini at `path` as text; else a UserError (exit 2) naming it, `what` it is and the
    `fix`."""
    try:
        return decode_ini(path.read_bytes(), str(path))
    except OSError as exc:
        raise UserError(f"{path}: cannot read {what} ({exc.strerror}){fix}", code=2) from None
    except NotUtf8 as exc:
        raise UserError(str(exc), code=2) from None


def _file_loader(base: Path) -> Any:
    def load(name: str) -> str:
        path = (base.parent / name) if not Path(name).is_absolute() else Path(name)
        return _read_ini(path, "the included ini")

    return load


def config_facts(path: Path | None) -> ConfigFacts:
    if path is None:
        return ConfigFacts()
    text = _read_ini(path, "the ini", "; check --ini")
    return ConfigFacts(**read_ini_facts(text, _file_loader(path)))  # type: ignore[arg-type]


def _stats_kind(source: str) -> str | None:
    try:
        return parse_address(source).kind
    except AddressError:
        return None


settings_for = whole_window_settings  # the name the tests know


def _evaluate(
    source: str, frames: list[Frame], config: ConfigFacts, window: float
) -> list[Finding]:
    """The whole observed window judged at once, through the rules' one entry point."""
    facts = Facts(config=config, stats_kind=_stats_kind(source))
    rules = RulesRunner(facts, settings_for(window), lookback=math.inf)  # every frame given
    findings = rules.run(frames)
    if rules.error is not None:
        raise UserError(f"{source}: {rules.error}; this is a bug, please report it", code=70)
    return list(findings)


def _observed(frames: list[Frame]) -> bool:
    return sum(1 for f in frames if f.has_rates) >= 2


def _frames_of(driver: InstanceDriver) -> list[Frame]:
    return list(driver.state.frames)


def _replay(path: Path, window: float | None) -> dict[str, list[Frame]]:
    def make(source: ReplaySource) -> InstanceDriver:  # every frame kept: judged at once
        return InstanceDriver(source, window_seconds=math.inf, window_maxlen=None)

    drivers = run_replay(read_recording(path), make)  # RecordingError: exit 2
    if not drivers:
        raise UserError(f"{path}: the recording holds no polls", code=2)
    by_source = {d.source.name: _frames_of(d) for d in drivers}
    if window is not None:
        by_source = {
            s: [f for f in fs if f.mono >= fs[-1].mono - window] for s, fs in by_source.items()
        }
    return by_source


def _observe(addr: str, window: float, interval: float) -> dict[str, list[Frame]]:
    (address,) = addresses([addr])
    driver = live_driver(
        address, interval=interval, window_seconds=window + 2 * interval, rules=False
    )
    with timed(f"observing {address} for {window:g}s", window):
        driver.run(deadline=time.monotonic() + window)
    return {str(address): _frames_of(driver)}


def _span(frames: Iterable[Frame]) -> float:
    monos = [f.mono for f in frames]
    return max(monos) - min(monos) if monos else 0.0


def run(args: argparse.Namespace) -> int:
    if args.prometheus is not None:
        if args.replay is not None or args.addr:
            raise UserError("give one of ADDR, --replay FILE or --prometheus URL", code=2)
        if args.window is not None or args.ini is not None:
            raise UserError(
                "--window and --ini are for one instance; with --prometheus use --range "
                "(the whole fleet's ini files are not read)",
                code=2,
            )
        return _status(*run_prometheus(args))
    if args.replay is not None and args.addr:
        raise UserError("give either ADDR or --replay FILE, not both", code=2)
    if args.replay is None and not args.addr:
        raise UserError("no stats address; e.g. uwsgitune recommend /tmp/uwsgi-stats.sock", code=2)
    config = config_facts(args.ini)
    if args.replay is not None:
        sources = _replay(args.replay, args.window)
    else:
        sources = _observe(args.addr, args.window or 60.0, args.interval)
    results: dict[str, list[Finding]] = {}
    unobserved: dict[str, str] = {}
    for source, frames in sources.items():
        if not _observed(frames):
            last = frames[-1] if frames else None
            unobserved[source] = f"; last: {error_line(last)}" if last and not last.ok else ""
            continue
        results[source] = _evaluate(source, frames, config, args.window or _span(frames))
    _print(results, unobserved, args.json)
    return _status(results, unobserved)


def _print(results: dict[str, list[Finding]], unobserved: dict[str, str], json_out: bool) -> None:
    if json_out:
        doc = {
            "instances": [
                {"source": s, "findings": [finding_to_dict(f) for f in fs]}
                for s, fs in results.items()
            ],
            "unobserved": list(unobserved),
        }
        print(json.dumps(doc, indent=2))
        return
    for i, (source, findings) in enumerate(results.items()):
        if i:
            print()
        print("\n".join(report(source, findings)))
    for source, why in unobserved.items():
        print(f"{source}: could not observe (no two good polls in the window){why}")


def _status(results: dict[str, list[Finding]], unobserved: dict[str, str]) -> int:
    ranks = [SEVERITY_RANK[f.severity] for fs in results.values() for f in fs]
    worst = max(ranks, default=0)
    if worst >= SEVERITY_RANK["critical"]:
        return EXIT_CRITICAL
    if worst >= SEVERITY_RANK["warning"]:
        return EXIT_WARNING
    return EXIT_UNOBSERVED if unobserved else EXIT_NONE
