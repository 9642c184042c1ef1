"""uWSGI's request log, sampled: one request in `uwsgitune-sample` is logged (docs/latency.md).

Loaded by uWSGI itself, not by uwsgitune: `uwsgitune doctor --latency ADDR --sample K`
prints the ini lines, among them

    disable-logging = true
    uwsgitune-sample = 20
    import = /path/to/uwsgitune/uwsgi_sample.py

uWSGI imports this file by its path in the app's interpreter (it needs nothing but the
standard library and uWSGI's `uwsgi` module, so the app's environment need not have
uwsgitune installed: the file may be copied anywhere uWSGI can read it). It sets
`uwsgi.after_req_hook`, which uWSGI's Python plugin calls after each request and before it
decides whether to log it: with probability 1/K the hook calls `uwsgi.log_this_request()`,
which logs the request although `disable-logging` is on, and sets two request log
variables the log-format prints before its fields: `uwk` (K) and `uwt` (`1`). A line
uWSGI logs on its own (`log-5xx`, `log-slow`, `log-4xx` ...) has neither and prints
`uwk- uwt- ...`: uwsgitune counts it as outside the sample and leaves it out of the
percentiles, which must be of a uniform sample.

Why: uWSGI 2.0 relays every logged line through the master (a `sendmsg` per request) and
renders it in the worker, tens of µs a request: on a route that does nothing, a fifth of its
throughput (bench/results/latency_overhead.md). A request not sampled costs one call of
this hook (a random draw). The draw is independent of the request, so the sample's
percentiles estimate the whole traffic's.

The draw comes from a generator of this file's own (the app's `random.seed` cannot steer
it), seeded again in each worker after the fork (`uwsgi.post_fork_hook`, chained to one set
before this file, as `uwsgi.after_req_hook` is). An app that sets `uwsgi.after_req_hook`
itself later replaces this one (no line then arrives: `doctor` says so). With `strict =
true` uWSGI refuses options it does not know: there, `env = UWSGITUNE_SAMPLE=20` instead.
"""

import os
import random
import sys

import uwsgi  # uWSGI's own module: only inside uWSGI

OPTION = "uwsgitune-sample"
ENV = "UWSGITUNE_SAMPLE"  # the same, for an ini with `strict = true` (`env = ...`)


def every(raw: object) -> int:
    """K from the option's value (bytes or str; the last when repeated); 1 when unusable."""
    if isinstance(raw, list):
        raw = raw[-1] if raw else None
    if isinstance(raw, bytes):
        raw = raw.decode("ascii", "replace")
    text = str(raw).strip() if raw is not None else ""
    if text.isdigit() and 1 <= int(text) <= 1_000_000:
        return int(text)
    print(
        f"uwsgitune: {OPTION} = {text or '(missing)'} is not a whole number from 1 to "
        f"1000000; every request is logged (set e.g. `{OPTION} = 20` in the ini)",
        file=sys.stderr,
        flush=True,
    )
    return 1


_raw = uwsgi.opt.get(OPTION)
K = every(_raw if _raw is not None else os.environ.get(ENV))
_P = 1.0 / K
_K = str(K)
# A generator of its own, not the app's: an app that seeds `random` (per request, with a
# user id) must not steer the draw, nor lose numbers of its stream to it.
_rng = random.Random(os.urandom(16))
_draw = _rng.random
_log = uwsgi.log_this_request
_var = uwsgi.set_logvar
_after_before = getattr(uwsgi, "after_req_hook", None)  # an earlier import's: kept, first
_fork_before = getattr(uwsgi, "post_fork_hook", None)


def _sampled() -> None:
    if _after_before is not None:
        _after_before()
    if _draw() < _P:
        _log()
        _var("uwk", _K)
        _var("uwt", "1")


def _reseed() -> None:
    _rng.seed(os.urandom(16))  # each worker its own numbers
    if _fork_before is not None:
        _fork_before()


uwsgi.after_req_hook = _sampled
uwsgi.post_fork_hook = _reseed
