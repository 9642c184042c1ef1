"""`doctor --latency ADDR --sample K`: the lines that make uWSGI log 1 request in K, checked
from the ini, then on a real uWSGI (the K its lines carry)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.actuate.test_doctor_reqlogsetup import ADDR, logging_instance, traffic
from uwsgitune.actuate.doctor import Check
from uwsgitune.actuate.doctor.reqlogsetup import (
    HOOK,
    Heard,
    LatencyFacts,
    advised_k,
    gather_latency,
    ini_pairs,
    latency_checks,
)
from uwsgitune.cli.main import main
from uwsgitune.core.logline import SAMPLED_TAIL_FORMAT, TAIL_FORMAT, log_format
from uwsgitune.launch import UwsgiProcess

Start = Callable[..., UwsgiProcess]


def checks_for(
    ini: str, tmp_path: Path, sample: int, heard: Heard | None = None, rate: float | None = None
) -> dict[str, Check]:
    path = tmp_path / "app.ini"
    path.write_text(ini)
    pairs, error = ini_pairs(path)
    assert error is None
    facts = LatencyFacts(ADDR, str(path), pairs, heard, sample, rate)
    return {c.name: c for c in latency_checks(facts)}


def test_the_hook_file_is_where_the_doctor_says() -> None:
    assert HOOK.is_file() and "uwsgi.after_req_hook = _sampled" in HOOK.read_text()


def test_a_plain_ini_gets_every_line_sampling_needs(tmp_path: Path) -> None:
    got = checks_for("[uwsgi]\nmodule = app\n", tmp_path, 20)
    assert got["latency-logging"].ok is False
    assert got["latency-logging"].fix == "disable-logging = true"
    assert got["latency-format"].ok is False
    assert got["latency-format"].fix.endswith(SAMPLED_TAIL_FORMAT)
    assert got["latency-sample"].ok is False
    assert got["latency-sample"].fix.splitlines() == ["uwsgitune-sample = 20", f"import = {HOOK}"]


def test_a_configured_ini_passes_and_a_plain_tail_is_swapped(tmp_path: Path) -> None:
    ini = (
        "[uwsgi]\ndisable-logging = true\nuwsgitune-sample = 20\n"
        f"import = /opt/hooks/uwsgi_sample.py\nreq-logger = socket:{ADDR}\n"
        f"log-format = %(status) {SAMPLED_TAIL_FORMAT}\n"
    )
    got = checks_for(ini, tmp_path, 20)
    assert all(got[n].ok for n in ("latency-logging", "latency-format", "latency-sample"))
    plain = ini.replace(SAMPLED_TAIL_FORMAT, TAIL_FORMAT)
    swapped = checks_for(plain, tmp_path, 20)["latency-format"]
    assert swapped.ok is False and swapped.fix == f"log-format = %(status) {SAMPLED_TAIL_FORMAT}"
    back = checks_for(ini, tmp_path, 1)["latency-format"]  # without --sample: the plain one
    assert back.ok is False and back.fix == f"log-format = %(status) {TAIL_FORMAT}"
    other_k = checks_for(ini.replace("= 20", "= 5"), tmp_path, 20)["latency-sample"]
    assert other_k.ok is False and "uwsgitune-sample = 5 in the ini, not 20" in other_k.detail


@pytest.mark.parametrize(
    ("every", "ok", "says"),
    [
        (20, True, "request line(s) from the master in 1 s, 1 in 20 sampled"),
        (1, False, "not sampled (the import line is missing"),
        (5, False, "1 in 5, not 1 in 20"),
        (None, None, "outside the sample"),
    ],
)
def test_the_k_the_lines_carry_is_judged(
    every: int | None, ok: bool | None, says: str, tmp_path: Path
) -> None:
    heard = Heard(1.0, lines=3, tailed=3, every=every)
    got = checks_for("[uwsgi]\n", tmp_path, 20, heard)["latency-lines"]
    assert got.ok is ok and says in got.detail, got


CONFIGURED = (
    "[uwsgi]\ndisable-logging = true\nuwsgitune-sample = 20\n"
    f"import = {HOOK}\nreq-logger = socket:{ADDR}\nlog-format = {SAMPLED_TAIL_FORMAT}\n"
)


def test_strict_mode_takes_the_environment_not_an_unknown_option(tmp_path: Path) -> None:
    """uWSGI with `strict = true` exits on an option it does not know: the doctor never
    prints one there, and names the one in the ini."""
    strict = CONFIGURED + "strict = true\n"
    refused = checks_for(strict, tmp_path, 20)["latency-sample"]
    assert refused.ok is False and "would not start at the next reload" in refused.detail
    assert refused.fix.startswith("env = UWSGITUNE_SAMPLE=20") and refused.how == "replace"
    by_env = strict.replace("uwsgitune-sample = 20", "env = UWSGITUNE_SAMPLE=20")
    assert checks_for(by_env, tmp_path, 20)["latency-sample"].ok is True
    bare = "[uwsgi]\nstrict = true\n"
    assert checks_for(bare, tmp_path, 20)["latency-sample"].fix.splitlines()[0] == (
        "env = UWSGITUNE_SAMPLE=20"
    )


def test_the_advised_k_leaves_about_50_lines_a_second() -> None:
    assert [advised_k(r) for r in (0.0, 999.0, 1000.0, 2600.0, 1e6)] == [1, 1, 20, 52, 100]


def test_the_rate_names_a_k_or_says_a_k_leaves_too_few_lines(tmp_path: Path) -> None:
    busy = checks_for("[uwsgi]\n", tmp_path, 1, rate=4000.0)["latency-sample"]
    assert busy.ok is True and "at 4000 req/s: about 12% of a CPU" in busy.detail
    assert "--sample 80 logs 1 in 80 (50 lines a second)" in busy.detail
    quiet = checks_for("[uwsgi]\n", tmp_path, 1, rate=300.0)["latency-sample"]
    assert "req/s" not in quiet.detail  # under ADVISE_AT: no K named
    few = checks_for(CONFIGURED, tmp_path, 20, rate=300.0)["latency-sample"]
    assert few.ok is True and "at 300 req/s, 15 lines a second: the 10 s window" in few.detail
    assert "K <= 15 keeps 20 a second" in few.detail
    enough = checks_for(CONFIGURED, tmp_path, 20, rate=3000.0)["latency-sample"]
    assert enough.detail.endswith("at 3000 req/s, 150 lines a second")


def rate_over(counts: list[int | None], now: list[float], slept: list[float]) -> float | None:
    """The rate `gather_latency` reads from these two stats counts, on a clock that only
    moves when it sleeps."""
    reads = iter(counts)

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        now[0] += seconds

    facts = gather_latency(
        "127.0.0.1:0",
        None,
        1,
        wait=0.0,
        requests=lambda: next(reads),
        clock=lambda: now[0],
        sleep=sleep,
    )
    return facts.rate


def test_the_rate_is_read_over_at_least_two_seconds() -> None:
    now, slept = [10.0], list[float]()
    assert rate_over([1000, 3000], now, slept) == 1000.0 and slept == [2.0]
    assert rate_over([1000, None], now, slept) is None  # the second read failed: unknown
    assert rate_over([1000, 10], now, slept) is None  # a reload between: counters restarted


def test_an_unknown_ini_prints_the_sampled_lines() -> None:
    (unknown, _, _) = latency_checks(LatencyFacts(ADDR, None, None, None, 20))
    assert f"import = {HOOK}" in unknown.fix and "uwsgitune-sample = 20" in unknown.fix
    assert f"log-format = {log_format(None, sampled=True)}" in unknown.fix


def test_a_bad_k_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["doctor", "/nonexistent.sock", "--latency", ADDR, "--sample", "0"]) == 2
    assert main(["doctor", "/nonexistent.sock", "--sample", "20"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 2 and "Traceback" not in err
    assert "--sample 0: give a whole number from 1" in err and "--sample needs --latency" in err


@pytest.mark.uwsgi
def test_doctor_reads_the_k_of_a_sampled_instance(
    uwsgi: Start, capsys: pytest.CaptureFixture[str]
) -> None:
    proc, port = logging_instance(
        uwsgi,
        SAMPLED_TAIL_FORMAT,
        disable_logging=True,
        uwsgitune_sample=2,
        **{"import": str(HOOK)},
    )
    thread = traffic(proc, 6.0)  # beyond both calls' listening on a busy host
    argv = ["doctor", proc.stats, "--ini", str(proc.ini), "--latency", f"127.0.0.1:{port}"]
    main([*argv, "--sample", "2"])
    main([*argv, "--sample", "3"])
    thread.join()
    first, second = capsys.readouterr().out.split("latency-logging", 2)[1:]
    assert "ok   latency-sample: 1 request in 2 logged, at random; at " in first
    assert " req/s, " in first  # the rate read from the stats meanwhile
    assert "ok   latency-lines: " in first and "from the master in" in first
    assert "uwsgitune-sample = 2 in the ini, not 3" in second
    assert "FAIL latency-lines: " in second and "1 in 2, not 1 in 3" in second
