"""How long a reload may take before it is called failed: uWSGI's own mercy, then a margin.

A graceful reload (`r`) lets each old worker finish the request it is serving, for up to
`worker-reload-mercy` seconds (60 by default) before the master kills it. A reload of an
instance serving slow requests is therefore not failed at 20 s: the reload deadline is never
shorter than the longest wait uWSGI itself may take, plus `MARGIN` for the kill, the
re-exec and the app's loading. A larger `reload_deadline` setting wins.

From uWSGI 2.0's source (core/uwsgi.c `grace_them_all`, core/master_utils.c, daemons.c):
- every worker gets `worker-reload-mercy` (default 60), every mule `mule-reload-mercy`
  (default 60), both counted from the same moment;
- before that, the master stops its attached (non-smart) daemons and its Emperor, waiting
  `reload-mercy` seconds (3 when unset; 2 more for the Emperor) for each (counted once
  here: the merged ini keeps one value per key).

Read from the user's ini as uWSGI would merge it. A mercy given on uWSGI's command line or in
its environment is not seen: set `reload_deadline` to cover it.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from uwsgitune.actuate.override import IniError, load_config

WORKER_MERCY = 60  # uWSGI's default worker-reload-mercy and mule-reload-mercy, seconds
DAEMON_MERCY = 3  # what uWSGI waits for an attached daemon or the Emperor when reload-mercy is 0
MARGIN = 15.0  # past the mercy: the kill (checked once a second), the re-exec, the app's load


def _seconds(config: Mapping[str, str], key: str, default: int) -> int:
    value = config.get(key)
    if value is None:
        return default
    try:
        return max(int(value.strip()), 0)
    except ValueError:  # uWSGI's atoi would read something; assume the longer default
        return default


def mercy(config: Mapping[str, str]) -> int:
    """Seconds uWSGI may spend stopping the old processes of a graceful reload of `config`."""
    wait = _seconds(config, "worker-reload-mercy", WORKER_MERCY)
    if "mule" in config or "mules" in config:
        wait = max(wait, _seconds(config, "mule-reload-mercy", WORKER_MERCY))
    each = _seconds(config, "reload-mercy", 0) or DAEMON_MERCY
    daemons = any("attach" in k and "daemon" in k and "smart" not in k for k in config)
    return wait + (each if daemons else 0) + (each + 2 if "emperor" in config else 0)


def reload_deadline(setting: float, config: Mapping[str, str]) -> float:
    """The reload deadline for an instance of `config`: the `reload_deadline` setting, never
    less than uWSGI's mercy plus `MARGIN`."""
    return max(setting, mercy(config) + MARGIN)


def reload_deadline_for(setting: float, user_ini: Path | None) -> float:
    """`reload_deadline` for the user's ini; an unreadable one (the reload refuses it, and
    says why) or none: uWSGI's defaults."""
    try:
        config = load_config(user_ini) if user_ini is not None else {}
    except (IniError, OSError, UnicodeError):
        config = {}
    return reload_deadline(setting, config)
