"""Structured log lines, one per state change: `event=disconnect instance=app error="..."`.

`text` is logfmt. Under journald (stderr is the `$JOURNAL_STREAM`), each line starts with a
`<N>` syslog priority, which journald turns into the entry's priority, and no timestamp
(journald adds one); elsewhere a line starts with an ISO timestamp and the level.
`json` writes one object per line for log shippers.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from typing import Any, TextIO

LOGGER = "uwsgitune.daemon"
_PRIORITY = {logging.DEBUG: 7, logging.INFO: 6, logging.WARNING: 4, logging.ERROR: 3}


def on_journal(stream: TextIO, env: dict[str, str] | None = None) -> bool:
    value = (os.environ if env is None else env).get("JOURNAL_STREAM", "")
    dev, _, ino = value.partition(":")
    try:
        st = os.fstat(stream.fileno())
    except (OSError, ValueError, AttributeError):
        return False
    return bool(value) and f"{st.st_dev}" == dev and f"{st.st_ino}" == ino


def _logfmt(value: object) -> str:
    text = f"{value:.6g}" if isinstance(value, float) else str(value)
    if text and all(c.isalnum() or c in "._-:/@+" for c in text):
        return text
    return json.dumps(text, ensure_ascii=False)


class EventFormatter(logging.Formatter):
    def __init__(self, fmt: str = "text", journal: bool = False) -> None:
        super().__init__()
        self.kind = fmt
        self.journal = journal

    def fields(self, record: logging.LogRecord) -> dict[str, Any]:
        extra: dict[str, Any] = getattr(record, "fields", {})
        return {"event": record.getMessage(), **extra}

    def format(self, record: logging.LogRecord) -> str:
        fields = self.fields(record)
        level = record.levelname.lower()
        if self.kind == "json":
            stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            return json.dumps({"ts": f"{stamp}Z", "level": level, **fields}, default=str)
        # a structured field (a mapping: the tuner's raw evidence) is for JSON only; the
        # text line says it in human units already
        body = " ".join(
            f"{k}={_logfmt(v)}"
            for k, v in fields.items()
            if v is not None and not isinstance(v, dict)
        )
        if self.journal:
            return f"<{_PRIORITY.get(record.levelno, 6)}>{body}"
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(record.created))
        return f"{stamp} {level} {body}"


LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warn": logging.WARNING,
    "error": logging.ERROR,
}


def setup(fmt: str = "text", stream: TextIO | None = None, level: str = "info") -> logging.Logger:
    """(Re)configure the daemon's logger; called again on SIGHUP when log_format changes.
    `logfmt` (uwsgi_exporter's name) is `text`; `level` is uwsgi_exporter's --log.level."""
    fmt = "text" if fmt == "logfmt" else fmt
    stream = stream or sys.stderr
    log = logging.getLogger(LOGGER)
    for handler in list(log.handlers):
        log.removeHandler(handler)
    handler = logging.StreamHandler(stream)
    handler.setFormatter(EventFormatter(fmt, journal=fmt == "text" and on_journal(stream)))
    log.addHandler(handler)
    log.setLevel(LEVELS.get(level, logging.INFO))
    log.propagate = False
    return log


def event(name: str, level: int = logging.INFO, /, **fields: Any) -> None:
    """Log one state change. Field order is kept: put `instance` first."""
    logging.getLogger(LOGGER).log(level, name, extra={"fields": fields})
