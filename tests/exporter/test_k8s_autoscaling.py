"""The autoscaling examples, checked offline (no cluster): the rule files with promtool
(`check rules`, and `test rules` for the recording rules' results), the HPA against the
`kubernetes` client's autoscaling/v2 models, the ScaledObject against the fields KEDA
documents (tests/data/keda-scaledobject.schema.json), and all of them against each other
and the exporter's family name."""

from __future__ import annotations

import copy
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from kubernetes.client import ApiClient, V2HorizontalPodAutoscaler

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
RULES = EXAMPLES / "k8s-rules.yml"
SIGNAL = "uwsgitune_capacity_utilisation"  # the exporter's family (exporter/metrics.py)
PER_POD = "pod:uwsgitune_capacity_utilisation:avg1m"
SCHEMA = json.loads((ROOT / "tests" / "data" / "keda-scaledobject.schema.json").read_text())


def load(name: str) -> Any:
    return yaml.safe_load((EXAMPLES / name).read_text())


def promtool() -> str:
    found = shutil.which("promtool")
    if found is None:
        pytest.skip("promtool is not installed (apt's prometheus package has it)")
    return found


def run(*argv: str, cwd: Path = EXAMPLES) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=60, check=False)


def recorded() -> set[str]:
    return {
        r["record"] for g in load("k8s-rules.yml")["groups"] for r in g["rules"] if "record" in r
    }


def test_the_rule_files_pass_promtool_check(tmp_path: Path) -> None:
    tool = promtool()
    done = run(tool, "check", "rules", str(RULES))
    assert done.returncode == 0, done.stdout + done.stderr
    # The PrometheusRule's groups, as the Operator hands them to Prometheus.
    spec = load("k8s-prometheusrule.yaml")["spec"]
    (tmp_path / "operator.yml").write_text(yaml.safe_dump(spec))
    done = run(tool, "check", "rules", str(tmp_path / "operator.yml"))
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_recording_rules_give_the_expected_results() -> None:
    done = run(promtool(), "test", "rules", "k8s-rules.test.yml")
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_prometheusrule_holds_the_plain_files_groups() -> None:
    rule = load("k8s-prometheusrule.yaml")
    assert (rule["apiVersion"], rule["kind"]) == ("monitoring.coreos.com/v1", "PrometheusRule")
    assert rule["spec"]["groups"] == load("k8s-rules.yml")["groups"]


def hpa_model(raw: dict[str, Any]) -> V2HorizontalPodAutoscaler:
    """The manifest through the client's deserializer: required fields and enums checked."""
    client = ApiClient()
    model = client.deserialize(json.dumps(raw), "V2HorizontalPodAutoscaler", "application/json")
    assert isinstance(model, V2HorizontalPodAutoscaler)
    # A field the model does not know is dropped: the round trip shows it.
    assert client.sanitize_for_serialization(model) == raw
    return model


def test_the_hpa_is_a_valid_autoscaling_v2_object_on_the_signal() -> None:
    model = hpa_model(load("k8s-hpa.yaml"))
    assert model.api_version == "autoscaling/v2" and model.kind == "HorizontalPodAutoscaler"
    (metric,) = model.spec.metrics
    assert metric.type == "Pods" and metric.pods.metric.name == SIGNAL
    assert metric.pods.target.type == "AverageValue"
    # With the default tolerance (0.1), pods are added past target x 1.1: at most 1, the
    # tuner at its ceiling, and no lower than 0.95 (docs/kubernetes.md).
    target = float(metric.pods.target.average_value.removesuffix("m")) / 1000
    assert 0.95 <= target * 1.1 <= 1.0
    assert model.spec.behavior.scale_down.stabilization_window_seconds == 300


def test_the_hpa_check_catches_a_misspelt_field() -> None:
    raw = load("k8s-hpa.yaml")
    bad = copy.deepcopy(raw)
    bad["spec"]["metrics"][0]["pods"]["target"]["avrageValue"] = "900m"
    with pytest.raises(AssertionError):
        hpa_model(bad)
    missing = copy.deepcopy(raw)
    del missing["spec"]["metrics"][0]["type"]
    with pytest.raises(ValueError, match="type"):
        hpa_model(missing)


def test_the_adapter_serves_the_recorded_series_under_the_hpas_name() -> None:
    config = yaml.safe_load(load("k8s-prometheus-adapter.yaml")["data"]["config.yaml"])
    (rule,) = config["rules"]
    assert rule["seriesQuery"].startswith(PER_POD + "{")
    assert PER_POD in recorded()
    assert rule["name"]["as"] == SIGNAL
    assert set(rule["resources"]["overrides"]) == {"namespace", "pod"}


def test_the_scaledobject_has_only_the_fields_keda_documents() -> None:
    obj = load("k8s-keda-scaledobject.yaml")
    jsonschema.validate(obj, SCHEMA)
    (trigger,) = obj["spec"]["triggers"]
    assert trigger["type"] == "prometheus" and trigger["metricType"] == "AverageValue"
    # AverageValue: KEDA's HPA divides the sum by the replicas, so the threshold is the
    # per-pod target, the HPA example's; KEDA's fallback works with AverageValue only.
    assert float(trigger["metadata"]["threshold"]) == 0.9
    assert trigger["metadata"]["query"].startswith(f"sum({PER_POD}" + "{")


@pytest.mark.parametrize(
    ("where", "key"),
    [(("spec",), "minReplicas"), (("spec", "triggers", 0, "metadata"), "treshold")],
)
def test_the_scaledobject_schema_rejects_an_undocumented_field(
    where: tuple[str | int, ...], key: str
) -> None:
    obj = load("k8s-keda-scaledobject.yaml")
    node: Any = obj
    for step in where:
        node = node[step]
    node[key] = "1"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(obj, SCHEMA)


def test_the_adapters_and_kedas_queries_parse(tmp_path: Path) -> None:
    """Their PromQL, the adapter's template filled as the adapter fills it, through promtool
    (a rule file of recording rules is where promtool parses an expression offline)."""
    tool = promtool()
    config = yaml.safe_load(load("k8s-prometheus-adapter.yaml")["data"]["config.yaml"])
    (rule,) = config["rules"]
    adapter = (
        rule["metricsQuery"]
        .replace("<<.Series>>", PER_POD)
        .replace("<<.LabelMatchers>>", 'namespace="shop",pod=~"web-a|web-b"')
        .replace("<<.GroupBy>>", "pod")
    )
    (trigger,) = load("k8s-keda-scaledobject.yaml")["spec"]["triggers"]
    queries = [rule["seriesQuery"], adapter, trigger["metadata"]["query"]]
    rules = [{"record": f"check:query:{i}", "expr": q} for i, q in enumerate(queries)]
    (tmp_path / "queries.yml").write_text(
        yaml.safe_dump({"groups": [{"name": "q", "rules": rules}]})
    )
    done = run(tool, "check", "rules", str(tmp_path / "queries.yml"))
    assert done.returncode == 0, done.stdout + done.stderr
