"""`doctor --latency ADDR`: the ini lines that send uWSGI's request log to uwsgitune, what
they change in the user's own log, and whether a line arrives (docs/latency.md).

`latency_checks` is pure: the logging lines of the user's ini (in order: `req-logger` repeats)
and what the receiver heard in, one `Check` per requirement out, each with the lines to add:

- **latency-logging**: `disable-logging = true` stops the request lines (only forced ones,
  such as `log-5xx`, still go out): it must go.
- **latency-format**: `log-format` is global, so uwsgitune's tail is appended to the user's
  format, or to uWSGI's default line spelled as a log-format (with the `memory-report`
  prefix when that is on). The check says that the user's request log gets the tail.
- **latency-logger**: `req-logger = socket:ADDR`. With no `req-logger` before, the request
  lines leave uWSGI's own log (`logto`, `daemonize`, stderr): a `req-logger = file:...`
  keeps them, in the file the user already logs to when the ini names one.
- **latency-lines**: on the running instance, the receiver listens on ADDR for a bounded
  time: a line with the tail from the master (proved by sources/logsender.py) passes; lines
  without the tail, or from another process, fail with the reason; silence is "could not
  tell" (no traffic, or the lines are not loaded yet: uWSGI reads them at a reload), never a
  failure.
- **latency-buffer**: the receive buffer the kernel grants (twice `net.core.rmem_max` at
  most) holds about 10,000 short lines at 8 MiB, 500 at the common default: below
  `WANT_RCVBUF` the check names the sysctl to run.

With `sample` K > 1 (`doctor --latency ADDR --sample K`: uWSGI logs 1 request in K, chosen
at random by uwsgitune/uwsgi_sample.py, at a K-th of the cost):

- **latency-logging** wants `disable-logging = true` (the hook logs its sample through it;
  with logging on every request is still logged, at the full cost);
- **latency-format** wants the sampled tail (`logline.SAMPLED_TAIL_FORMAT`);
- **latency-sample**: `uwsgitune-sample = K` and `import = <the hook's path>`;
- **latency-lines** also reads the K the lines carry: lines of the plain tail mean the hook
  is not loaded, another K that the ini's is not the one loaded.

Without it, **latency-sample** says what sampling would save (every request logged costs
uWSGI tens of µs: a fifth of a route that does nothing, bench/results/latency_overhead.md).
With the instance's request rate (the stats read before and after the listening, at least
`RATE_SECONDS` apart), it names a K from `ADVISE_AT` requests a second on (`advised_k`:
`LINES_WANTED` lines a second, `MAX_ADVISED` at most), and says when a K asked for leaves
fewer than `LINES_LOW` lines a second (the 10 s window then holds fewer than the tuner's
200 lines, and its latency is judged on the 60 s one).

`gather_latency` is the thin shell: it reads the ini's pairs and listens.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from uwsgitune.actuate.doctor.checks import Check
from uwsgitune.actuate.override import IniError, load_pairs
from uwsgitune.core.logline import (
    FIELDS_FORMAT,
    OPENING,
    SAMPLED_TAIL_FORMAT,
    UNSAMPLED_MARKER,
    sample_every,
)
from uwsgitune.sources.logsender import SenderCheck
from uwsgitune.sources.reqlog import (
    DEFAULT_LINE_FORMAT,
    DEFAULT_RCVBUF,
    LOG_TAIL,
    MEMORY_REPORT_FORMAT,
    Receiver,
    ReqlogAddressError,
)

MARKER = OPENING.decode()  # the tail's first word, as the ini spells it
SAMPLE_OPTION = "uwsgitune-sample"  # the hook's option (uwsgi_sample.py OPTION)
SAMPLE_ENV = "UWSGITUNE_SAMPLE"  # the same as `env = ...`, for `strict = true` (uwsgi_sample.py)
LOGGING_KEYS = frozenset(
    {
        "req-logger",
        "logger",
        "logto",
        "logto2",
        "daemonize",
        "daemonize2",
        "log-format",
        "logformat",
        "disable-logging",
        "memory-report",
        "import",
        "pyimport",
        "py-import",
        "python-import",
        SAMPLE_OPTION,
        "env",
        "strict",
    }
)
IMPORT_KEYS = ("import", "pyimport", "py-import", "python-import")
HOOK = Path(__file__).resolve().parents[2] / "uwsgi_sample.py"  # uwsgitune/uwsgi_sample.py
SAMPLED_MARK = SAMPLED_TAIL_FORMAT.split(" ", 2)[:2]  # the sampled tail's two first words
_TRUE = {"1", "true", "yes", "on", "y", "t"}
WAIT = 5.0  # seconds the doctor listens for a line
RATE_SECONDS = 2.0  # the least time between the two stats reads the request rate is from
ADVISE_AT = 1000.0  # req/s from which the doctor advises sampling (~3% of a CPU below it)
LINES_WANTED = 50.0  # lines a second an advised K leaves (500 in the 10 s window)
LINES_LOW = 20.0  # lines a second under which a K leaves the 10 s window under 200 lines
MAX_ADVISED = 100
COST_US = 30  # µs of uWSGI's CPU a logged request costs (master + worker, measured)
WANT_RCVBUF = 2 * DEFAULT_RCVBUF  # what the kernel grants when rmem_max allows the request


@dataclass(frozen=True)
class Heard:
    """What the receiver heard while the doctor listened."""

    seconds: float
    lines: int = 0  # lines from the master
    tailed: int = 0  # of those, lines that carry the tail
    strangers: int = 0  # lines from another process
    error: str | None = None  # the receiver could not listen (the port taken ...)
    unproven: str = ""  # why a sender was not proved, when no line was the master's
    rcvbuf: int = 0  # the receive buffer the kernel granted (0: unknown)
    every: int | None = None  # the K the last tailed line carried (1: not sampled)


@dataclass(frozen=True)
class LatencyFacts:
    address: str  # 127.0.0.1:9118
    ini: str | None  # the ini read, or None
    pairs: tuple[tuple[str, str], ...] | None  # its logging lines in order; None: unknown
    heard: Heard | None = None
    sample: int = 1  # the K asked for (--sample): uWSGI logs 1 request in K
    rate: float | None = None  # the instance's requests a second meanwhile (None: unknown)


def _values(pairs: tuple[tuple[str, str], ...], *keys: str) -> list[str]:
    return [v for k, v in pairs if k in keys]


def _last(pairs: tuple[tuple[str, str], ...], *keys: str) -> str | None:
    found = _values(pairs, *keys)
    return found[-1] if found else None


def _on(value: str | None) -> bool:
    return value is not None and value.strip().lower() in _TRUE


def _has_tail(fmt: str, sampled: bool) -> bool:
    if sampled:
        return " ".join(SAMPLED_MARK) in fmt and FIELDS_FORMAT in fmt
    return MARKER in fmt and " ".join(SAMPLED_MARK) not in fmt


def _user_part(fmt: str) -> str:
    """The user's own format: `fmt` without uwsgitune's tail (either one)."""
    for tail in (SAMPLED_TAIL_FORMAT, LOG_TAIL):
        if tail in fmt:
            return fmt.replace(tail, "").rstrip()
    return fmt.rstrip()


def wanted_format(pairs: tuple[tuple[str, str], ...], sampled: bool = False) -> str:
    """The `log-format` to use: the user's with the tail appended, or uWSGI's default line
    spelled as one, with the tail (the sampled tail with `sampled`)."""
    tail = SAMPLED_TAIL_FORMAT if sampled else LOG_TAIL
    current = _last(pairs, "log-format", "logformat")
    if current is not None and _has_tail(current, sampled):
        return current
    user = _user_part(current) if current else ""
    if user:
        return f"{user} {tail}"
    prefix = MEMORY_REPORT_FORMAT if _on(_last(pairs, "memory-report")) else ""
    return f"{prefix}{DEFAULT_LINE_FORMAT} {tail}"


def _logging(f: LatencyFacts, pairs: tuple[tuple[str, str], ...]) -> Check:
    if f.sample > 1:
        if _on(_last(pairs, "disable-logging")):
            return Check("latency-logging", True, "disable-logging = true: only the sample")
        return Check(
            "latency-logging",
            False,
            "request logging is on: every request is still logged (and pays for it); the "
            "sampling hook logs its sample through disable-logging",
            "disable-logging = true",
            how="replace" if _last(pairs, "disable-logging") is not None else "add",
        )
    if _on(_last(pairs, "disable-logging")):
        return Check(
            "latency-logging",
            False,
            "disable-logging = true stops the request lines (only forced ones go out)",
            "disable-logging = false   (or remove the line)",
            how="replace",
        )
    return Check("latency-logging", True, "request logging is on")


def _format(f: LatencyFacts, pairs: tuple[tuple[str, str], ...]) -> Check:
    current = _last(pairs, "log-format", "logformat")
    sampled = f.sample > 1
    want = wanted_format(pairs, sampled)
    if current is not None and _has_tail(current, sampled):
        kind = "sampled tail" if sampled else "tail"
        return Check("latency-format", True, f"log-format carries uwsgitune's {kind}")
    if current is not None and (MARKER in current or " ".join(SAMPLED_MARK) in current):
        why = (
            "your log-format carries uwsgitune's plain tail: the sampled one instead"
            if sampled
            else "your log-format carries uwsgitune's sampled tail: the plain one instead "
            "(or pass --sample K)"
        )
        return Check("latency-format", False, why, f"log-format = {want}", how="replace")
    if current:
        why = (
            "your log-format, with uwsgitune's tail appended (log-format is global: your "
            "request log shows the tail too)"
        )
        return Check("latency-format", False, why, f"log-format = {want}", how="replace")
    why = (
        "no log-format: uWSGI's default line spelled as one (app id and request counters "
        "become '-'), with uwsgitune's tail appended (your request log shows the tail too)"
    )
    return Check("latency-format", False, why, f"log-format = {want}")


def _logger(f: LatencyFacts, pairs: tuple[tuple[str, str], ...]) -> Check:
    loggers = _values(pairs, "req-logger")
    target = f"socket:{f.address}"
    if target in loggers:
        return Check("latency-logger", True, f"req-logger = {target}")
    others = [v for v in loggers if v.startswith("socket:")]
    fix = [f"req-logger = {target}"]
    if loggers:
        kept = ", ".join(loggers)
        detail = f"no req-logger sends to {f.address}; your request loggers ({kept}) stay"
        if others:
            detail += f" (uwsgitune listens on {f.address}, not {', '.join(others)})"
    else:
        logfile = _last(pairs, "logto", "logto2", "daemonize", "daemonize2")
        where = logfile if logfile and logfile.startswith("/") else None
        fix.append(
            f"req-logger = file:{where or '/var/log/uwsgi/requests.log'}"
            "   (keeps your request lines: with a req-logger they leave uWSGI's log)"
        )
        detail = f"no req-logger: add one for {f.address}, and one to keep your request log"
    return Check("latency-logger", False, detail, "\n".join(fix))


def advised_k(rate: float) -> int:
    """The K that leaves about `LINES_WANTED` lines a second at `rate` (1: log every one)."""
    if rate < ADVISE_AT:
        return 1
    return max(2, min(MAX_ADVISED, int(rate // LINES_WANTED)))


def _pace(f: LatencyFacts) -> str:
    """At a known rate with a K: the lines a second it leaves, and a warning when few."""
    if f.rate is None or f.rate <= 0 or f.sample <= 1:
        return ""
    lines = f.rate / f.sample
    note = f"; at {f.rate:.0f} req/s, {lines:.0f} lines a second"
    if lines < LINES_LOW:
        fewer = max(1, int(f.rate // LINES_LOW))
        note += (
            f": the 10 s window holds fewer than 200, so the tuner judges latency on the 60 s "
            f"one (K <= {fewer} keeps {LINES_LOW:.0f} a second)"
        )
    return note


def _sample(f: LatencyFacts, pairs: tuple[tuple[str, str], ...]) -> Check:
    if f.sample <= 1:
        if f.rate is not None and advised_k(f.rate) > 1:
            k = advised_k(f.rate)
            return Check(
                "latency-sample",
                True,
                f"every request logged, at {f.rate:.0f} req/s: about "
                f"{f.rate * COST_US / 1e4:.0f}% of a CPU in uWSGI; --sample {k} logs 1 in {k} "
                f"({f.rate / k:.0f} lines a second) at 1/{k} of that cost",
            )
        return Check(
            "latency-sample",
            True,
            "every request logged (each costs uWSGI tens of µs, up to a fifth of a fast "
            "route's throughput; --sample 20 logs 1 in 20 at a twentieth of that)",
        )
    strict = _on(_last(pairs, "strict"))
    option = _last(pairs, SAMPLE_OPTION)
    if strict and option is not None:
        return Check(
            "latency-sample",
            False,
            f"strict = true: uWSGI refuses the option {SAMPLE_OPTION} it does not know, and "
            "would not start at the next reload; the hook reads the environment instead",
            f"env = {SAMPLE_ENV}={f.sample}   (in place of {SAMPLE_OPTION} = {option})",
            how="replace",
        )
    envs = [v.split("=", 1)[1] for v in _values(pairs, "env") if v.startswith(f"{SAMPLE_ENV}=")]
    have = option if option is not None else (envs[-1] if envs else None)
    line = f"env = {SAMPLE_ENV}={f.sample}" if strict else f"{SAMPLE_OPTION} = {f.sample}"
    hooked = any(v.strip().endswith("uwsgi_sample.py") for v in _values(pairs, *IMPORT_KEYS))
    missing = []
    if have is None or have.strip() != str(f.sample):
        missing.append(line)
    if not hooked:
        missing.append(f"import = {HOOK}")
    if not missing:
        return Check("latency-sample", True, f"1 request in {f.sample} logged, at random{_pace(f)}")
    detail = (
        f"{SAMPLE_OPTION} = {have} in the ini, not {f.sample}"
        if have is not None and have.strip() != str(f.sample)
        else "the sampling hook is not set up (uwsgitune/uwsgi_sample.py: stdlib only, it "
        "may be copied where uWSGI can read it)"
    )
    return Check("latency-sample", False, detail, "\n".join(missing))


def _lines(f: LatencyFacts) -> Check:
    h = f.heard
    if h is None:
        return Check("latency-lines", None, "not checked (no running instance)")
    if h.error:
        return Check("latency-lines", None, h.error)
    if h.lines and h.tailed and f.sample > 1 and h.every is None:
        return Check(
            "latency-lines",
            None,
            f"{h.tailed} request line(s) from the master, all logged by uWSGI outside the "
            "sample (log-5xx, log-slow ...): no sampled one yet",
        )
    if h.lines and h.tailed and f.sample > 1 and h.every != f.sample:
        got = "not sampled (the import line is missing or not loaded, or the app set "
        got += "uwsgi.after_req_hook itself)" if h.every == 1 else f"1 in {h.every}"
        return Check(
            "latency-lines",
            False,
            f"{h.tailed} request line(s) from the master, {got}, not 1 in {f.sample} "
            "(reload uWSGI after changing the ini)",
        )
    if h.lines and h.tailed:
        sampled = f", 1 in {h.every} sampled" if h.every is not None and h.every > 1 else ""
        return Check(
            "latency-lines",
            True,
            f"{h.tailed} request line(s) from the master in {h.seconds:g} s{sampled}",
        )
    if h.lines:
        return Check(
            "latency-lines",
            False,
            f"{h.lines} request line(s) from the master without uwsgitune's tail: "
            "the log-format line is missing or not loaded (reload uWSGI)",
        )
    if h.strangers:
        return Check(
            "latency-lines",
            False,
            f"{h.strangers} line(s) from another process, none from the master ({h.unproven})",
        )
    return Check(
        "latency-lines",
        None,
        f"no request arrived in {h.seconds:g} s (no traffic, or the lines are not loaded: "
        "uWSGI reads them at a reload)",
    )


def _buffer(f: LatencyFacts) -> Check:
    h = f.heard
    if h is None or not h.rcvbuf:
        return Check("latency-buffer", None, "receive buffer not checked")
    kib = h.rcvbuf // 1024
    if h.rcvbuf >= WANT_RCVBUF:
        return Check("latency-buffer", True, f"receive buffer {kib} KiB")
    return Check(
        "latency-buffer",
        False,
        f"receive buffer {kib} KiB: about {h.rcvbuf // 832} lines; beyond them the kernel "
        "drops lines while uwsgitune is busy (uWSGI never waits)",
        f"sysctl -w net.core.rmem_max={DEFAULT_RCVBUF}   (and in /etc/sysctl.d/ to keep it)",
        how="run",
    )


def latency_checks(f: LatencyFacts) -> list[Check]:
    if f.pairs is None:
        lines = [
            f"req-logger = socket:{f.address}",
            f"log-format = {wanted_format((), f.sample > 1)}",
        ]
        if f.sample > 1:
            lines += [
                "disable-logging = true",
                f"{SAMPLE_OPTION} = {f.sample}",
                f"import = {HOOK}",
            ]
        unknown = Check(
            "latency-ini",
            None,
            f"ini unknown ({f.ini or 'pass --ini'}); add these lines",
            "\n".join(lines),
        )
        return [unknown, _lines(f), _buffer(f)]
    checks = [_logging(f, f.pairs), _format(f, f.pairs), _logger(f, f.pairs)]
    checks.append(_sample(f, f.pairs))
    return [*checks, _lines(f), _buffer(f)]


# --- the shell --------------------------------------------------------------------------------


def ini_pairs(ini: Path | None) -> tuple[tuple[tuple[str, str], ...] | None, str | None]:
    """(the ini's logging lines in order, or None; why not)."""
    if ini is None:
        return None, None
    try:
        pairs = load_pairs(ini)
    except (IniError, OSError) as exc:
        return None, str(exc)
    return tuple((k, v) for k, v in pairs if k in LOGGING_KEYS), None


def listen(
    address: str,
    master_pid: int,
    wait: float = WAIT,
    *,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> Heard:
    """Listen on `address` for up to `wait` seconds (less once a tailed line from the master
    arrived): what arrived, by sender."""
    try:
        rx = Receiver(address)
    except ReqlogAddressError as exc:
        return Heard(0.0, error=str(exc))
    check = SenderCheck(min_interval=0.0)
    rcvbuf = rx.rcvbuf
    start = clock()
    lines = tailed = strangers = 0
    every: int | None = None
    unproven = ""
    try:
        while clock() - start < wait and not tailed:
            got = rx.drain(max_datagrams=1000)
            for source, batch in got.lines.items():
                verdict = check.verdict(source, master_pid)
                if verdict.proven:
                    lines += len(batch)
                    for line in batch:
                        k = sample_every(line)
                        if k is not None:  # a tail that parses: its K
                            tailed, every = tailed + 1, k
                        elif UNSAMPLED_MARKER in line:  # the sampled tail, outside the sample
                            tailed += 1
                else:
                    strangers += len(batch)
                    unproven = verdict.reason
            sleep(0.05)
    finally:
        rx.close()
        check.close()
    return Heard(round(clock() - start, 1), lines, tailed, strangers, None, unproven, rcvbuf, every)


def gather_latency(
    address: str,
    ini: Path | None,
    master_pid: int,
    wait: float = WAIT,
    sample: int = 1,
    requests: Callable[[], int | None] | None = None,
    *,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> LatencyFacts:
    """The ini's logging lines, what arrived on `address`, and the request rate meanwhile
    (from `requests()`, the stats' count of requests served, read before and after)."""
    pairs, error = ini_pairs(ini)
    start = clock()
    before = requests() if requests is not None and master_pid else None
    heard = listen(address, master_pid, wait) if master_pid else None
    rate = None
    if before is not None and requests is not None:
        sleep(max(0.0, RATE_SECONDS - (clock() - start)))
        after = requests()
        took = clock() - start
        if after is not None and after >= before and took > 0:
            rate = (after - before) / took
    where = error or (str(ini) if ini else None)
    return LatencyFacts(address, where, pairs, heard, sample, rate)
