"""Repair request data that makes a stats document invalid JSON. Pure.

uWSGI's `escape_json` escapes only `"`, `\\`, tab, LF and CR in the in-flight requests'
`vars` (uwsgi-facts.md). A path like `/x%01y` or a raw 0x80-0xff byte in a header puts a
control character or invalid UTF-8 inside a string, and the whole document is rejected.
Any client of the app can send such a request.

`repair_request_vars` rewrites only the strings inside `"vars": [...]` arrays: invalid
UTF-8 becomes U+FFFD and control characters their `\\u00XX` escapes. Nothing outside those
arrays is touched, so a document that is broken elsewhere stays broken (and an error). It
runs only after the fast parse failed: a valid document never pays for it.
"""

from __future__ import annotations

import re

_KEY = b'"vars"'
_SPACE = re.compile(rb"[ \t\r\n]*")
_STRING = re.compile(rb'"((?:[^"\\]|\\.)*)"', re.DOTALL)
_CONTROL = re.compile("[\x00-\x1f]")


def _escape(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def _clean(body: bytes) -> bytes:
    """A JSON string body made valid: U+FFFD for invalid UTF-8, control characters escaped."""
    text = body.decode("utf-8", "replace")
    return _CONTROL.sub(_escape, text).encode()


def _skip(raw: bytes, pos: int) -> int:
    match = _SPACE.match(raw, pos)
    return match.end() if match else pos


def _array(raw: bytes, start: int, out: list[bytes]) -> tuple[int, int] | None:
    """Repair the array of strings at `start` (just after `[`) into `out`: (end, repairs),
    or None when it is not a well-formed array of strings (left as it was)."""
    pos, repairs = start, 0
    parts: list[bytes] = []
    while True:
        pos = _skip(raw, pos)
        if raw[pos : pos + 1] == b"]":
            out.extend(parts)
            return pos, repairs
        match = _STRING.match(raw, pos)
        if match is None:
            return None
        body = match.group(1)
        clean = _clean(body)
        repairs += clean != body
        parts += [raw[pos : match.start(1)], clean, b'"']
        pos = _skip(raw, match.end())
        if raw[pos : pos + 1] == b",":
            parts.append(raw[match.end() : pos + 1])
            pos += 1
        else:
            parts.append(raw[match.end() : pos])


def repair_request_vars(raw: bytes) -> tuple[bytes, int]:
    """`raw` with every string of every `vars` array valid JSON; and how many were changed."""
    out: list[bytes] = []
    done, repairs, pos = 0, 0, raw.find(_KEY)
    while pos >= 0:
        colon = _skip(raw, pos + len(_KEY))
        bracket = _skip(raw, colon + 1) if raw[colon : colon + 1] == b":" else -1
        if bracket >= 0 and raw[bracket : bracket + 1] == b"[":
            out.append(raw[done : bracket + 1])
            result = _array(raw, bracket + 1, out)
            if result is None:
                out.pop()
            else:
                done, repairs = result[0], repairs + result[1]
        pos = raw.find(_KEY, max(pos + 1, done))
    out.append(raw[done:])
    return b"".join(out), repairs
