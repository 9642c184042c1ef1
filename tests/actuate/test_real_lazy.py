"""`lazy` against a real uWSGI: its `r` respawns the workers and never reads the ini again,
so an override written for a reload would change nothing. A reload is refused before
anything is written or sent, `tune --mode apply` stops applying at once with one line that
names `lazy-apps = true` and the doctor command, and `doctor` fails its reload check,
wherever `lazy` was set (the ini, the master's environment)."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.actuate.test_real_scale import QUICK, _load
from tests.support.tuned import applying, doc, drive, live, manual, poller, service, wait_for
from tests.uwsgi_harness import loading_app, url
from uwsgitune.actuate.fifo import MasterFifo
from uwsgitune.actuate.override import Override, SetupError
from uwsgitune.actuate.reload import Limits, Reloader, statuses_at
from uwsgitune.cli.main import main
from uwsgitune.core.address import parse_address
from uwsgitune.launch import UwsgiProcess

pytestmark = pytest.mark.uwsgi


def test_a_reload_under_lazy_is_refused_before_anything_is_written(
    uwsgi: Callable[..., UwsgiProcess], tmp_path: Path
) -> None:
    override = tmp_path / "override.ini"
    proc = uwsgi(lazy=True, **manual(override, processes=4, initial=2))
    poll = poller(proc.stats)
    before = poll()
    pids = {w.pid for w in doc(proc).live_workers}
    statuses = statuses_at(parse_address(proc.stats))
    reloader = Reloader(MasterFifo(proc.fifo), override, proc.ini, poll, statuses=statuses)
    with pytest.raises(SetupError, match=r"`lazy` in its ini: .*`lazy-apps = true`"):
        reloader.apply(Override(6, 1, 3), before, Limits(4096), deadline=5)
    assert override.read_text() == "[uwsgi]\n"
    log = proc.log.read_bytes()
    assert b"*** PAUSE" not in log and b"gracefully" not in log  # neither `p` nor `r`
    assert {w.pid for w in doc(proc).live_workers} == pids


def test_tune_stops_at_once_under_lazy_and_names_the_fix(
    uwsgi: Callable[..., UwsgiProcess], tmp_path: Path
) -> None:
    override = tmp_path / "o.ini"
    proc = uwsgi(lazy=True, **manual(override, processes=16, initial=16))
    # A ceiling below the live count asks for a reload whatever the load measures.
    driver = applying(proc, tmp_path, QUICK.model_copy(update={"max_workers": 8}))
    tuner, lines = service(driver), list[str]()
    th, out = _load(url(proc, "/cpu/5"), 24, 20)
    drive(driver, 18, lines)
    th.join()
    errors = [line for line in lines if line.startswith("ERROR")]
    assert len(errors) == 1, "\n".join(lines)
    assert "`lazy` in its ini" in errors[0] and "`lazy-apps = true`" in errors[0]
    assert "uwsgitune doctor" in errors[0] and "STOPPED APPLYING" in errors[0]
    assert tuner.stopped is not None and tuner.moves == {"fifo": 0, "reload": 0, "restart": 0}
    assert override.read_text() == "[uwsgi]\n" and live(proc) == 16
    assert out and out[0].errors == 0


def test_doctor_fails_the_reload_check_wherever_lazy_is_set(
    uwsgi: Callable[..., UwsgiProcess],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    plain = uwsgi(lazy_apps=True, **manual(tmp_path / "a.ini"))
    assert main(["doctor", plain.stats, "--override", str(tmp_path / "a.ini")]) == 0
    assert "ok   reload: a reload reads the ini again" in capsys.readouterr().out
    in_ini = uwsgi(lazy=True, **manual(tmp_path / "b.ini"))
    assert main(["doctor", in_ini.stats, "--override", str(tmp_path / "b.ini")]) == 1
    said = capsys.readouterr().out
    assert "FAIL reload: `lazy` in its ini: a reload never reads the ini again" in said
    assert "add: lazy-apps = true" in said and "not ready: fix reload" in said
    monkeypatch.setenv("UWSGI_LAZY", "1")  # the master inherits it
    in_env = uwsgi(**manual(tmp_path / "c.ini"))
    assert wait_for(lambda: len(doc(in_env).live_workers) == 2)
    assert main(["doctor", in_env.stats, "--override", str(tmp_path / "c.ini")]) == 1
    assert f"FAIL reload: `UWSGI_LAZY` on master {doc(in_env).pid}" in capsys.readouterr().out


def test_a_reload_waits_for_a_worker_still_loading_its_app(
    uwsgi: Callable[..., UwsgiProcess], tmp_path: Path
) -> None:
    """Under lazy-apps a worker the master respawned loads the app before it sets its own
    SIGHUP handler; an `r` then runs the master's handler in it, it lives on and the reload
    waits for the mercy, then kills it (measured: 65 s, "NO MERCY"). The reload waits until
    the worker reads `accepting`, and no worker is killed for want of mercy."""
    app = loading_app(tmp_path / "slow.py", "import time\n\ntime.sleep(3)")
    override = tmp_path / "o.ini"
    proc = uwsgi(
        lazy_apps=True,
        wsgi_file=app,
        worker_reload_mercy=30,
        threads=2,  # no pause before the `r` (a pause would wait for the worker too)
        **manual(override, 4, 2),
    )
    assert wait_for(lambda: all(w.accepting for w in doc(proc).live_workers), 30)
    victim = doc(proc).live_workers[0]
    os.kill(victim.pid, signal.SIGKILL)  # a worker of the instance this test started

    def loading() -> bool:
        return any(
            w.id == victim.id and w.pid not in (0, victim.pid) and not w.accepting
            for w in doc(proc).workers
        )

    assert wait_for(loading, 10)
    poll = poller(proc.stats)
    reloader = Reloader(
        MasterFifo(proc.fifo),
        override,
        proc.ini,
        poll,
        statuses=statuses_at(parse_address(proc.stats)),
    )
    out = reloader.apply(Override(4, 1, 3), poll(), Limits(4096), deadline=45)
    assert out.ok, out.detail
    log = proc.log.read_text()
    assert "NO MERCY" not in log and "too much time to die" not in log, log[-2000:]
    assert reloader.waited > 0 and "for a starting worker" in out.detail, out.detail
