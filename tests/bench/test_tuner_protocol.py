"""The tuner benchmark's protocol maths and the report's refusals (bench/tuner_protocol.py,
bench/tuner_report.py, bench/PROTOCOL.md v1), on small synthetic runs: the report is pure."""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.util
import math
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"


def _module(name: str) -> ModuleType:
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


proto = _module("tuner_protocol")
report = _module("tuner_report")


def _tuner_bench() -> ModuleType:
    _thirdparty()  # bench/ on the path, as when it runs
    return _module("tuner_bench")


def _thirdparty() -> ModuleType:
    """bench/thirdparty_scenarios.py, as the bench loads it (bench/ on the path)."""
    if str(BENCH) not in sys.path:
        sys.path.insert(0, str(BENCH))
    return _module("thirdparty_scenarios")


STATIONARY = {
    "phases": [{"path": "/cpu/3", "clients": 64, "rate": None, "seconds": 150.0}],
    "grid": [2, 4],
    "window": [90.0, 150.0],
    "threads": 1,
    "recover": [],
}


def _hist(ms: float, n: int) -> dict[str, int]:
    return {str(round(math.log(ms) / math.log(proto.HIST_BASE))): n} if n else {}


def _spans(d: dict[str, Any]) -> list[tuple[float, float]]:
    ends = proto.phase_ends(d["phases"])
    return list(zip([0.0, *ends[:-1]], ends, strict=True))


def run(
    setup: str,
    live: list[int] | None = None,
    rps: int | list[int] = 100,
    ms: float | list[float] = 10.0,
    rnd: int = 1,
    d: dict[str, Any] | None = None,
    **stamp: Any,
) -> dict[str, Any]:
    """A run of `setup`: one poll a second at the given counts (held at the last one to the
    end), `rps` requests a second, each taking `ms` (per second, or all alike)."""
    d = d or STATIONARY
    secs = int(sum(p["seconds"] for p in d["phases"]))
    per = rps if isinstance(rps, list) else [rps] * secs
    lat = ms if isinstance(ms, list) else [ms] * secs
    counts = live or [int(setup.split("-")[1])]
    counts = counts + [counts[-1]] * (secs - len(counts))
    start = None if setup.startswith("static-") else int(setup.rsplit("-", 1)[1])
    out = {
        "protocol": proto.VERSION,
        "smoke": False,
        "commit": "c0ffee" * 6 + "c0ff",
        "dirty": False,
        "code_hash": "a" * 64,
        "package_hash": "p" * 64,
        "bench_hash": "q" * 64,
        "scenario": "cpu",
        "scenario_def": d,
        "sitting": "cpu@t1",
        "round": rnd,
        "rounds": 3,
        "setups": [],
        "start": start,
        "setup": setup,
        "live": [[float(t), n] for t, n in enumerate(counts)],
        "per_second": per,
        "latency_hist": [_hist(m, n) for m, n in zip(lat, per, strict=True)],
        "phase_rps": [sum(per[int(a) : int(b)]) / (b - a) for a, b in _spans(d)],
        "failed": 0,
        "reloads": 0,
        "fifo_moves": 0,
        "worker_seconds": 0.0,
        "wall": [0.0, 1.0],
        "loadavg": [[0.5, 0.5, 0.5], [0.6, 0.6, 0.6]],
    }
    out.update(stamp)
    return out


def sitting(rows: dict[str, dict[str, Any]], rounds: int = 3) -> list[dict[str, Any]]:
    """Every setup of `rows` (setup: run() keywords) in every round."""
    setups = list(rows)
    out = []
    for k in range(1, rounds + 1):
        for s in setups:
            out.append(run(s, rnd=k, rounds=rounds, setups=setups, **rows[s]))
    return out


# --- settled and converged ----------------------------------------------------------------


def test_settled_is_the_first_poll_of_a_30s_hold_within_10_percent_of_its_median() -> None:
    ends = [150.0]
    live = [[t, 64 if t < 20 else 10] for t in range(150)]
    # 64 for 20 s is not a 30 s hold: the first hold starts at 20
    assert proto.settle_time(live, ends) == (20.0, 10.0)
    # 10 <-> 11 is within 10% of 10; 4 <-> 5 is not within 10% of 4 or 5
    wobble = [[t, 10 + t % 2] for t in range(150)]
    assert proto.settle_time(wobble, ends) is not None
    small = [[t, 4 + t % 2] for t in range(150)]
    assert proto.settle_time(small, ends) is None


def test_a_hold_must_fit_in_its_phase_and_in_the_run() -> None:
    # phases of 10 s: no 30 s hold fits, whatever the counts do
    assert proto.settle_time([[t, 8] for t in range(60)], [10, 20, 30, 40, 50, 60]) is None
    # a count that stops moving 25 s before the end has not held 30 s
    live = [[t, 8 + 8 * (t % 2)] if t < 125 else [t, 8] for t in range(150)]
    assert proto.settle_time(live, [150.0]) is None


def test_converged_is_settled_within_the_live_limit() -> None:
    ends = [150.0]
    # holds 14 from 5 s (settled, above a limit of 6), then 4 from 50 s
    live = [[t, 64 if t < 5 else (14 if t < 50 else 4)] for t in range(150)]
    assert proto.settle_time(live, ends) == (5.0, 14.0)
    assert proto.converged_time(live, ends, 6.0) == 50.0
    assert proto.converged_time(live, ends, 3.0) is None


# --- the window ---------------------------------------------------------------------------


def test_window_figures_count_the_window_alone() -> None:
    per = [1000] * 90 + [100] * 60
    assert proto.window_rps(per, (90, 150)) == 100
    live = [[0.0, 64], [89.5, 64], [100.0, 4]]  # 64 until 100 s: 10 of 60 s in the window
    assert proto.window_live(live, (90, 150)) == pytest.approx((10 * 64 + 50 * 4) / 60)


def test_every_row_of_a_scenario_is_judged_in_one_window() -> None:
    """tuner-64 that comes down only at 100 s is charged its 64 workers from 90 s: the
    window does not start at its own convergence."""
    slow = [64] * 100 + [4]
    j = report.judge(
        "cpu",
        sitting(
            {
                "static-2": {},
                "static-4": {},
                "tuner-64": {"live": slow},
                "spare-2": {"live": [2] * 10 + [30]},
            }
        ),
    )
    assert j.rows["tuner-64"].live == pytest.approx((10 * 64 + 50 * 4) / 60)
    assert j.rows["spare-2"].live == 30
    live_mark = report.marks(j, "tuner-64")[2]
    assert live_mark.ok is False  # 14 > the limit of 4


# --- p99: the whole window, the transient beside it ---------------------------------------

PHASED = {
    "phases": [
        {"path": "/x", "clients": 16, "rate": None, "seconds": 50.0},
        {"path": "/x", "clients": 32, "rate": None, "seconds": 50.0},
        {"path": "/x", "clients": 16, "rate": None, "seconds": 50.0},
    ],
    "grid": [16, 32],
    "window": [15.0, 150.0],
    "threads": 1,
    "recover": [{"phase": 1, "within": 30.0, "label": "2x step"}],
}


def test_the_transient_is_its_own_column_and_stays_in_the_full_p99() -> None:
    assert proto.transient_seconds(PHASED["phases"], PHASED["window"]) == [
        *range(50, 55),
        *range(100, 105),
    ]
    assert proto.transient_seconds(STATIONARY["phases"], STATIONARY["window"]) == []
    # 10 ms a request, 500 ms in the 5 s after each change: 10 of 135 s, 7% of requests
    slow = [500.0 if 50 <= s < 55 or 100 <= s < 105 else 10.0 for s in range(150)]
    j = report.judge(
        "step",
        sitting(
            {
                "static-16": {"d": PHASED},
                "static-32": {"d": PHASED},
                "tuner-2": {"d": PHASED, "ms": slow, "live": [16]},
            }
        ),
    )
    t = j.rows["tuner-2"]
    assert t.p99 == pytest.approx(500, rel=0.03)  # never cut out
    assert t.p99_transient == pytest.approx(500, rel=0.03)
    assert j.best.p99 == pytest.approx(10, rel=0.03)
    p99_mark = report.marks(j, "tuner-2")[1]
    assert p99_mark.ok is False and "transient" in p99_mark.text


def test_with_no_phase_as_long_as_the_hold_convergence_is_not_judged() -> None:
    bursty = {
        **STATIONARY,
        "phases": [
            {"path": "/x", "clients": c, "rate": None, "seconds": 10.0} for c in (48, 4) * 3
        ],
        "window": [15.0, 60.0],
    }
    j = report.judge(
        "bursty",
        sitting({"static-2": {"d": bursty}, "static-4": {"d": bursty}, "tuner-64": {"d": bursty}}),
    )
    conv = [m for m in report.marks(j, "tuner-64") if "converged" in m.text]
    assert [m.ok for m in conv] == [None]


# --- peers --------------------------------------------------------------------------------


def test_every_algorithm_at_97_percent_is_a_peer_whatever_its_p99() -> None:
    algos = [
        proto.Peer("backlog-2", 97.0, 15.0, 3.0),  # 97%, p99 3x: a peer
        proto.Peer("spare-2", 96.9, 10.0, 1.0),  # 96.9%: not one
    ]
    assert [p.setup for p in proto.peers(100.0, algos)] == ["backlog-2"]


def test_a_peer_with_a_worse_p99_still_beats_the_tuner_on_workers() -> None:
    """The rule of 2026-11-25 (no peer above 1.2x the best's p99) is gone: backlog at
    99% of the tuner's throughput on fewer workers, at 3x the p99, makes the target
    missed, its p99 printed beside it."""
    j = report.judge(
        "cpu",
        sitting(
            {
                "static-2": {},
                "static-4": {},
                "tuner-2": {"live": [4]},
                "backlog-2": {"live": [3], "rps": 99, "ms": 30.0},
                "spare-64": {"live": [64], "rps": 90},
            }
        ),
    )
    ws = report.marks(j, "tuner-2")[4]
    assert ws.ok is False
    assert "backlog-2 3.0 live, p99 3." in ws.text  # 3x, within the 5% buckets
    assert "1 of 2 peers" in ws.text


def test_no_peer_is_said_and_not_met() -> None:
    j = report.judge(
        "cpu",
        sitting({"static-2": {}, "static-4": {}, "tuner-2": {"live": [2]}, "spare-2": {"rps": 50}}),
    )
    ws = report.marks(j, "tuner-2")[4]
    assert ws.ok is None and "no peer" in ws.text
    assert "all met" not in report.verdict_cell(j, "tuner-2")


# --- refusals -----------------------------------------------------------------------------


def test_the_report_refuses_two_protocol_versions() -> None:
    runs = [run("static-2"), run("static-4", protocol=proto.VERSION + 1)]
    with pytest.raises(proto.ProtocolError, match="protocol version"):
        proto.check_combinable(runs)


@pytest.mark.parametrize("key", ["code_hash", "package_hash", "bench_hash"])
def test_the_report_refuses_two_code_hashes(key: str) -> None:
    runs = [run("static-2"), run("static-4", **{key: "b" * 64})]
    with pytest.raises(proto.ProtocolError, match="2 code hashes of the"):
        proto.check_combinable(runs)


def test_the_report_refuses_smoke_beside_protocol_and_two_definitions() -> None:
    with pytest.raises(proto.ProtocolError, match="smoke"):
        proto.check_combinable([run("static-2"), run("static-4", smoke=True)])
    other = {**STATIONARY, "window": [60.0, 150.0]}
    with pytest.raises(proto.ProtocolError, match="two definitions"):
        proto.check_combinable([run("static-2"), run("static-4", scenario_def=other)])
    proto.check_combinable([run("static-2"), run("static-4")])  # one of each: fine


def test_the_report_exits_with_one_line_on_mixed_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    raw = tmp_path / "runs.jsonl"
    raw.write_text(
        "\n".join(json.dumps(r) for r in [run("static-2"), run("static-4", code_hash="b" * 64)])
    )
    assert report.main([str(raw), "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("tuner_report: ") and "\n" not in err
    assert not (tmp_path / "tuner64.md").exists()


def test_the_runs_from_before_the_protocol_are_refused_by_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    old = tmp_path / "tuner64.json"
    old.write_text(json.dumps({"cpu": {"runs": {"static-2": {}}}}, indent=1))
    assert report.main([str(old)]) == 2
    assert "before protocol v1" in capsys.readouterr().err


def test_two_complete_sittings_are_refused_and_an_incomplete_one_is_named() -> None:
    one = sitting({"static-2": {}, "static-4": {}})
    two = [{**r, "sitting": "cpu@t2"} for r in one]
    with pytest.raises(proto.ProtocolError, match="2 complete sittings"):
        report.judge("cpu", one + two)
    j = report.judge("cpu", one + two[:2])
    assert j.complete and j.left_out == ["sitting cpu@t2: 2 runs, incomplete, not used"]


def test_the_page_carries_the_version_commit_and_hash(tmp_path: Path) -> None:
    import json

    runs = sitting({"static-2": {}, "static-4": {}, "tuner-64": {"live": [64] * 5 + [2]}})
    raw = tmp_path / "tuner64.jsonl"
    raw.write_text("\n".join(json.dumps(r) for r in runs) + "\n")
    assert report.main([str(raw)]) == 0
    page = (tmp_path / "tuner64.md").read_text()
    assert f"**version {proto.VERSION}**" in page
    assert "c0ffeec0ff" in page and "a" * 64 in page
    assert "| tuner-64 | 3 |" in page  # its three rounds
    assert "| mixed | not run | not run |" in page
    assert (tmp_path / "tuner64-cpu.svg").read_text().count("<circle") == 3  # settled, x3


# --- the code hash ------------------------------------------------------------------------


def test_the_code_hash_covers_paths_and_contents_but_not_caches(tmp_path: Path) -> None:
    (tmp_path / "p" / "q").mkdir(parents=True)
    (tmp_path / "p" / "a.py").write_text("x = 1\n")
    (tmp_path / "p" / "q" / "b.py").write_text("y = 2\n")
    h = proto.code_hash(tmp_path, ["p"])
    (tmp_path / "p" / "__pycache__").mkdir()
    (tmp_path / "p" / "__pycache__" / "a.cpython-311.pyc").write_bytes(b"\0")
    assert proto.code_hash(tmp_path, ["p"]) == h
    (tmp_path / "p" / "a.py").write_text("x = 2\n")
    changed = proto.code_hash(tmp_path, ["p"])
    assert changed != h
    (tmp_path / "p" / "a.py").rename(tmp_path / "p" / "c.py")
    assert proto.code_hash(tmp_path, ["p"]) != changed  # a rename is a change
    # a file named alone counts; one that does not exist is absent, not an error
    alone = proto.code_hash(tmp_path, ["p/c.py", "p/none.py"])
    assert alone != proto.code_hash(tmp_path, ["p/none.py"])
    (tmp_path / "p" / "c.py").write_text("x = 3\n")
    assert proto.code_hash(tmp_path, ["p/c.py", "p/none.py"]) != alone


# --- the order of rounds ------------------------------------------------------------------


@pytest.mark.parametrize("n", [5, 6, 17])
def test_three_rounds_in_turn_give_every_setup_the_same_mean_slot(n: int) -> None:
    setups = [f"s{i}" for i in range(n)]
    rounds = proto.round_order(setups, 3)
    assert len(rounds) == 3 and all(sorted(r) == sorted(setups) for r in rounds)
    slot = {s: sum(k * n + r.index(s) for k, r in enumerate(rounds)) for s in setups}
    spread = max(slot.values()) - min(slot.values())
    assert spread == 0 if n % 2 else spread <= 1


def test_two_rounds_alternate() -> None:
    assert proto.round_order(["a", "b", "c"], 2) == [["a", "b", "c"], ["c", "b", "a"]]


def test_recovery_is_when_5_seconds_first_reach_95_percent_of_the_best() -> None:
    per = [50] * 50 + [100] * 10 + [190] * 90
    assert proto.recovery(per, 50, 200.0, 30) == 10.0
    assert proto.recovery(per, 50, 201.0, 30) is None  # 190 < 95% of 201


# --- the text and the code agree ----------------------------------------------------------


def test_protocol_md_and_the_code_define_the_same_scenarios_and_setups() -> None:
    text = (BENCH / "PROTOCOL.md").read_text()
    assert f"# The tuner benchmark's protocol, version {proto.VERSION}" in text
    rows = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 5 and cells[2].endswith(" s") and cells[4].endswith(" s"):
            rows[cells[0]] = cells
    assert list(rows) == list(proto.SCENARIO_NAMES)
    plugged = _thirdparty().SCENARIOS  # the third-party app's, from their own module
    assert set(proto.SCENARIO_NAMES) - set(proto.SCENARIOS) == set(plugged)
    for name, sc in {**proto.SCENARIOS, **plugged}.items():
        _, _, length, grid, window = rows[name]
        assert length == f"{sc.seconds:g} s", name
        assert grid == ", ".join(str(n) for n in sc.grid), name
        assert window == f"{sc.window[0]:g}-{sc.window[1]:g} s", name
    setups = proto.setups_of(proto.SCENARIOS["cpu"])
    assert len(setups) == 17 and "17 setups per scenario" in text
    for algo in proto.ALGOS:
        assert f"`{algo}" in text and {f"{algo}-64", f"{algo}-2"} <= set(setups)
    assert {"tuner-64", "tuner-2"} <= set(setups) and proto.STARTS == (64, 2)


def test_every_algorithm_setting_is_an_option_uwsgi_knows() -> None:
    """uWSGI ignores an ini key it does not know: a misspelt setting would run the
    algorithm at its default and call it the docs' settings (the bench ran `busyness-min`
    for `cheaper-busyness-min` until protocol v1)."""
    import shutil
    import subprocess

    local = Path(sys.executable).with_name("uwsgi")
    binary = str(local) if local.exists() else shutil.which("uwsgi")
    if binary is None:
        pytest.skip("no uwsgi binary: pip install uwsgi")
    help_text = subprocess.run(
        [binary, "--help"], capture_output=True, text=True, timeout=30, check=False
    ).stdout
    known = {word[2:] for word in help_text.split() if word.startswith("--")}
    for algo, settings in proto.ALGOS.items():
        for key in settings:
            assert key in known, f"{algo}: {key!r} is not a uWSGI option"


def test_the_sittings_arithmetic_in_protocol_md_is_the_code_s() -> None:
    text = (BENCH / "PROTOCOL.md").read_text().replace("\n", " ")
    long = proto.sitting_seconds(proto.SCENARIOS["cpu"])
    bursty = proto.sitting_seconds(proto.SCENARIOS["bursty"])
    assert f"{long:,.0f} s = 2 h 10 min" in text and f"{bursty:,.0f} s = 54 min" in text
    every = {**proto.SCENARIOS, **_thirdparty().SCENARIOS}
    assert list(every) == list(proto.SCENARIO_NAMES)
    sizes = [proto.sitting_seconds(sc) for sc in every.values()]
    assert f"{sum(sizes):,.0f} s = 22.6 h" in text
    assert all(s < proto.SITTING_MAX_S for s in sizes)  # one scenario fits a sitting


def test_a_run_that_answered_anything_but_200_failed() -> None:
    """The load counts a 3xx as served: a third-party app that lost its session answers
    fast 302s to its login page, and such a run must not pass as fast."""
    ok = run("static-2")
    assert report.failed(ok) == 0
    assert report.failed({**ok, "statuses": {"200": 900}}) == 0
    assert report.failed({**ok, "statuses": {"200": 900, "302": 40, "500": 2}}) == 42
    assert report.failed({**ok, "failed": 3, "statuses": {"302": 1}}) == 4


def test_the_third_party_scenarios_start_their_service_and_send_its_headers() -> None:
    """Each Django scenario names the database service the bench enters once a sitting,
    leaves the bench's own app out, and is refused in one line where it cannot run."""
    bench = _tuner_bench()
    for name, sc in _thirdparty().SCENARIOS.items():
        assert sc.service == "thirdparty:database", name
        assert sc.options == {"wsgi-file": None}, name
        opts = bench._options("static-2", Path("/tmp/x.ini"), sc, {"wsgi-file": "/app.py"})
        assert opts["wsgi-file"] == "/app.py" and opts["processes"] == 2

    @dataclasses.dataclass(frozen=True)
    class Db:
        uwsgi: dict[str, Any]
        headers: tuple[tuple[str, str], ...]

    db = Db({"wsgi-file": "/a.py", "env": ["K=v"]}, (("Cookie", "sessionid=s3cret"),))

    @contextlib.contextmanager
    def service() -> Any:
        yield db

    mod = ModuleType("fake_service")
    mod.service = service  # type: ignore[attr-defined]
    why = "django is not installed: pip install -e '.[bench]'"
    mod.missing = lambda: why  # type: ignore[attr-defined]
    sys.modules["fake_service"] = mod
    try:
        sc = proto.Scenario((proto.Phase("/", 1, None, 1.0),), (2,), (0.0, 1.0))
        sc = dataclasses.replace(sc, service="fake_service:service")
        with bench._service(sc) as got:
            assert got.options == db.uwsgi and got.headers == db.headers
        assert bench._service_missing(sc) == why
    finally:
        del sys.modules["fake_service"]
