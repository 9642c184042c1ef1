"""Real uWSGI instances for tests and bench scripts (wraps `uwsgitune.launch`).

Unix socket paths must stay under 108 bytes, so instances live in short /tmp/uwt-* dirs.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import uwsgitune.demo.webapp as demo_app
from uwsgitune.launch import IniValue, UwsgiProcess, free_port

APP = Path(demo_app.__file__).resolve()


def base_options(workdir: Path, **overrides: IniValue) -> dict[str, IniValue]:
    """A ready-to-tune instance: http on a free port, unix stats, FIFO, memory-report."""
    port = free_port()
    opts: dict[str, IniValue] = {
        "master": True,
        "http-socket": f"127.0.0.1:{port}",
        "wsgi-file": str(APP),
        "processes": 4,
        "stats": str(workdir / "stats.sock"),
        "master-fifo": str(workdir / "fifo"),
        "memory-report": True,
        "disable-logging": True,
    }
    for key, value in overrides.items():
        key = key.replace("_", "-")
        if value is None:
            opts.pop(key, None)
        else:
            opts[key] = value
    return opts


def loading_app(path: Path, load: str) -> str:
    """A WSGI app at `path` that runs `load` (Python source) when imported, as a heavy app
    loads, and answers "ok"; its path, for `wsgi-file`."""
    path.write_text(
        f"{load}\n\n\ndef application(environ, start_response):\n"
        '    start_response("200 OK", [("Content-Type", "text/plain")])\n'
        '    return [b"ok"]\n'
    )
    return str(path)


def http_port(proc: UwsgiProcess) -> int:
    return int(str(proc.options["http-socket"]).rsplit(":", 1)[1])


def url(proc: UwsgiProcess, path: str = "/") -> str:
    return f"http://127.0.0.1:{http_port(proc)}{path}"


# The stop at the end: FIFO `q`, then SIGINT, each given half of this, then SIGKILL. A `q`
# takes about 1 s; a pool caught loading its app or paused can sit out uWSGI's 60 s worker
# mercy, and the default 10 s spent waiting for it is a test's teardown wasted.
STOP_TIMEOUT = 4.0


@contextmanager
def uwsgi_instance(**overrides: IniValue) -> Iterator[UwsgiProcess]:
    workdir = Path(tempfile.mkdtemp(prefix="uwt-", dir="/tmp"))
    proc = UwsgiProcess(workdir, base_options(workdir, **overrides))
    try:
        proc.start()
        yield proc
    finally:
        proc.stop(timeout=STOP_TIMEOUT)
        shutil.rmtree(workdir, ignore_errors=True)


def options_from(mapping: Mapping[str, IniValue]) -> dict[str, IniValue]:
    return dict(mapping)
