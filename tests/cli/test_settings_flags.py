"""CLI flags from the settings' one declaration; bounds and restart_command checked once."""

from __future__ import annotations

import argparse

import pytest

from uwsgitune.cli.daemon import load
from uwsgitune.cli.main import build_parser
from uwsgitune.cli.tune import _restart, settings_from
from uwsgitune.daemon.config import validate
from uwsgitune.errors import UserError
from uwsgitune.tuner.tunersettings import TunerSettings


def parse(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(list(argv))


@pytest.mark.parametrize(
    "argv",
    [
        ("tune", "/x.sock", "--fifo", "/f"),
        ("watch", "/x.sock"),
    ],
)
def test_flags_keep_their_names_and_defaults(argv: tuple[str, ...]) -> None:
    args = parse(*argv)
    assert (args.min_workers, args.max_workers, args.interval) == (1, None, 1.0)
    args = parse(*argv, "--min-workers", "2", "--max-workers", "6", "--interval", "0.5")
    assert (args.min_workers, args.max_workers, args.interval) == (2, 6, 0.5)


def test_recommend_interval_flag() -> None:
    assert parse("recommend", "/x.sock").interval == 1.0
    assert parse("recommend", "/x.sock", "--interval", "0.1").interval == 0.1


def test_help_comes_from_the_declaration() -> None:
    text = build_parser()._subparsers._group_actions[0].choices["tune"].format_help()  # type: ignore[union-attr]
    assert "--min-workers N" in text and "uWSGI `cheaper`" in text
    assert "--interval SECONDS" in text and "Seconds between polls" in text


def test_settings_from_flags_and_one_bounds_check() -> None:
    args = parse("tune", "/x.sock", "--fifo", "/f", "--min-workers", "2")
    assert settings_from(args, 6) == TunerSettings(min_workers=2, max_workers=6)
    args = parse("tune", "/x.sock", "--fifo", "/f", "--min-workers", "5", "--max-workers", "2")
    with pytest.raises(UserError, match=r"^--min-workers 5 > --max-workers 2; give min <= max$"):
        settings_from(args)
    args = parse("tune", "/x.sock", "--fifo", "/f", "--interval", "0.05")
    with pytest.raises(UserError, match=r"^--interval: .*0\.1"):
        settings_from(args)


@pytest.mark.parametrize(
    ("command", "override", "message"),
    [
        ("", "o.ini", "--restart-command is empty; give the command that restarts the instance"),
        ("'open", "o.ini", "--restart-command: No closing quotation; quote it as one shell word"),
        ("no-such-cmd -x", "o.ini", "--restart-command: 'no-such-cmd' not found; give a full path"),
        ("true", None, "--restart-command needs --override (listen is written there)"),
    ],
)
def test_restart_command_checked_as_in_the_config(
    command: str, override: str | None, message: str
) -> None:
    args = argparse.Namespace(restart_command=command, override=override)
    with pytest.raises(UserError) as info:
        _restart(args)
    assert str(info.value) == message


def test_restart_command_argv() -> None:
    args = argparse.Namespace(restart_command="sh -c 'exit 0'", override="o.ini")
    restart = _restart(args)
    assert restart is not None and restart.argv == ("sh", "-c", "exit 0")


def test_daemon_flags_are_validated_by_the_config() -> None:
    args = parse("daemon", "--stats", "/x.sock")
    assert (args.min_workers, args.max_workers, args.interval) == (None, None, None)
    args = parse("daemon", "--stats", "/x.sock", "--min-workers", "2", "--interval", "0.5")
    assert (args.min_workers, args.interval) == (2, "0.5")


@pytest.mark.parametrize(
    "argv",
    [
        ("tune", "/x.sock", "--fifo", "/f"),
        ("watch", "/x.sock", "--fifo", "/f"),
        (
            "sweep",
            "--url",
            "http://127.0.0.1:1/",
            "--stats",
            "/x",
            "--fifo",
            "/f",
            "--workers",
            "1",
        ),
    ],
)
def test_the_tcp_opt_in_is_one_switch_from_its_declaration(argv: tuple[str, ...]) -> None:
    assert parse(*argv).trust_tcp_stats is False
    assert parse(*argv, "--trust-tcp-stats").trust_tcp_stats is True
    text = build_parser()._subparsers._group_actions[0].choices[argv[0]].format_help()  # type: ignore[union-attr]
    assert "--trust-tcp-stats" in " ".join(text.split())
    assert "proved to be the master's" in " ".join(text.split())


def test_the_daemons_tcp_opt_in_is_an_instance_key_flag_and_variable() -> None:
    config = load(parse("daemon", "--stats", "127.0.0.1:9191"))
    assert config.instance[0].trust_tcp_stats is False
    config = load(parse("daemon", "--stats", "127.0.0.1:9191", "--trust-tcp-stats"))
    assert config.instance[0].trust_tcp_stats is True
    data = {"instance": [{"name": "app", "stats": "127.0.0.1:9191"}]}
    env = {"UWSGITUNE_INSTANCE_APP_TRUST_TCP_STATS": "true"}
    assert validate(data, "test", env).instance[0].trust_tcp_stats is True
    data = {"instance": [{"name": "app", "stats": "127.0.0.1:9191", "trust_tcp_stats": True}]}
    assert validate(data, "test").instance[0].trust_tcp_stats is True
