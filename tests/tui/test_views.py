"""The pure view functions: Frame(s) in, rows and text out."""

from __future__ import annotations

from pathlib import Path

from tests.tui.frames import disconnected, emperor_frame, frame, history, varying
from uwsgitune.tui.detail import detail_lines, memory_trend
from uwsgitune.tui.sparklines import series
from uwsgitune.tui.summary import emperor_lines, queue_full_events, summary_lines
from uwsgitune.tui.vassals import ini_stats, vassal_stats_address
from uwsgitune.tui.workers import (
    WORKER_COLUMNS,
    Cell,
    core_rows,
    sort_value,
    vassal_rows,
    worker_rows,
)


def plain(lines: list) -> str:
    return "\n".join(t.plain for t in lines)


def test_summary_names_every_number() -> None:
    frames = history(5, queue=16)
    text = plain(summary_lines(frames[-1], frames))
    assert "uWSGI 2.0.31" in text and "master 999" in text and "up 10m" in text
    assert "4/4 live" in text and "2 busy" in text and "2 idle" in text
    assert "46 req/s" in text and "mean 12.5 ms" in text
    assert "127.0.0.1:8000" in text and "16/16 FULL" in text
    assert "/tmp/demo/app.sock unix" in text and "0/100 (kernel)" in text
    assert "full 5x/min" in text and "somaxconn 4096" in text
    assert "instance 0.5 of 2 CPUs" in text
    assert "32.0MiB/wkr" in text and "avail 8.0GiB/16.0GiB" in text


def test_summary_disconnected_shows_retry() -> None:
    f = disconnected(3, "refused")[-1]
    text = plain(summary_lines(f, (f,), retry_in=4.0))
    assert "DISCONNECTED since" in text and "reconnecting in 4s" in text and "refused" in text


def test_queue_full_events_counts_the_last_minute_only() -> None:
    frames = tuple(frame(i, queue=16 if i < 10 else 2) for i in range(100))
    assert queue_full_events(frames) == (0, 0)
    frames = tuple(frame(i, queue=16 if i >= 90 else 2) for i in range(100))
    assert queue_full_events(frames)[0] == 10


def test_worker_rows_keyed_by_slot_with_every_uwsgitop_column() -> None:
    rows = worker_rows(frame(workers=4, cheap=1))
    assert [k for k, _ in rows] == ["w0", "w1", "w2", "w3"]
    labels = [c.label for c in WORKER_COLUMNS]
    for name in (
        "WID",
        "%",
        "PID",
        "REQ",
        "RPS",
        "EXC",
        "SIG",
        "STATUS",
        "AVG½",
        "RSS",
        "VSZ",
        "TX",
        "ReSpwn",
        "HC",
        "RunT",
        "LastSpwn",
        "BUSY%",
        "CPU%",
        "AGE",
    ):
        assert name in labels
    cells = dict(zip([c.key for c in WORKER_COLUMNS], rows[0][1], strict=False))
    assert cells["pid"].text == "1000" and cells["status"].text == "busy"
    assert cells["status"].style == "bold yellow"
    # every worker spawned at the load, 10 minutes before (was 5m00s: a worker spawned at
    # 5 minutes beside `up 10m` with one respawn is no frame the tracker can give)
    assert cells["avg"].text == "12.0ms" and cells["lastspawn"].text == "10m00s"
    cheap = dict(zip([c.key for c in WORKER_COLUMNS], rows[3][1], strict=False))
    assert cheap["status"].text == "cheap" and cheap["pid"].text == "-"


def test_sort_value_sorts_numbers_not_text() -> None:
    cells = [Cell("9.0", 9.0), Cell("10.0", 10.0), Cell("-", -1.0)]
    assert [c.text for c in sorted(cells, key=sort_value)] == ["-", "9.0", "10.0"]
    assert sort_value(Cell("x", "x")) > sort_value(Cell("1", 1.0))


def test_cores_view_shows_method_path_age_never_vars() -> None:
    rows = core_rows(frame(busy=1))
    assert rows[0][0] == "c0.0"
    texts = [c.text for c in rows[0][1]]
    assert "GET /io/0" in texts and "busy" in texts and "2s" in texts


def test_vassal_rows() -> None:
    rows = vassal_rows(emperor_frame())
    assert [k for k, _ in rows] == ["vapp1.ini", "vapp2.ini"]
    assert rows[1][1][2].text == "no" and rows[1][1][4].text == "3"
    assert "2 vassals" in plain(emperor_lines(emperor_frame()))


def test_history_series() -> None:
    frames = disconnected(20)
    by_key = {s.key: s for s in series(frames)}
    assert set(by_key) == {"rps", "rt", "queue", "busy", "cpu"}
    rps = by_key["rps"]
    assert len(rps.values) == 21 and rps.values[-1] == 0.0 and rps.peak == "46.0"
    assert by_key["cpu"].latest == "50"


def test_history_keeps_the_last_five_minutes() -> None:
    assert len(series(history(400))[0].values) == 301


def test_detail_shows_request_respawns_memory_trend() -> None:
    frames = varying(10, lambda i: {"workers": 1, "busy": 1, "rss": (30 + i) << 20})
    text = plain(detail_lines(frames, 0))
    assert "GET /io/0" in text and "respawns 1" in text and "pid 1000" in text
    values, line = memory_trend(frames, 0)
    assert len(values) == 10 and "+30.0%" in line
    assert "gone" in plain(detail_lines(frames, 7))


def test_vassal_stats_from_the_ini(tmp_path: Path) -> None:
    assert ini_stats("[uwsgi]\nstats = /a.sock\n[other]\nstats = /b\n") == "/a.sock"
    proc = tmp_path / "proc" / "42"
    proc.mkdir(parents=True)
    (tmp_path / "v").mkdir()
    (tmp_path / "v" / "app.ini").write_text("[uwsgi]\nstats = s.sock\n")
    (proc / "cwd").symlink_to(tmp_path / "v")
    (proc / "cmdline").write_bytes(b"uwsgi\0--ini\0app.ini\0")
    found = vassal_stats_address(42, "app.ini", proc=tmp_path / "proc")
    assert found == str(tmp_path / "v" / "s.sock")
    assert vassal_stats_address(43, "app.ini", proc=tmp_path / "proc") is None
