"""A set of metric families filled instance by instance, yielded once per scrape.

One family per metric name holds the samples of every instance (each carries `stats_uri`),
as the exposition format wants. Families with no sample are not yielded. Samples are
appended directly (`Metric.add_sample`), which is what the typed families' `add_metric` ends
in, without its per-call list and zip: a 64-worker scrape adds ~1,400 of them.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import Metric
from prometheus_client.samples import Sample


class Families:
    def __init__(self) -> None:
        self._families: dict[str, Metric] = {}

    def _family(self, kind: str, name: str, doc: str) -> Metric:
        family = self._families.get(name)
        if family is None:
            # A counter family is named without `_total`; its samples carry it.
            base = name.removesuffix("_total") if kind == "counter" else name
            family = self._families[name] = Metric(base, doc, kind)
        return family

    def gauge(self, name: str, doc: str, uri: str, value: float | None, /, **labels: str) -> None:
        """Add one sample; `None` (unknown) adds nothing rather than a misleading zero."""
        if value is not None:
            labels["stats_uri"] = uri
            self._family("gauge", name, doc).samples.append(Sample(name, labels, float(value)))

    def counter(self, name: str, doc: str, uri: str, value: float | None, /, **labels: str) -> None:
        """`name` ends in `_total`, as it appears in the output."""
        if value is not None:
            labels["stats_uri"] = uri
            self._family("counter", name, doc).samples.append(Sample(name, labels, float(value)))

    def summary(self, name: str, doc: str, uri: str, count: int, total: float) -> None:
        samples = self._family("summary", name, doc).samples
        samples.append(Sample(f"{name}_count", {"stats_uri": uri}, float(count)))
        samples.append(Sample(f"{name}_sum", {"stats_uri": uri}, float(total)))

    def merge(self, other: Families) -> None:
        """Add every sample of `other` (one instance's families) to these."""
        for name, family in other._families.items():
            mine = self._families.get(name)
            if mine is None:
                self._families[name] = family
            else:
                mine.samples.extend(family.samples)

    def __iter__(self) -> Iterator[Metric]:
        return (f for f in self._families.values() if f.samples)
