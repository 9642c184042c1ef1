from __future__ import annotations

import json
import logging
import os
from pathlib import Path

from uwsgitune.daemon.logs import EventFormatter, on_journal


def record(level: int = logging.WARNING) -> logging.LogRecord:
    rec = logging.LogRecord("x", level, __file__, 1, "disconnected", None, None)
    rec.fields = {"instance": "app", "error": 'refused "now"', "down": None, "rt": 0.1234567}
    return rec


def test_text_json_and_journal_forms() -> None:
    text = EventFormatter("text").format(record())
    assert text.endswith(
        ' warning event=disconnected instance=app error="refused \\"now\\"" rt=0.123457'
    )
    journal = EventFormatter("text", journal=True).format(record(logging.ERROR))
    assert journal.startswith("<3>event=disconnected instance=app")
    doc = json.loads(EventFormatter("json").format(record()))
    assert doc["event"] == "disconnected" and doc["level"] == "warning" and doc["down"] is None


def test_journal_detected_by_the_stream_identity(tmp_path: Path) -> None:
    with (tmp_path / "log").open("w") as stream:
        st = os.fstat(stream.fileno())
        assert on_journal(stream, {"JOURNAL_STREAM": f"{st.st_dev}:{st.st_ino}"})
        assert not on_journal(stream, {"JOURNAL_STREAM": f"{st.st_dev}:{st.st_ino + 1}"})
        assert not on_journal(stream, {})


def test_raw_evidence_goes_to_json_only() -> None:
    """The tuner's line reads in human units; its evidence, raw, is for log shippers."""
    rec = logging.LogRecord("x", logging.INFO, __file__, 1, "tuner", None, None)
    rec.fields = {"line": "up 2 → 3 live workers (FIFO)", "evidence": {"mem": 13347840}}
    assert "evidence" not in EventFormatter("text").format(rec)
    assert json.loads(EventFormatter("json").format(rec))["evidence"] == {"mem": 13347840}
