"""A request path as uwsgitune shows it: its route, not the request.

PATH_INFO can carry secrets: a reset or download token in a segment, a query or a
`;jsessionid=` glued on by a front end. Every path uwsgitune shows (the stuck-request
finding and its evidence, the TUI's workers and detail panes, the daemon's log and `watch`)
comes from `RequestView.path`, which is cut to its route here, once, whatever the opt-ins:

- everything from the first `?`, `#` or `;` is dropped (the query, a fragment, parameters);
- a segment longer than 16 characters, or of 8 or more that mixes letters and digits (a
  token, a hash, a UUID), becomes `…`;
- at most the first 3 segments are kept; a longer path ends in `/…`.

`/reset/9f86d081884c7d659a2feaa0/confirm?token=abc` is shown as `/reset/…/confirm`;
`/io/0` and `/api/v1/users` stay as they are.
"""

from __future__ import annotations

import re

MAX_SEGMENTS = 3
MAX_SEGMENT = 16
HIDDEN = "…"
_CUT = re.compile("[?#;]")
_MIXED = re.compile(r"(?=.*[0-9])(?=.*[A-Za-z]).{8,}")
# Paths seen that are their own route (nothing in them to cut or hide): a busy pool shows
# the same few endpoints at every poll, one per busy core. Bounded; never a path that lost
# anything, so it holds nothing that is not shown anyway.
_SAME: set[str] = set()
_SAME_MAX = 4096


def _segment(text: str) -> str:
    return HIDDEN if len(text) > MAX_SEGMENT or _MIXED.fullmatch(text) else text


def route(path: str) -> str:
    """`path` without its query, its token-like segments and its tail (see above)."""
    if path in _SAME:
        return path
    shown = _route(path)
    if shown == path and len(_SAME) < _SAME_MAX:
        _SAME.add(path)
    return shown


def _route(path: str) -> str:
    path = _CUT.split(path, maxsplit=1)[0]
    inner = path.strip("/")
    segments = inner.split("/") if inner else []
    shown = [_segment(s) for s in segments[:MAX_SEGMENTS]]
    if len(segments) > MAX_SEGMENTS:
        shown.append(HIDDEN)
    lead = "/" if path.startswith("/") else ""
    trail = "/" if path.endswith("/") and inner and len(segments) <= MAX_SEGMENTS else ""
    return lead + "/".join(shown) + trail
