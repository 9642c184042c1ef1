"""examples/k8s-sidecar.yaml binds every interface of the pod, so it serves TLS with basic
auth: its daemon config and its web config both pass the checks `config check` runs."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import yaml

from tests.exporter.conftest import Certs
from uwsgitune.daemon.config import load_config

POD = Path(__file__).resolve().parents[2] / "examples" / "k8s-sidecar.yaml"


def docs() -> dict[str, Any]:
    return {d["kind"]: d for d in yaml.safe_load_all(POD.read_text())}


def test_the_pod_serves_tls_with_basic_auth(certs: Certs, tmp_path: Path) -> None:
    objects = docs()
    toml = objects["ConfigMap"]["data"]["uwsgitune.toml"]
    web = objects["Secret"]["stringData"]["web.yml"]
    assert 'metrics_listen = "0.0.0.0:9117"' in toml
    assert 'web_config_file = "/etc/uwsgitune-web/web.yml"' in toml
    # The Secret's files, with a real certificate in place of the placeholders.
    (tmp_path / "web.yml").write_text(web)
    shutil.copy(certs.server_crt, tmp_path / "tls.crt")
    shutil.copy(certs.server_key, tmp_path / "tls.key")
    local = toml.replace("/etc/uwsgitune-web/web.yml", str(tmp_path / "web.yml"))
    (tmp_path / "pod.toml").write_text(local)
    config = load_config(tmp_path / "pod.toml", {})
    assert config.daemon.listens == ("0.0.0.0:9117",)

    from uwsgitune.exporter.webconfig import load_web_config

    loaded = load_web_config(tmp_path / "web.yml")
    assert loaded.tls is not None and set(loaded.users) == {"prometheus"}


def test_the_pod_mounts_the_web_config_and_probes_the_health_paths() -> None:
    pod = docs()["Pod"]
    sidecar = next(c for c in pod["spec"]["containers"] if c["name"] == "uwsgitune")
    mounts = {m["mountPath"] for m in sidecar["volumeMounts"]}
    assert "/etc/uwsgitune-web" in mounts
    assert sidecar["readinessProbe"]["httpGet"] == {
        "path": "/-/ready",
        "port": "metrics",
        "scheme": "HTTPS",
    }
    assert sidecar["livenessProbe"]["httpGet"]["path"] == "/-/healthy"
    assert pod["metadata"]["annotations"]["prometheus.io/scheme"] == "https"
