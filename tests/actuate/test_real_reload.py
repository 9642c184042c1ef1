"""The reload path against a real uWSGI: refused overrides are never written, good ones are
verified, a reload that does not verify is rolled back; no request is lost."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.tuned import doc, manual, poller, wait_for
from tests.uwsgi_harness import url
from uwsgitune.actuate.fifo import MasterFifo
from uwsgitune.actuate.override import Override, OverrideError, read_override
from uwsgitune.actuate.reload import Limits, Reloader
from uwsgitune.core.frame import Frame
from uwsgitune.launch import UwsgiProcess
from uwsgitune.loadgen import LoadResult, run_closed

pytestmark = pytest.mark.uwsgi


def _setup(
    uwsgi: Callable[..., UwsgiProcess], tmp_path: Path
) -> tuple[UwsgiProcess, Reloader, Callable[[], Frame]]:
    override = tmp_path / "override.ini"
    proc = uwsgi(**manual(override, processes=4, initial=2))
    poll = poller(proc.stats)
    poll()
    reloader = Reloader(MasterFifo(proc.fifo), override, proc.ini, poll)
    return proc, reloader, poll


def test_refused_override_is_never_written_and_the_instance_survives(
    uwsgi: Callable[..., UwsgiProcess], tmp_path: Path
) -> None:
    proc, reloader, poll = _setup(uwsgi, tmp_path)
    before = poll()
    with pytest.raises(OverrideError, match="cheaper = 4 >= processes = 4"):
        reloader.apply(Override(4, 4, 4), before, Limits(4096), deadline=5)
    with pytest.raises(OverrideError, match=r"listen = 100 > somaxconn = 64"):
        reloader.apply(Override(6, 1, 3), before, Limits(64), deadline=5)
    # The user's own ini gained a listen the kernel refuses: validated too, not reloaded.
    text = proc.ini.read_text()
    proc.ini.write_text(text.replace("[uwsgi]\n", "[uwsgi]\nlisten = 999999\n", 1))
    with pytest.raises(OverrideError, match="listen = 999999"):
        reloader.apply(Override(6, 1, 3), before, Limits(4096), deadline=5)
    proc.ini.write_text(text)
    assert (tmp_path / "override.ini").read_text() == "[uwsgi]\n"
    assert not (tmp_path / "override.ini.prev").exists()
    after = poll()
    assert proc.alive() and after.master_pid == before.master_pid
    assert after.reloads_seen == before.reloads_seen and after.workers_max == 4


def test_good_override_reload_is_verified_under_load_without_loss(
    uwsgi: Callable[..., UwsgiProcess], tmp_path: Path
) -> None:
    proc, reloader, poll = _setup(uwsgi, tmp_path)
    before = poll()
    result: list[LoadResult] = []
    load = threading.Thread(target=lambda: result.append(run_closed(url(proc, "/io/20"), 4, 6.0)))
    load.start()
    out = reloader.apply(Override(6, 1, 3), before, Limits(4096), deadline=15)
    load.join()
    assert out.ok, out.detail
    assert out.frame is not None and out.frame.master_pid == before.master_pid
    d = doc(proc)
    assert len(d.workers) == 6 and len(d.live_workers) == 3
    assert read_override(tmp_path / "override.ini") == Override(6, 1, 3)
    assert (tmp_path / "override.ini.prev").read_text() == "[uwsgi]\n"
    assert result[0].errors == 0 and result[0].ok > 50


def test_unverified_reload_is_rolled_back(
    uwsgi: Callable[..., UwsgiProcess], tmp_path: Path
) -> None:
    proc, reloader, poll = _setup(uwsgi, tmp_path)
    before = poll()
    reloader.poll = lambda: before  # the stats never show the new values
    out = reloader.apply(Override(6, 1, 3), before, Limits(4096), deadline=1.5)
    assert not out.ok and out.restored and "restored and reloaded" in out.detail
    assert (tmp_path / "override.ini").read_text() == "[uwsgi]\n"

    def back() -> bool:
        d = doc(proc)
        return len(d.workers) == 4 and len(d.live_workers) == 2

    assert wait_for(back) and proc.alive()
