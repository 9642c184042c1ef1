"""Request `vars` carry cookies and auth headers: they leave the process only on opt-in."""

from __future__ import annotations

import re
from typing import Any

# C0, DEL, C1 (terminal escapes) and the bidi overrides that reorder what a terminal shows
_UNPRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str) -> str:
    """Text a peer sent, safe to print: every control character as a visible escape. The one
    sanitiser of peer data in messages (a status line can carry terminal escapes)."""
    return text if text.isprintable() else _UNPRINTABLE.sub(_escape, text)


def strip_request_vars(doc: dict[str, Any]) -> dict[str, Any]:
    """Return the document with every core's `vars` emptied (the input is not changed)."""
    workers = doc.get("workers")
    if not isinstance(workers, list):
        return doc
    out = dict(doc)
    new_workers: list[Any] = []
    for w in workers:
        if isinstance(w, dict) and isinstance(w.get("cores"), list):
            w = dict(w)
            w["cores"] = [
                {**c, "vars": []} if isinstance(c, dict) and "vars" in c else c for c in w["cores"]
            ]
        new_workers.append(w)
    out["workers"] = new_workers
    return out
