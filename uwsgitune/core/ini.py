"""A small, pure reader of uWSGI ini files: enough to know the settings the rules look at.

uWSGI reads the `[uwsgi]` section; keys may repeat (each a value, the last one wins for scalar
options); `ini = other.ini` includes another file at that point, so its values override the
earlier ones and are overridden by later ones. Text comes in; includes are resolved by a
caller-supplied `loader(path) -> text`, so this module touches no file.
"""

from __future__ import annotations

from collections.abc import Callable

Loader = Callable[[str], str]
MAX_DEPTH = 8
_TRUE = {"1", "true", "yes", "on", "y", "t"}


class NotUtf8(ValueError):
    """An ini that is not UTF-8; the message names the file, the byte and the fix."""


def decode_ini(data: bytes, name: str) -> str:
    """The text of the ini `name` (its bytes `data`). uWSGI takes any bytes, but uwsgitune
    reads and rewrites these files as UTF-8: anything else is refused in one line."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        byte = data[exc.start]
        raise NotUtf8(
            f"{name}: not UTF-8 (byte 0x{byte:02x} at offset {exc.start}); save it as UTF-8"
        ) from None


def parse_ini(
    text: str, loader: Loader | None = None, section: str = "uwsgi", _depth: int = 0
) -> list[tuple[str, str]]:
    """The (key, value) pairs of `section` in order, with `ini =` includes expanded."""
    pairs: list[tuple[str, str]] = []
    current = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith((";", "#")):
            continue
        if line.startswith("[") and line.endswith("]"):
            current = line[1:-1].strip()
            continue
        if current != section or "=" not in line:
            continue
        key, _, value = line.partition("=")
        key, value = key.strip().replace("_", "-"), value.strip()
        if key == "ini" and loader is not None and _depth < MAX_DEPTH:
            pairs.extend(parse_ini(loader(value), loader, section, _depth + 1))
        else:
            pairs.append((key, value))
    return pairs


def _last(pairs: list[tuple[str, str]], *keys: str) -> str | None:
    found = None
    for key, value in pairs:
        if key in keys:
            found = value
    return found


def _int(value: str | None) -> int | None:
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        return None


def _bool(value: str | None) -> bool | None:
    if value is None:
        return None
    return value.lower() in _TRUE or value == ""


def read_ini_facts(text: str, loader: Loader | None = None) -> dict[str, int | str | bool | None]:
    """The facts `ConfigFacts` holds, with uWSGI's defaults for keys the ini leaves out.

    A parsed file is a known configuration: a missing `cheaper` means cheaper mode is off,
    a missing `listen` means 100. Values that do not parse stay None (unknown).
    """
    pairs = parse_ini(text, loader)
    cheaper = _int(_last(pairs, "cheaper")) if _last(pairs, "cheaper") is not None else 0
    algo = _last(pairs, "cheaper-algo")
    stats_http = _bool(_last(pairs, "stats-http"))
    return {
        "processes": _int(_last(pairs, "processes", "workers") or "1"),
        "cheaper": cheaper,
        "cheaper_algo": algo if algo is not None else ("spare" if cheaper else None),
        "listen": _int(_last(pairs, "listen") or "100"),
        "threads": _int(_last(pairs, "threads") or "1"),
        "memory_report": bool(_bool(_last(pairs, "memory-report"))),
        "offload_threads": _int(_last(pairs, "offload-threads") or "0"),
        "stats_http": bool(stats_http),
    }
