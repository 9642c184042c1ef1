"""Request `vars` carry cookies and auth headers: they leave the process only on opt-in."""

from __future__ import annotations

from typing import Any


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
