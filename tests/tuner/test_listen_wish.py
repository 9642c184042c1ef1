"""The pure side of `listen`: which recommendation is applied, capped at somaxconn; and the
restart command's configuration. The restart itself is in test_real_listen.py; the listen
decision (advise, held, apply) in test_listen_decision.py."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tests.actuate.offline import at, offline
from tests.tuner.plant import Plant
from uwsgitune.core.frame import Frame, SocketView
from uwsgitune.daemon.config import validate
from uwsgitune.errors import ConfigError
from uwsgitune.rules.finding import EvidenceWindow, Finding, Recommendation
from uwsgitune.tuner import TunerSettings
from uwsgitune.tuner.backlog import listen_wish


def _frame(backlog: int, somaxconn: int | None) -> Frame:
    f = Plant(live=2).frame(1.0)
    sock = SocketView("127.0.0.1:9000", "http", False, 0, backlog, "stats")
    return replace(f, sockets=(sock,), somaxconn=somaxconn)


def _finding(rec: Recommendation, clearing: bool = False) -> Finding:
    window = EvidenceWindow(0, 1, 2)
    return Finding("listen_queue.bursts", "warning", "bursts", (), window, rec, clearing=clearing)


def test_a_listen_recommendation_is_capped_at_somaxconn() -> None:
    rec = Recommendation("listen", "raise", 512, "restart", "holds bursts", current=100)
    wish = listen_wish([_finding(rec)], _frame(100, 4096))
    assert wish is not None and (wish.current, wish.wanted, wish.target) == (100, 512, 512)
    assert wish.appliable
    wish = listen_wish([_finding(rec)], _frame(100, 256))
    assert wish is not None and wish.target == 256


def test_no_room_under_somaxconn_or_an_unknown_one_applies_nothing() -> None:
    together = (("listen", 512),)
    rec = Recommendation(
        "net.core.somaxconn", "raise", 512, "sysctl", "room", current=128, together=together
    )
    wish = listen_wish([_finding(rec)], _frame(128, 128))
    assert wish is not None and wish.target is None and "raise net.core.somaxconn" in wish.why
    rec = Recommendation("listen", "raise", 512, "restart", "holds bursts")
    wish = listen_wish([_finding(rec)], _frame(100, None))
    assert wish is not None and wish.target is None and "somaxconn unknown" in wish.why


def test_only_burst_advice_is_applied() -> None:
    rec = Recommendation("listen", "raise", 1024, "restart", "a larger backlog", current=100)
    busy = "busy on the default listen"
    f = Finding("config.default_listen", "warning", busy, (), EvidenceWindow(0, 1, 2), rec)
    wish = listen_wish([f], _frame(100, 4096))
    assert wish is not None and wish.target == 1024 and not wish.appliable


def test_clearing_findings_and_other_recommendations_are_ignored() -> None:
    listen = Recommendation("listen", "raise", 512, "restart", "holds bursts")
    workers = Recommendation("workers", "raise", 8, "fifo", "more workers")
    assert listen_wish([_finding(listen, clearing=True)], _frame(100, 4096)) is None
    assert listen_wish([_finding(workers)], _frame(100, 4096)) is None


def test_restart_command_config() -> None:
    base = {"name": "app", "stats": "/run/app.sock", "override": "/var/lib/app.ini"}
    cfg = validate({"instance": [{**base, "restart_command": "sh -c 'exit 0'"}]}, "t")
    assert cfg.instance[0].restart_command == ("sh", "-c", "exit 0")
    with pytest.raises(ConfigError, match="restart_command is empty"):
        validate({"instance": [{**base, "restart_command": []}]}, "t")
    with pytest.raises(ConfigError, match="'no-such-restart' not found"):
        validate({"instance": [{**base, "restart_command": ["no-such-restart"]}]}, "t")
    no_override = {"name": "app", "stats": "/run/app.sock", "restart_command": ["true"]}
    with pytest.raises(ConfigError, match="needs an override"):
        validate({"instance": [no_override]}, "t")


def test_the_tuner_uses_the_drivers_findings_and_does_not_run_the_rules_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The driver runs the rules once per poll and hands their findings to the tuner in the
    state it steps it with."""
    import uwsgitune.actuate.service as service_mod
    import uwsgitune.pipeline.rules as poll_rules
    import uwsgitune.rules.engine as engine

    def no_second_run(*a: object, **k: object) -> None:
        raise AssertionError("the rules ran twice")

    assert not hasattr(service_mod, "evaluate")  # actuate/ does not run the rules at all
    monkeypatch.setattr(engine, "evaluate", no_second_run)
    monkeypatch.setattr(poll_rules, "evaluate", no_second_run)
    frames = [replace(_frame(100, 4096), mono=float(t), t=1e9 + t) for t in range(5)]
    tuner = offline(mode="recommend", settings=TunerSettings(), mono=lambda: 4.0)
    rec = Recommendation("listen", "raise", 512, "restart", "holds bursts", current=100)
    result = tuner.step(at(frames, [_finding(rec)]))
    assert result is not None
    lines = [n.text for n in result.notes if n.fresh]
    assert any("listen 100 -> 512 [listen_queue.bursts]" in line for line in lines), lines
    result = tuner.step(at(frames, []))
    assert result is not None
    assert not any("listen" in n.text for n in result.notes if n.fresh)
