from __future__ import annotations

from pathlib import Path

import pytest

from uwsgitune.cli.main import main
from uwsgitune.daemon.config import env_key, load_config
from uwsgitune.errors import ConfigError

GOOD = """
[daemon]
metrics_listen = "127.0.0.1:9200"

[[instance]]
name = "app"
stats = "/run/uwsgi/app.sock"
fifo = "/run/uwsgi/app.fifo"
mode = "apply"
min_workers = 2
max_workers = 8

[[instance]]
name = "api-2"
stats = "127.0.0.1:9191"
interval = 0.5
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "uwsgitune.toml"
    path.write_text(text)
    return path


def errors(path: Path, env: dict[str, str] | None = None) -> list[str]:
    with pytest.raises(ConfigError) as info:
        load_config(path, env or {})
    return info.value.lines()


def test_good_file_is_frozen_with_defaults(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, GOOD), {})
    assert config.daemon.metrics_listen == "127.0.0.1:9200"
    assert config.daemon.log_format == "text"
    app, api = config.instance
    assert (app.mode, app.min_workers, app.max_workers) == ("apply", 2, 8)
    assert (api.mode, api.interval, api.timeout) == ("observe", 0.5, None)
    with pytest.raises(ValueError):
        app.mode = "observe"  # type: ignore[misc]


def test_error_names_file_key_and_value(tmp_path: Path) -> None:
    path = write(tmp_path, GOOD.replace("interval = 0.5", "interval = 0"))
    assert errors(path) == [f"{path}: instance[1].interval: must be >= 0.1 (got 0)"]


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (
            ('mode = "apply"', 'mode = "auto"'),
            "instance[0].mode: must be 'observe', 'recommend' or 'apply' (got 'auto')",
        ),
        (("min_workers = 2", "min_wrokers = 2"), "instance[0].min_wrokers: unknown key (a typo?)"),
        (("max_workers = 8", "max_workers = 1"), "instance[0]: max_workers (1) < min_workers (2)"),
        (('fifo = "/run/uwsgi/app.fifo"', ""), "instance[0]: mode 'apply' needs a fifo"),
        (
            ('stats = "127.0.0.1:9191"', 'stats = "/run/uwsgi/app.sock"'),
            "two instances share the stats",
        ),
        (('name = "api-2"', 'name = "app"'), "two instances share the name 'app'"),
        (("127.0.0.1:9200", ":9200"), "daemon.metrics_listen: ':9200': give a host"),
        (
            ('stats = "127.0.0.1:9191"', 'stats = "ftp://x:1"'),
            "instance[1].stats: ftp://x:1: unknown scheme",
        ),
        (('name = "api-2"\n', ""), "instance[1].name: required key is missing"),
    ],
)
def test_each_mistake_is_one_clear_line(
    tmp_path: Path, change: tuple[str, str], expected: str
) -> None:
    path = write(tmp_path, GOOD.replace(*change))
    lines = errors(path)
    assert any(expected in line for line in lines), lines
    assert all(line.startswith(f"{path}: ") for line in lines)


def test_no_instance_and_bad_toml_and_missing_file(tmp_path: Path) -> None:
    assert "no [[instance]]" in errors(write(tmp_path, "[daemon]\n"))[0]
    assert "invalid TOML" in errors(write(tmp_path, "[daemon\n"))[0]
    assert "No such file" in errors(tmp_path / "absent.toml")[0]


def test_environment_overrides_are_validated_and_named(tmp_path: Path) -> None:
    path = write(tmp_path, GOOD)
    env = {
        "UWSGITUNE_METRICS_LISTEN": "0.0.0.0:9300",
        "UWSGITUNE_INSTANCE_API_2_MODE": "recommend",
        "UWSGITUNE_INSTANCE_APP_MAX_WORKERS": "12",
        "UNRELATED": "x",
    }
    config = load_config(path, env)
    assert config.daemon.metrics_listen == "0.0.0.0:9300"
    assert config.instance[1].mode == "recommend"
    assert config.instance[0].max_workers == 12
    bad = errors(path, {"UWSGITUNE_INSTANCE_API_2_INTERVAL": "0.01"})
    where = "instance[1].interval (from $UWSGITUNE_INSTANCE_API_2_INTERVAL)"
    assert bad == [f"{path}: {where}: must be >= 0.1 (got '0.01')"]
    assert (
        "UWSGITUNE_INSTANCE_WEB_MODE: no instance"
        in errors(path, {"UWSGITUNE_INSTANCE_WEB_MODE": "x"})[0]
    )
    assert env_key("api-2.eu") == "API_2_EU"


def test_config_check_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["config", "check", str(write(tmp_path, GOOD))]) == 0
    assert capsys.readouterr().out.strip() == "ok: 2 instances"
    bad = write(
        tmp_path,
        GOOD.replace("interval = 0.5", "interval = 0").replace(
            "min_workers = 2", "min_workers = 0"
        ),
    )
    assert main(["config", "check", str(bad)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        f"uwsgitune: {bad}: instance[0].min_workers: must be >= 1 (got 0)",
        f"uwsgitune: {bad}: instance[1].interval: must be >= 0.1 (got 0)",
    ]


def test_flags_are_validated_the_same_way(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["daemon", "--stats", "/x.sock", "--interval", "0"]) == 2
    assert capsys.readouterr().err.strip() == "uwsgitune: --interval: must be >= 0.1 (got '0')"
    assert main(["daemon", "--stats", "/x.sock", "--config", "/etc/x.toml"]) == 2
    assert main(["daemon"]) == 2
    assert "give --config" in capsys.readouterr().err


def test_the_request_log_address_is_checked_and_never_shared(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with_latency = GOOD.replace('mode = "apply"', 'mode = "apply"\nlatency = "127.0.0.1:9118"')
    app, api = load_config(write(tmp_path, with_latency), {}).instance
    assert (app.latency, api.latency) == ("127.0.0.1:9118", None)
    unix = with_latency.replace("127.0.0.1:9118", "/run/uwsgi/log.sock")
    (line,) = errors(write(tmp_path, unix))
    assert "instance[0].latency" in line and "use UDP on loopback" in line
    both = with_latency.replace("interval = 0.5", 'interval = 0.5\nlatency = "127.0.0.1:9118"')
    assert any("two instances share the latency" in e for e in errors(write(tmp_path, both)))
    assert main(["daemon", "--stats", "/x.sock", "--latency", "10.0.0.1:9118"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("uwsgitune: --latency: ") and "not loopback" in err
    assert (
        main(["daemon", "--stats", "/a.sock", "--stats", "/b.sock", "--latency", "127.0.0.1:1"])
        == 2
    )
    assert "need a single --stats" in capsys.readouterr().err
