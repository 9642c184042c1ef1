"""The reload deadline follows uWSGI's worker-reload-mercy: a reload waiting for slow
in-flight requests is not called failed at 20 s (nor at a shorter setting)."""

from __future__ import annotations

import threading
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.tuned import manual, service, tuned, wait_for
from tests.uwsgi_harness import url
from uwsgitune.actuate.override import read_override
from uwsgitune.actuate.reload import MARGIN, mercy, reload_deadline, reload_deadline_for
from uwsgitune.core.frame import Frame
from uwsgitune.launch import UwsgiProcess
from uwsgitune.tuner import Decision, TunerSettings


def test_uwsgi_defaults_give_sixty_seconds_of_mercy() -> None:
    assert mercy({}) == 60
    assert reload_deadline(20, {}) == 60 + MARGIN
    assert reload_deadline(20, {"processes": "4"}) == 75


def test_the_ini_mercy_counts_and_a_larger_setting_wins() -> None:
    assert reload_deadline(20, {"worker-reload-mercy": "5"}) == 20  # the setting is longer
    assert reload_deadline(2, {"worker-reload-mercy": "5"}) == 5 + MARGIN
    assert reload_deadline(300, {"worker-reload-mercy": "120"}) == 300
    assert reload_deadline(20, {"worker-reload-mercy": "120"}) == 120 + MARGIN


def test_mules_daemons_and_the_emperor_add_their_mercy() -> None:
    base = {"worker-reload-mercy": "10"}
    assert mercy({**base, "mules": "2"}) == 60  # mule-reload-mercy defaults to 60
    assert mercy({**base, "mule": "m.py", "mule-reload-mercy": "5"}) == 10
    assert mercy({**base, "attach-daemon": "memcached"}) == 13  # 3 s when reload-mercy is 0
    assert mercy({**base, "attach-daemon": "x", "reload-mercy": "8"}) == 18
    assert mercy({**base, "smart-attach-daemon": "/run/x.pid x"}) == 10  # not waited for
    assert mercy({**base, "emperor": "/etc/vassals"}) == 15


def test_bad_values_assume_the_default() -> None:
    assert mercy({"worker-reload-mercy": "soon"}) == 60
    assert mercy({"worker-reload-mercy": "-5"}) == 0


def test_read_from_the_ini_with_its_includes(tmp_path: Path) -> None:
    part = tmp_path / "part.ini"
    part.write_text("[uwsgi]\nworker-reload-mercy = 90\n")
    ini = tmp_path / "app.ini"
    ini.write_text(f"[uwsgi]\nprocesses = 2\nini = {part}\n")
    assert reload_deadline_for(20, ini) == 90 + MARGIN
    assert reload_deadline_for(20, tmp_path / "missing.ini") == 60 + MARGIN
    assert reload_deadline_for(20, None) == 60 + MARGIN
    ini.write_bytes(b"[uwsgi]\nprocesses = \xff\n")
    assert reload_deadline_for(20, ini) == 60 + MARGIN


@pytest.mark.uwsgi
def test_a_reload_waiting_for_a_slow_request_is_not_failed_at_the_setting(
    uwsgi: Callable[..., UwsgiProcess], tmp_path: Path
) -> None:
    """The setting says 2 s; an 8 s request in flight holds the reload (uWSGI lets the
    worker finish it, its mercy is 10 s): the reload is verified, the request answered."""
    override = tmp_path / "override.ini"
    opts = manual(override, processes=2, initial=1)
    include = opts.pop("ini")  # the override include stays the ini's last line
    proc = uwsgi(**opts, worker_reload_mercy=10, ini=include)
    settings = TunerSettings(min_workers=1, max_workers=4, reload_deadline=2)
    locks = tmp_path / "locks"
    driver = tuned(
        proc.stats, proc.fifo, settings=settings, override=override, ini=proc.ini, locks=locks
    )
    driver.run(until=lambda state: state.tuning is not None)  # opened, the lock taken
    tuner = service(driver)
    answers: list[int] = []

    def poll() -> Frame:  # through the driver's stages, the tuner not stepped
        frame = driver.poll_in_step().frame
        assert frame is not None
        return frame

    def slow() -> None:
        with urllib.request.urlopen(url(proc, "/io/8000"), timeout=60) as r:
            answers.append(r.status)

    request = threading.Thread(target=slow)
    request.start()
    try:
        assert wait_for(lambda: poll().busy > 0, 15), "the slow request never started"
        frame = poll()
        tuner._apply(Decision("up", "test", 3, 1, "test", "reload"), frame, 0.0)
        request.join(60)
        outcome = tuner._result(None).outcome
    finally:
        driver.close()
    assert outcome is not None and outcome.result == "verified", outcome
    took = float(outcome.detail.split("reloaded in ")[1].split("s")[0])
    assert took > 2, outcome.detail  # it did wait for the request, past the setting
    assert answers == [200]  # the request in flight was served, not cut
    ov = read_override(override)
    assert ov is not None and (ov.processes, ov.cheaper_initial) == (4, 3)
