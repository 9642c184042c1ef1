"""The override ini uwsgitune owns: render, validate, write atomically, restore.

The user's ini ends with `ini = <override>`, so the keys here win at the next reload; the
user's own file is never edited. Before a file is written, the configuration uWSGI would
read (the user's merged ini with these keys on top) is validated, because a bad ini plus
`r` kills the instance: cheaper >= processes, listen > somaxconn. Writes go through a
temporary file in the same directory (fsync, rename), keeping the previous version as
`<file>.prev` for `restore` (actuate/inifile.py: how files are read and written).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from uwsgitune.actuate.inifile import IniEncodingError as IniEncodingError
from uwsgitune.actuate.inifile import IniError as IniError
from uwsgitune.actuate.inifile import OverrideError as OverrideError
from uwsgitune.actuate.inifile import SetupError as SetupError
from uwsgitune.actuate.inifile import check_override as check_override
from uwsgitune.actuate.inifile import clean_temps as clean_temps
from uwsgitune.actuate.inifile import decode_or_refuse as decode_or_refuse
from uwsgitune.actuate.inifile import override_bytes as override_bytes
from uwsgitune.actuate.inifile import read_ini as read_ini
from uwsgitune.actuate.inifile import restore as restore
from uwsgitune.actuate.inifile import write_atomic as write_atomic
from uwsgitune.core.ini import parse_ini

KNOWN_ALGOS = ("spare", "backlog", "busyness", "manual")
DEFAULT_LISTEN = 100
MAX_THREADS = 256  # per worker; each thread is a core with its own buffers and stack


def load_config(path: Path) -> dict[str, str]:
    """The user's ini as uWSGI reads it: includes expanded in place, the last value wins.

    Relative includes resolve against the directory of `path` (uWSGI resolves them against
    its working directory, which is usually the same).
    """

    def loader(value: str) -> str:
        target = Path(value.split(":", 1)[0]) if ":" in value else Path(value)
        target = target if target.is_absolute() else path.parent / target
        return read_ini(target)

    try:
        return dict(parse_ini(read_ini(path), loader))
    except OSError as exc:
        raise IniError(f"{exc.filename or path}: cannot read ({exc.strerror})") from None


def last_include(text: str) -> str | None:
    """The target of the file's last entry when it is an `ini =` include, else None."""
    pairs = parse_ini(text)
    return pairs[-1][1] if pairs and pairs[-1][0] == "ini" else None


def as_int(config: Mapping[str, str], key: str, default: int | None = None) -> int | None:
    value = config.get(key)
    if value is None:
        return default
    try:
        return int(value)
    except ValueError:
        raise IniError(f"{key} = {value!r} is not a number") from None


def render_keys(keys: Mapping[str, str]) -> str:
    """The override file for `keys`, in a fixed order."""
    body = "".join(f"{k} = {v}\n" for k, v in keys.items())
    return (
        "; Owned by uwsgitune: rewritten on every change, the previous kept as .prev.\n"
        f"[uwsgi]\n{body}"
    )


@dataclass(frozen=True)
class Override:
    processes: int
    cheaper: int
    cheaper_initial: int
    cheaper_algo: str = "manual"
    listen: int | None = None  # carried over from a listen change: a reload keeps the bind
    threads: int | None = None  # threads per worker (sweep --threads); None: the user's

    def render(self) -> str:
        return render_keys(self.keys())

    def keys(self) -> dict[str, str]:
        out = {
            "processes": str(self.processes),
            "cheaper": str(self.cheaper),
            "cheaper-initial": str(self.cheaper_initial),
            "cheaper-algo": self.cheaper_algo,
        }
        if self.listen is not None:
            out["listen"] = str(self.listen)
        if self.threads is not None:
            out["threads"] = str(self.threads)
        return out


def problems(
    config: Mapping[str, str],
    *,
    somaxconn: int | None,
    mem_per_worker: int | None = None,
    memory_budget: int | None = None,
) -> list[str]:
    """What uWSGI would refuse (or die on) in `config`, one phrase each. Empty: safe."""
    out: list[str] = []
    try:
        processes = as_int(config, "processes", 1) or 1
        cheaper = as_int(config, "cheaper", 0) or 0
        initial = as_int(config, "cheaper-initial", cheaper) or cheaper
        listen = as_int(config, "listen", DEFAULT_LISTEN) or DEFAULT_LISTEN
    except IniError as exc:
        return [str(exc)]
    if cheaper < 1:
        out.append(f"cheaper = {cheaper}: cheaper mode needs cheaper >= 1")
    if cheaper >= processes:
        out.append(f"cheaper = {cheaper} >= processes = {processes}: uWSGI dies on reload")
    if not cheaper <= initial <= processes:
        out.append(
            f"cheaper-initial = {initial} outside [cheaper {cheaper}, processes {processes}]"
        )
    if somaxconn is None:
        out.append("somaxconn unknown: cannot prove listen fits")
    elif listen > somaxconn:
        out.append(f"listen = {listen} > somaxconn = {somaxconn}: uWSGI refuses it")
    out += thread_problems(config)
    algo = config.get("cheaper-algo", "spare")
    if algo not in KNOWN_ALGOS:
        out.append(f"cheaper-algo = {algo}: unknown (uWSGI silently falls back to spare)")
    if memory_budget is not None and mem_per_worker and initial * mem_per_worker > memory_budget:
        mib = initial * mem_per_worker // 2**20
        out.append(f"{initial} workers need ~{mib} MiB > budget {memory_budget // 2**20} MiB")
    return out


def thread_problems(config: Mapping[str, str]) -> list[str]:
    """`threads` must be a whole number in 1..MAX_THREADS (0 or text is not a thread count)."""
    value = config.get("threads")
    if value is None:
        return []
    if not value.strip().isdigit() or not 1 <= int(value) <= MAX_THREADS:
        return [f"threads = {value}: use a whole number from 1 to {MAX_THREADS}"]
    return []


def validate(user_config: Mapping[str, str], override: Override, **limits: int | None) -> None:
    """Raise OverrideError unless the user's config with `override` on top is safe."""
    found = problems({**user_config, **override.keys()}, **limits)
    if found:
        raise OverrideError("; ".join(found))


def read_keys(path: Path) -> dict[str, str]:
    """Every key the override file sets ({} when it is missing or unreadable, or is a link
    or a second name, which the next write refuses). Raises IniEncodingError when it is not
    UTF-8 (a rewrite would lose what it holds)."""
    try:
        data = override_bytes(path)
    except (OSError, SetupError):
        return {}
    return {} if data is None else dict(parse_ini(decode_or_refuse(data, path)))


def read_override(path: Path) -> Override | None:
    """The values the current override file sets, or None when it sets none (or is not
    readable as an ini)."""
    try:
        cfg = read_keys(path)
        p, c, listen = as_int(cfg, "processes"), as_int(cfg, "cheaper"), as_int(cfg, "listen")
    except IniError:
        return None
    if p is None or c is None:
        return None
    initial = as_int(cfg, "cheaper-initial", c) or c
    return Override(p, c, initial, cfg.get("cheaper-algo", "manual"), listen)
