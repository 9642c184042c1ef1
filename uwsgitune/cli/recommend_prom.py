"""`uwsgitune recommend --prometheus URL`: the same findings for every instance a Prometheus
server holds, and a fleet summary.

Theory of operation
-------------------
1. The grid: `--range` (default 24 h) ending at `--end` (default now), at `--step`
   (default 60 s), both aligned to the step so that every query answers on the same points.
2. The instances: `count(count_over_time(uwsgi_up{SELECTOR}[RANGE]))` first, one number, so
   that a selector matching a million series is refused before anything large is asked
   (`--max-instances`); then the label sets of `uwsgi_up` (`/api/v1/series`). A selector
   that matches nothing is said so, with the labels `uwsgi_up` carries there.
3. Batches of instances: a batch is selected by the label whose values tell most instances
   apart (`instance`, `stats_uri`, `pod`) with a regular expression of its values, and
   sized so a batch's points stay bounded (`BATCH_POINTS`): memory is the batch's, not the
   fleet's. Each signal (core/promsignals.py) is one range query per batch, paged.
4. Each instance of the batch: frames rebuilt (core/promframes.py), the rules run over all
   of them at once as `recommend --replay` does (every look-back the instance's span), the
   findings of rules its series cannot judge left out and named as unknown.
5. Only when every batch is read is anything printed: an error half way prints one line and
   exits non-zero, never a part of the fleet as if it were the whole.
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import os
import re
import threading
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from uwsgitune.cli.exporter_flags import go_duration
from uwsgitune.core.frame import Frame
from uwsgitune.core.promframes import (
    InstanceSeries,
    Labels,
    SeriesSet,
    instance_labels,
    is_unknown,
    needs_worker_series,
    rebuild,
    stats_kind,
    unknown_rules,
)
from uwsgitune.core.promsignals import SIGNALS, Signal, matchers, promql_duration, query
from uwsgitune.core.signals import fullest_fill, requests_waiting
from uwsgitune.errors import UserError
from uwsgitune.pipeline import RulesRunner
from uwsgitune.rules.facts import Facts
from uwsgitune.rules.finding import Finding, finding_to_dict
from uwsgitune.rules.fleetsummary import (
    InstanceVerdict,
    count_sources,
    summarise,
    summary_lines,
    summary_to_dict,
)
from uwsgitune.rules.render import report
from uwsgitune.rules.rulesettings import whole_window_settings
from uwsgitune.sources.promapi import MIB, PromClient, PromOptions

BATCH_POINTS = 150_000  # instances x steps per batch: a batch's arrays stay ~40 MB
DEFAULT_MAX_INSTANCES = 5_000
QUERIES_AT_ONCE = 4  # a batch's signal queries in flight together
MAX_JOBS = 4  # judging processes at most (--jobs)
_DAY = re.compile(r"^(\d+(?:\.\d*)?)d(.*)$")


def duration(text: str) -> float:
    """`24h`, `90m`, `1h30m`, `2d`, `15s` or plain seconds -> seconds (> 0)."""
    rest, days = text.strip(), 0.0
    if m := _DAY.match(rest):
        days, rest = float(m.group(1)), m.group(2)
    seconds = days * 86400 + (float(go_duration(rest)) if rest else 0.0)
    if not seconds > 0 or not math.isfinite(seconds):
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive duration; e.g. 24h or 60s")
    return seconds


def _end(text: str) -> float:
    if text == "now":
        return time.time()
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: give unix seconds or now") from None


def _jobs(text: str) -> int:
    if not text.isdigit() or not 0 < int(text) <= 64:
        raise argparse.ArgumentTypeError(f"{text!r}: use a whole number of processes, 1 to 64")
    return int(text)


def add_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("from Prometheus (--prometheus URL: every instance it holds)")
    g.add_argument("--prometheus", metavar="URL", help="a Prometheus server's base URL")
    g.add_argument(
        "--selector",
        default="",
        metavar="MATCHERS",
        help='label matchers of the instances, e.g. \'job="uwsgi",namespace="shop"\'',
    )
    g.add_argument(
        "--range",
        type=duration,
        default=86400.0,
        metavar="DURATION",
        help="how far back to read (default 24h)",
    )
    g.add_argument(
        "--step", type=duration, default=60.0, metavar="DURATION", help="resolution (default 60s)"
    )
    g.add_argument(
        "--end", type=_end, default="now", metavar="UNIX", help="end of the range (default now)"
    )
    g.add_argument("--by", metavar="LABEL", help="group the fleet summary by this label")
    g.add_argument(
        "--max-instances",
        type=int,
        default=DEFAULT_MAX_INSTANCES,
        metavar="N",
        help=f"refuse a selector matching more instances (default {DEFAULT_MAX_INSTANCES})",
    )
    g.add_argument(
        "--prometheus-timeout",
        type=duration,
        default=30.0,
        metavar="DURATION",
        help="per request (default 30s)",
    )
    g.add_argument("--prometheus-user", metavar="USER", help="basic auth user")
    g.add_argument(
        "--prometheus-password-file", type=Path, metavar="FILE", help="basic auth password"
    )
    g.add_argument("--prometheus-ca-file", type=Path, metavar="FILE", help="CA to verify TLS")
    g.add_argument("--prometheus-cert-file", type=Path, metavar="FILE", help="client cert")
    g.add_argument("--prometheus-key-file", type=Path, metavar="FILE", help="client key")
    g.add_argument(
        "--prometheus-insecure-skip-verify",
        action="store_true",
        help="do not verify the server's TLS certificate",
    )
    g.add_argument(
        "--jobs",
        type=_jobs,
        default=0,
        metavar="N",
        help=f"processes judging instances (default: one a CPU, at most {MAX_JOBS}; 1: none)",
    )
    g.add_argument(
        "--prometheus-gzip",
        action="store_true",
        help="ask for compressed answers (a fifth of the bytes, ~9x Prometheus's CPU): "
        "for a slow link",
    )
    g.add_argument(
        "--prometheus-max-mib",
        type=int,
        default=512,
        metavar="MIB",
        help="refuse an answer larger than this (default 512)",
    )


def options(args: argparse.Namespace) -> PromOptions:
    return PromOptions(
        url=args.prometheus,
        timeout=args.prometheus_timeout,
        user=args.prometheus_user,
        password_file=args.prometheus_password_file,
        ca_file=args.prometheus_ca_file,
        cert_file=args.prometheus_cert_file,
        key_file=args.prometheus_key_file,
        insecure_skip_verify=args.prometheus_insecure_skip_verify,
        max_bytes=args.prometheus_max_mib * MIB,
        gzip=args.prometheus_gzip,
    )


@dataclass(frozen=True)
class Grid:
    start: float
    end: float
    step: float

    @property
    def n(self) -> int:
        return round((self.end - self.start) / self.step) + 1

    @classmethod
    def of(cls, end: float, span: float, step: float) -> Grid:
        last = math.floor(end / step) * step
        n = max(int(span // step), 1)
        return cls(last - n * step, last, step)


# --- discovery --------------------------------------------------------------------------


def _sel(selector: str, extra: str = "") -> str:
    parts = [p for p in (matchers(selector), extra) if p]
    return "{" + ",".join(parts) + "}" if parts else ""


def discover(client: PromClient, selector: str, grid: Grid, max_instances: int) -> list[Labels]:
    """The instances `selector` matches in the range, by their label sets."""
    span = promql_duration(grid.end - grid.start + grid.step)
    up = f"uwsgi_up{_sel(selector)}"
    counted = client.instant(f"count(count_over_time({up}[{span}]))", grid.end)
    n = int(float(counted[0].points[0][1])) if counted and counted[0].points else 0
    if n == 0:
        raise UserError(_nothing(client, selector, grid, span), code=2)
    if n > max_instances:
        raise UserError(
            f"--selector {selector or '{}'} matches {n} instances, more than --max-instances "
            f"{max_instances}; narrow --selector (or raise --max-instances)",
            code=2,
        )
    found = {instance_labels(s, False) for s in client.series(up, grid.start, grid.end)}
    return sorted(found)


def _nothing(client: PromClient, selector: str, grid: Grid, span: str) -> str:
    """Why nothing matched: no uwsgi_up at all, or what the uwsgi_up series carry."""
    where = client.url
    names = [n for n in client.label_names("uwsgi_up", grid.start, grid.end) if n != "__name__"]
    if not names:
        return (
            f"{where} holds no uwsgi_up series in the range: is it scraping uwsgi_exporter or "
            "`uwsgitune daemon`? check the scrape config, --prometheus or --range"
        )
    seen = []
    for label in ("job", "namespace", "deployment"):
        if label in names:
            rows = client.instant(
                f"count by ({label}) (count_over_time(uwsgi_up[{span}]))", grid.end
            )
            values = sorted(r.labels.get(label, "") for r in rows)[:5]
            seen.append(f"{label}: {', '.join(values)}")
    shown = f" ({'; '.join(seen)})" if seen else ""
    return (
        f"no uwsgi_up series match --selector {selector or '{}'} at {where} in the range; "
        f"uwsgi_up carries the labels {', '.join(names)}{shown}; fix --selector"
    )


def batches(
    instances: Sequence[Labels], steps: int, points: int = BATCH_POINTS
) -> Iterator[tuple[str, list[Labels]]]:
    """(extra matcher, instances) per batch: instances grouped by the label whose values
    tell most of them apart, at most `points // steps` of them a batch."""
    if not instances:
        return
    per = max(1, points // max(steps, 1))
    names = {k for labels in instances for k, _ in labels}
    key = max(sorted(names), key=lambda k: len({dict(i).get(k) for i in instances}), default="")
    if len(instances) <= per or not key:
        yield "", list(instances)
        return
    by_value: dict[str, list[Labels]] = {}
    for inst in instances:
        by_value.setdefault(dict(inst).get(key, ""), []).append(inst)
    batch: list[Labels] = []
    values: list[str] = []
    for value, group in by_value.items():
        if batch and len(batch) + len(group) > per:
            yield f"{key}=~{_regex(values)}", batch
            batch, values = [], []
        batch.extend(group)
        values.append(value)
    if batch:
        yield f"{key}=~{_regex(values)}", batch


def _regex(values: Sequence[str]) -> str:
    alternatives = "|".join(re.escape(v) for v in values)
    return '"' + alternatives.replace("\\", "\\\\").replace('"', '\\"') + '"'


def fetch(
    client: PromClient,
    selector: str,
    extra: str,
    instances: Sequence[Labels],
    grid: Grid,
    pool: ThreadPoolExecutor,
) -> SeriesSet:
    """Every signal of one batch (its `instances`), on the grid: the signals' queries run
    side by side on `pool` (Prometheus evaluates them on its cores), each answer added to
    the grid as it is decoded and then dropped. The per-worker aggregations are asked only
    when an instance of the batch lacks the daemon's per-instance sums."""
    out = SeriesSet(grid.start, grid.step, grid.n, instances)
    sel = ",".join(p for p in (matchers(selector), extra) if p)
    lock = threading.Lock()

    def one(signal: Signal) -> None:
        for s in client.query_range(query(signal, sel, grid.step), grid.start, grid.end, grid.step):
            with lock:
                out.add(signal.name, s.labels, s.points)

    for done in [pool.submit(one, signal) for signal in SIGNALS if not signal.per_worker]:
        done.result()  # the first failure, as raised
    # the per-worker sums only where the daemon's per-instance ones are not (uwsgi_exporter)
    if any(needs_worker_series(inst) for inst in out.instances.values()):
        for done in [pool.submit(one, signal) for signal in SIGNALS if signal.per_worker]:
            done.result()
    return out


# --- judging ----------------------------------------------------------------------------


def _evaluate(inst: InstanceSeries, frames: Sequence[Frame]) -> list[Finding]:
    rated = [f for f in frames if f.has_rates]
    span = rated[-1].t - rated[0].t + (rated[0].dt or 0.0)
    rules = RulesRunner(Facts(stats_kind=stats_kind(inst)), whole_window_settings(span), math.inf)
    found = rules.run(frames)
    if rules.error is not None:
        raise UserError(f"{inst.name}: {rules.error}; this is a bug, please report it", code=70)
    return list(found)


def verdict(inst: InstanceSeries) -> InstanceVerdict:
    """One instance judged over its frames."""
    built = rebuild(inst)
    frames = built.frames
    unknown = unknown_rules(inst, frames)
    observed = sum(1 for f in frames if f.has_rates) >= 2
    findings = _evaluate(inst, frames) if observed else []
    fills = [x for f in frames if (x := fullest_fill(f)) is not None]
    queues = [x for f in frames if (x := requests_waiting(f)) is not None]
    last = next((f for f in reversed(frames) if f.ok), None)
    return InstanceVerdict(
        name=inst.name,
        labels=dict(inst.labels),
        source="daemon" if inst.daemon else "exporter",
        findings=tuple(f for f in findings if not is_unknown(f.id, unknown)),
        unknown=unknown,
        observed=observed,
        live=last.live if last else None,
        mem_per_worker=last.mem_per_worker if last else None,
        peak_fill=max(fills) if fills else None,
        peak_queue=max(queues) if queues else None,
        tuner_desired=built.tuner_desired,
        steps=built.steps,
        missing=built.missing,
        resets=built.resets,
    )


def _verdicts(series: Sequence[InstanceSeries]) -> list[InstanceVerdict] | tuple[str, int]:
    """`verdict` of each, in a judging process: an error comes back as (message, code)."""
    try:
        return [verdict(inst) for inst in series]
    except UserError as exc:
        return str(exc), exc.code


def _judges(jobs: int) -> ProcessPoolExecutor | None:
    """Processes that judge instances while this one reads the next batch: the rules are
    pure Python, one core each. Started from a fork server (never a fork of this process,
    whose threads may hold locks), which imports the rules once."""
    if jobs < 2:
        return None
    try:
        ctx = multiprocessing.get_context("forkserver")
    except ValueError:  # no fork server on this platform: judge here
        return None
    ctx.set_forkserver_preload([__name__])
    return ProcessPoolExecutor(jobs, mp_context=ctx)


def _judge(
    series: list[InstanceSeries], judges: ProcessPoolExecutor | None, jobs: int
) -> list[InstanceVerdict]:
    """The batch's verdicts, in its order: shared among the judging processes in chunks."""
    if judges is None:
        return [verdict(inst) for inst in series]
    size = max(1, math.ceil(len(series) / (4 * jobs)))  # a few chunks a process: even ends
    chunks = [series[i : i + size] for i in range(0, len(series), size)]
    out: list[InstanceVerdict] = []
    for got in [judges.submit(_verdicts, chunk) for chunk in chunks]:
        done = got.result()
        if isinstance(done, tuple):
            raise UserError(done[0], code=done[1])
        out.extend(done)
    return out


def default_jobs() -> int:
    """Judging processes: one a CPU this process may use, at most `MAX_JOBS`."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return max(1, min(cpus or 1, MAX_JOBS))


def judge_fleet(
    client: PromClient,
    selector: str,
    grid: Grid,
    max_instances: int = DEFAULT_MAX_INSTANCES,
    points: int = BATCH_POINTS,
    jobs: int = 1,
) -> list[InstanceVerdict]:
    """Every instance `selector` matches, judged batch by batch; the next batch is read
    while this one is judged (two batches in memory at most), by `jobs` processes."""
    instances = discover(client, selector, grid, max_instances)
    out: list[InstanceVerdict] = []
    judges = _judges(jobs)
    try:
        with ThreadPoolExecutor(QUERIES_AT_ONCE) as queries, ThreadPoolExecutor(1) as ahead:
            todo = list(batches(instances, grid.n, points))
            pending = (
                [ahead.submit(fetch, client, selector, *todo[0], grid, queries)] if todo else []
            )
            for k, (_, batch) in enumerate(todo):
                got = pending.pop().result()
                if k + 1 < len(todo):
                    nxt = ahead.submit(fetch, client, selector, *todo[k + 1], grid, queries)
                    pending.append(nxt)
                out.extend(_judge([got.instances[labels] for labels in batch], judges, jobs))
                del got
    finally:
        if judges is not None:
            judges.shutdown(cancel_futures=True)
    return out


# --- output -----------------------------------------------------------------------------


def _data_line(v: InstanceVerdict, step: float) -> str | None:
    parts = []
    if v.missing:
        parts.append(f"{v.steps - v.missing} of {v.steps} steps have data ({v.missing} missing)")
    if v.resets:
        parts.append(f"{v.resets} counter reset(s) (reloads): not rated across")
    return "  data: " + "; ".join(parts) if parts else None


def _unknown_lines(v: InstanceVerdict) -> list[str]:
    by_why: dict[str, list[str]] = {}
    for rule, why in v.unknown.items():
        by_why.setdefault(why, []).append(rule)
    return [f"  unknown: {', '.join(rules)}: {why}" for why, rules in by_why.items()]


def instance_lines(v: InstanceVerdict, step: float) -> list[str]:
    if not v.observed:
        return [f"{v.name}: could not observe (fewer than two steps with rates in the range)"]
    lines = report(v.name, v.findings)
    data = _data_line(v, step)
    return [*lines, *([data] if data else []), *_unknown_lines(v)]


def verdict_to_dict(v: InstanceVerdict) -> dict[str, Any]:
    return {
        "instance": v.name,
        "labels": dict(v.labels),
        "source": v.source,
        "observed": v.observed,
        "findings": [finding_to_dict(f) for f in v.findings],
        "unknown": dict(v.unknown),
        "live": v.live,
        "tuner_desired": v.tuner_desired,
        "peak_fill": v.peak_fill,
        "peak_queue": v.peak_queue,
        "steps": v.steps,
        "missing_steps": v.missing,
        "resets": v.resets,
    }


Judged = tuple[dict[str, list[Finding]], dict[str, str]]


def run_prometheus(args: argparse.Namespace) -> Judged:
    """Print every instance's findings and the fleet summary; (findings by instance, the
    unobserved ones) for `recommend`'s exit status."""
    if args.step > args.range:
        raise UserError("--step is longer than --range; e.g. --range 24h --step 60s", code=2)
    grid = Grid.of(args.end, args.range, args.step)
    with PromClient(options(args)) as client:
        jobs = args.jobs or default_jobs()
        verdicts = judge_fleet(client, args.selector, grid, args.max_instances, jobs=jobs)
    summary = summarise(verdicts, args.by)
    if args.json:
        doc = {
            "prometheus": args.prometheus,
            "selector": args.selector,
            "range": {"start": grid.start, "end": grid.end, "step": grid.step},
            "sources": count_sources(verdicts),
            "instances": [verdict_to_dict(v) for v in verdicts],
            **summary_to_dict(summary),
        }
        print(json.dumps(doc, indent=2))
    else:
        for v in verdicts:
            print("\n".join(instance_lines(v, grid.step)))
            print()
        print("\n".join(summary_lines(summary)))
    results = {v.name: list(v.findings) for v in verdicts if v.observed}
    unobserved = {v.name: "" for v in verdicts if not v.observed}
    return results, unobserved
