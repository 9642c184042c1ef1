"""A set of metric families filled instance by instance, yielded once per scrape.

One family per metric name holds the samples of every instance (each carries `stats_uri`),
as the exposition format wants. Families with no sample are not yielded.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    Metric,
    SummaryMetricFamily,
)


class Families:
    def __init__(self) -> None:
        self._families: dict[str, Metric] = {}

    def _get(self, kind: str, name: str, doc: str, labels: Sequence[str]) -> Metric:
        family = self._families.get(name)
        if family is None:
            cls = {"gauge": GaugeMetricFamily, "counter": CounterMetricFamily}[kind]
            family = cls(name, doc, labels=["stats_uri", *labels])
            self._families[name] = family
        return family

    def gauge(self, name: str, doc: str, uri: str, value: float | None, /, **labels: str) -> None:
        """Add one sample; `None` (unknown) adds nothing rather than a misleading zero."""
        if value is None:
            return
        family = self._get("gauge", name, doc, list(labels))
        assert isinstance(family, GaugeMetricFamily)
        family.add_metric([uri, *labels.values()], float(value))

    def counter(self, name: str, doc: str, uri: str, value: float | None, /, **labels: str) -> None:
        if value is None:
            return
        family = self._get("counter", name, doc, list(labels))
        assert isinstance(family, CounterMetricFamily)
        family.add_metric([uri, *labels.values()], float(value))

    def summary(self, name: str, doc: str, uri: str, count: int, total: float) -> None:
        family = self._families.get(name)
        if family is None:
            family = SummaryMetricFamily(name, doc, labels=["stats_uri"])
            self._families[name] = family
        assert isinstance(family, SummaryMetricFamily)
        family.add_metric([uri], count_value=count, sum_value=total)

    def __iter__(self) -> Iterator[Metric]:
        return (f for f in self._families.values() if f.samples)
