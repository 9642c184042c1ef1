"""The audit log is written from typed records and read back as typed records; its JSON keys
are the ones it always had, so a log written before the records were typed still resumes."""

from __future__ import annotations

import json
from pathlib import Path

from uwsgitune.actuate.audit import AuditLog, last_listen, resume
from uwsgitune.tuner import TunerState
from uwsgitune.tuner.result import AuditRecord

# Lines as the untyped writer wrote them (json.dumps(record, sort_keys=True)).
OLD = [
    {
        "t": 1000.0,
        "instance": "a",
        "mode": "apply",
        "event": "change",
        "action": "up",
        "via": "fifo",
        "before": 2,
        "after": 3,
        "code": "saturated",
        "reason": "all busy",
        "evidence": {"live": 2, "busy": 1.0, "estimate": None},
        "result": "sent",
        "detail": "wrote '+' to /run/app.fifo",
        "moves": {"fifo": 1, "reload": 0, "restart": 0},
    },
    {
        "t": 1001.5,
        "instance": "a",
        "mode": "apply",
        "event": "verify",
        "result": "verified",
        "after": 3,
    },
    {
        "t": 1100,
        "instance": "a",
        "mode": "apply",
        "event": "change",
        "action": "down",
        "via": "reload",
        "before": 3,
        "after": 2,
        "code": "idle",
        "reason": "idle",
        "evidence": {},
        "result": "failed",
        "detail": "not back",
        "moves": {"fifo": 1, "reload": 1, "restart": 0},
        "override": {
            "processes": "4",
            "cheaper": "1",
            "cheaper-initial": "2",
            "cheaper-algo": "manual",
        },
    },
    {"t": 1100.1, "instance": "a", "mode": "apply", "event": "stop", "reason": "reload failed: x"},
    {
        "t": 1200.0,
        "instance": "a",
        "mode": "apply",
        "event": "resume",
        "reason": "applying resumed by the user",
    },
    {
        "t": 1300.0,
        "instance": "a",
        "mode": "apply",
        "event": "change",
        "action": "listen",
        "via": "restart",
        "before": None,
        "after": 512,
        "code": "listen_queue.bursts",
        "reason": "bursts",
        "result": "verified",
        "detail": "restarted with listen 512 in 3.0s",
    },
]


def _old_log(path: Path) -> None:
    lines = [json.dumps(r, sort_keys=True) for r in OLD]
    lines += ["[1, 2]", '{"event": "other", "t": 1.0}', '{"event": "stop"}', '{"torn": ']
    path.write_text("\n".join(lines))


def test_an_old_log_loads_as_typed_records_with_the_same_keys(tmp_path: Path) -> None:
    _old_log(tmp_path / "audit.jsonl")
    records = list(AuditLog(tmp_path / "audit.jsonl").records())
    assert all(isinstance(r, AuditRecord) for r in records)
    assert [r.to_json() for r in records] == OLD  # foreign, keyless and torn lines skipped
    assert records[0].evidence == {"live": 2, "busy": 1.0, "estimate": None}
    assert records[2].override is not None and records[2].override["processes"] == "4"
    assert records[5].before is None and records[5].after == 512


def test_a_typed_record_writes_the_line_the_untyped_writer_wrote(tmp_path: Path) -> None:
    log = AuditLog(tmp_path / "audit.jsonl")
    for raw in OLD:
        rec = AuditRecord.from_json(raw)
        assert rec is not None
        log.append(rec)
    lines = log.path.read_text().splitlines()
    assert lines == [json.dumps(r, sort_keys=True) for r in OLD]
    assert '"event": "change"' in lines[0]  # what the end-to-end tests look for


def test_an_old_log_resumes(tmp_path: Path) -> None:
    _old_log(tmp_path / "audit.jsonl")
    records = list(AuditLog(tmp_path / "audit.jsonl").records("a"))
    st, stopped = resume(records, TunerState(), now_wall=1400.0, now_mono=500.0)
    assert stopped is None  # stopped at 1100.1, resumed at 1200
    assert st.changes == (100.0, 400.0)  # the sent + and the verified listen restart
    assert st.last_reload == 400.0 and st.last_change == 400.0
    assert last_listen(records, 1400.0, 500.0) == 400.0
    st, stopped = resume(records[:4], TunerState(), 1400.0, 500.0)
    assert stopped == "reload failed: x"
    assert not list(AuditLog(tmp_path / "audit.jsonl").records("b"))
