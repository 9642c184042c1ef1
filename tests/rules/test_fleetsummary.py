"""The fleet summary (rules/fleetsummary.py): over and under provisioned from the findings'
targets, memory freed only where RSS is known, the tuner against the rules, `--by` groups."""

from __future__ import annotations

from uwsgitune.rules.finding import Evidence, EvidenceWindow, Finding, Severity
from uwsgitune.rules.fleetsummary import InstanceVerdict, summarise, summary_lines

MIB = 1024 * 1024


def sized(fid: str, target: int, severity: Severity = "info") -> Finding:
    name = "workers_that_fit" if fid == "memory.pressure" else "target_workers"
    evidence = (Evidence(name, target, "workers"),)
    return Finding(fid, severity, "r", evidence, EvidenceWindow(0.0, 60.0, 60))


def verdict(
    name: str, deployment: str, live: int, *findings: Finding, **kw: object
) -> InstanceVerdict:
    return InstanceVerdict(
        name=name,
        labels={"deployment": deployment},
        source="daemon",
        findings=findings,
        live=live,
        **kw,  # type: ignore[arg-type]
    )


def test_over_and_under_provisioned_with_the_workers_and_memory_they_free_or_need() -> None:
    fleet = [
        verdict("a", "shop", 8, sized("idle_overprovisioned", 3), mem_per_worker=100 * MIB),
        verdict("b", "shop", 6, sized("oversubscribed_cpu", 4, "warning")),  # RSS unknown
        verdict("c", "api", 4, sized("listen_queue.capacity_short", 9, "critical")),
        verdict("d", "api", 4),
    ]
    s = summarise(fleet, by="deployment")
    t = s.fleet
    assert (t.over, t.workers_freed, t.memory_freed, t.memory_unknown) == (2, 7, 500 * MIB, 1)
    assert (t.under, t.workers_short) == (1, 5)
    assert (t.critical, t.warning) == (1, 1)
    assert s.groups["shop"].over == 2 and s.groups["api"].under == 1
    assert s.groups["api"].instances == 2


def test_the_tuner_and_the_rules_disagree_when_they_point_different_ways() -> None:
    fleet = [
        verdict("up", "x", 4, sized("idle_overprovisioned", 2), tuner_desired=6),
        verdict("same", "x", 4, sized("idle_overprovisioned", 2), tuner_desired=3),
        verdict("keep", "x", 4, tuner_desired=5),  # no sizing finding: the rules keep 4
        verdict("unknown", "x", 4),
    ]
    s = summarise(fleet)
    assert [v.name for v, _ in s.disagreements] == ["up", "keep"]
    assert "tuner wants 6, idle_overprovisioned says 2 (live 4)" in s.disagreements[0][1]
    assert s.fleet.tuner_unknown == 1
    text = "\n".join(summary_lines(s))
    assert "tuner and rules disagree:" in text and "up: tuner wants 6" in text


def test_the_worst_listen_queues_are_the_fullest_known_ones() -> None:
    fleet = [
        verdict("half", "x", 4, peak_fill=0.5, peak_queue=50),
        verdict("full", "x", 4, peak_fill=1.0, peak_queue=100),
        verdict("none", "x", 4),  # unknown queue: not ranked
    ]
    assert [v.name for v in summarise(fleet).worst_queues] == ["full", "half"]


def test_an_instance_without_the_label_is_grouped_as_such() -> None:
    v = InstanceVerdict(name="bare", labels={}, source="exporter", live=2)
    assert list(summarise([v], by="deployment").groups) == ["(no deployment)"]
