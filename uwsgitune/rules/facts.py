"""Static facts the stats documents do not carry: parts of the configuration.

Most facts (effective CPUs, somaxconn, memory, threads, backlogs, memory-report) arrive in the
frames. What uWSGI never exposes (the cheaper algorithm, whether stats-http is on) comes from
here. Every field is optional: None means unknown, and a rule that needs an unknown fact stays
quiet rather than guess.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class ConfigFacts:
    """Configuration values, e.g. from an ini (`uwsgitune.core.ini.read_ini_facts`)."""

    processes: int | None = None
    cheaper: int | None = None  # 0 = cheaper mode off
    cheaper_algo: str | None = None
    listen: int | None = None
    threads: int | None = None
    memory_report: bool | None = None
    offload_threads: int | None = None
    stats_http: bool | None = None


@dataclass(frozen=True)
class Facts:
    """Everything static the engine may know beside the frames."""

    config: ConfigFacts = field(default_factory=ConfigFacts)
    stats_kind: str | None = None  # the stats address kind: unix, abstract, tcp, http

    @property
    def stats_http(self) -> bool | None:
        if self.stats_kind is not None:
            return self.stats_kind == "http" or bool(self.config.stats_http)
        return self.config.stats_http


NO_FACTS = Facts()
