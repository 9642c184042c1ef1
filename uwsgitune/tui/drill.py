"""Emperor drill-down: open a vassal's own stats socket in a new tab, where it is known."""

from __future__ import annotations

from typing import TYPE_CHECKING

from uwsgitune.core.address import AddressError, parse_address
from uwsgitune.pipeline import pipeline_for
from uwsgitune.sources.watcher import InstanceWatch
from uwsgitune.tui.vassals import vassal_stats_address

if TYPE_CHECKING:
    from uwsgitune.tui.app import WatchApp


def drill_down(app: WatchApp, name: str, pid: int) -> None:
    text = vassal_stats_address(pid, name)
    if text is None:
        app.notify(
            f"the stats socket of vassal {name} is unknown (no `stats` in its ini); "
            "give it as another ADDR",
            severity="warning",
        )
        return
    if text in app.names:
        app.action_goto(app.names.index(text))
        return
    try:
        addr = parse_address(text)
    except AddressError as exc:
        app.notify(f"vassal {name}: {exc}", severity="warning")
        return
    watch = InstanceWatch(addr, interval=app.interval)
    app.run_worker(app.add_instance(text, pipeline_for(watch)), group="drill")
