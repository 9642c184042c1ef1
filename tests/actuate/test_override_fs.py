"""The override directory is full or read-only (a tiny tmpfs; skipped where mounting is not
permitted): nothing is written, no `r` is sent, the old file stays whole, no temporaries."""

from __future__ import annotations

import subprocess
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support.tuned import live, manual, poller
from uwsgitune.actuate.fifo import MasterFifo
from uwsgitune.actuate.override import Override
from uwsgitune.actuate.reload import Limits, Reloader
from uwsgitune.launch import UwsgiProcess

pytestmark = pytest.mark.uwsgi


@pytest.fixture
def small_fs() -> Iterator[Path]:
    where = Path(tempfile.mkdtemp(prefix="uwt-fs-"))
    if subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=16k", "tmpfs", str(where)], capture_output=True
    ).returncode:
        where.rmdir()
        pytest.skip("mounting a tmpfs is not permitted here")
    try:
        yield where
    finally:
        subprocess.run(["umount", str(where)], check=True)
        where.rmdir()


@pytest.mark.parametrize("fault", ["full", "read-only"])
def test_unwritable_override_is_refused_before_any_reload(
    uwsgi: Callable[..., UwsgiProcess], small_fs: Path, fault: str
) -> None:
    override = small_fs / "o.ini"
    proc = uwsgi(**manual(override, processes=4, initial=1))
    old = override.read_bytes()
    if fault == "full":
        with (small_fs / "filler").open("wb", buffering=0) as f:  # to the last block
            for _ in range(64):
                try:
                    f.write(b"x" * 512)
                except OSError:
                    break
    else:
        subprocess.run(["mount", "-o", "remount,ro", str(small_fs)], check=True)
    poll = poller(proc.stats, interval=0.2)
    before = poll()
    reloader = Reloader(MasterFifo(proc.fifo), override, proc.ini, poll)
    with pytest.raises(OSError) as err:
        reloader.apply(Override(4, 1, 3), before, Limits(4096), deadline=5)
    assert err.value.strerror in ("No space left on device", "Read-only file system")
    assert override.read_bytes() == old
    assert sorted(p.name for p in small_fs.iterdir()) in (["o.ini"], ["filler", "o.ini"])
    after = poll()
    assert after.reloads_seen == before.reloads_seen and live(proc) == 1
    if fault == "read-only":
        subprocess.run(["mount", "-o", "remount,rw", str(small_fs)], check=True)
