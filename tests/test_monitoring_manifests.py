"""deploy/monitoring: the ServiceMonitor, the plain scrape config and the
Grafana dashboard, rendered and validated offline like deploy/kubernetes.

The ConfigMap is checked against the Kubernetes 1.30 schema (strict). The
Prometheus Operator's ServiceMonitor CRD is not among ../shared/k8s-crds, so
the ServiceMonitor is checked against the CRD when one is there and otherwise
against the subset of monitoring.coreos.com/v1 it uses (strict: unknown
fields are errors), and against the cache's Services: it must select exactly
the head's and the nodes' Services, by a port they have. Whether every
dashboard query names exported metrics is checked against a running cluster
(tests/test_metrics.py).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from test_k8s_manifests import (
    CRD_DIR,
    K8S,
    KUBE_VERSION,
    _render_path,
    _strict,
    needs_kubectl,
    render,
    validate_core,
)

ROOT = Path(__file__).resolve().parents[1]
MONITORING = ROOT / "deploy" / "monitoring"

# The fields of ServiceMonitor (monitoring.coreos.com/v1) that these manifests
# use, with the operator's types and enums.
SERVICE_MONITOR_SUBSET: dict[str, Any] = {
    "type": "object",
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "properties": {
        "apiVersion": {"enum": ["monitoring.coreos.com/v1"]},
        "kind": {"enum": ["ServiceMonitor"]},
        "metadata": {"type": "object"},
        "spec": {
            "type": "object",
            "required": ["selector", "endpoints"],
            "properties": {
                "selector": {
                    "type": "object",
                    "properties": {
                        "matchLabels": {"type": "object",
                                        "additionalProperties": {"type": "string"}},
                        "matchExpressions": {"type": "array", "items": {
                            "type": "object", "required": ["key", "operator"],
                            "properties": {
                                "key": {"type": "string"},
                                "operator": {"enum": ["In", "NotIn", "Exists", "DoesNotExist"]},
                                "values": {"type": "array", "items": {"type": "string"}}}}},
                    },
                },
                "endpoints": {"type": "array", "minItems": 1, "items": {
                    "type": "object",
                    "properties": {
                        "port": {"type": "string"},
                        "path": {"type": "string"},
                        "scheme": {"enum": ["http", "https"]},
                        "interval": {"type": "string", "pattern": r"^(0|(([0-9]+)(ms|s|m|h))+)$"},
                        "scrapeTimeout": {"type": "string",
                                          "pattern": r"^(0|(([0-9]+)(ms|s|m|h))+)$"},
                    }}},
            },
        },
    },
}


def service_monitor_validator():
    import jsonschema

    for crd_file in sorted(CRD_DIR.glob("*servicemonitors*.yaml")) if CRD_DIR.is_dir() else []:
        crd = yaml.safe_load(crd_file.read_text())
        for v in crd["spec"]["versions"]:
            if v["name"] == "v1":
                schema = _strict(v["schema"]["openAPIV3Schema"])
                schema["properties"]["metadata"] = {"type": "object"}
                return jsonschema.Draft4Validator(schema)
    return jsonschema.Draft4Validator(_strict(SERVICE_MONITOR_SUBSET))


@pytest.fixture(scope="module")
def objects() -> list[dict[str, Any]]:
    return _render_path(MONITORING)


def selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    if any(labels.get(k) != v for k, v in selector.get("matchLabels", {}).items()):
        return False
    for e in selector.get("matchExpressions", []):
        value, op = labels.get(e["key"]), e["operator"]
        if op == "In" and value not in e["values"]:
            return False
        if op == "NotIn" and value in e["values"]:
            return False
        if op == "Exists" and value is None:
            return False
        if op == "DoesNotExist" and value is not None:
            return False
    return True


@needs_kubectl
def test_objects_are_valid(objects):
    kinds = sorted(o["kind"] for o in objects)
    assert kinds == ["ConfigMap", "ServiceMonitor"]
    for o in objects:
        if o["kind"] == "ConfigMap":
            validate_core(o)
        else:
            errors = list(service_monitor_validator().iter_errors(o))
            assert not errors, [f"{list(e.path)}: {e.message}" for e in errors]
    assert KUBE_VERSION


@needs_kubectl
def test_service_monitor_selects_head_and_nodes_by_their_metrics_port(objects):
    monitor = next(o for o in objects if o["kind"] == "ServiceMonitor")
    services = [o for o in render("shared-cache/base") if o["kind"] == "Service"]
    chosen = [s for s in services if selects(monitor["spec"]["selector"], s["metadata"]["labels"])]
    port = monitor["spec"]["endpoints"][0]["port"]
    scraped = sorted(s["metadata"]["name"] for s in chosen
                     if any(p.get("name") == port for p in s["spec"]["ports"]))
    assert scraped == ["icefloe-head", "icefloe-node"]
    assert monitor["spec"]["endpoints"][0]["path"] == "/metrics"
    # The port is the containers' --health-port.
    for workload in render("shared-cache/base"):
        if workload["kind"] not in ("Deployment", "StatefulSet"):
            continue
        container = workload["spec"]["template"]["spec"]["containers"][0]
        assert {"name": port, "containerPort": 8080, "protocol": "TCP"} in [
            {k: p.get(k, "TCP") for k in ("name", "containerPort", "protocol")}
            for p in container["ports"]]


@needs_kubectl
def test_dashboard_config_map_holds_the_dashboard(objects):
    cm = next(o for o in objects if o["kind"] == "ConfigMap")
    assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert json.loads(cm["data"]["icefloe-dashboard.json"]) == json.loads(
        (MONITORING / "icefloe-dashboard.json").read_text())


def test_dashboard_is_well_formed():
    d = json.loads((MONITORING / "icefloe-dashboard.json").read_text())
    assert d["uid"] and d["title"] and isinstance(d["schemaVersion"], int)
    assert [v["name"] for v in d["templating"]["list"]] == ["datasource"]
    ids = [p["id"] for p in d["panels"]]
    assert len(ids) == len(set(ids))
    for p in d["panels"]:
        g = p["gridPos"]
        assert 0 <= g["x"] and g["x"] + g["w"] <= 24, p["title"]
        if p["type"] == "row":
            continue
        assert p["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, p["title"]
        refs = [t["refId"] for t in p["targets"]]
        assert refs and len(refs) == len(set(refs)), p["title"]
        assert all(t["expr"].strip() for t in p["targets"]), p["title"]


def test_plain_scrape_config_keeps_the_annotated_pods():
    config = yaml.safe_load((MONITORING / "prometheus-scrape.yaml").read_text())
    (job,) = config["scrape_configs"]
    sources = {tuple(r["source_labels"]) for r in job["relabel_configs"]}
    assert ("__meta_kubernetes_pod_annotation_prometheus_io_scrape",) in sources
    assert ("__address__", "__meta_kubernetes_pod_annotation_prometheus_io_port") in sources
    # The pods it keeps carry those annotations.
    for name in ("head.yaml", "node.yaml"):
        docs = list(yaml.safe_load_all((K8S / "shared-cache" / "base" / name).read_text()))
        workload = next(d for d in docs if d and d["kind"] in ("Deployment", "StatefulSet"))
        notes = workload["spec"]["template"]["metadata"]["annotations"]
        assert notes["prometheus.io/scrape"] == "true"
        assert notes["prometheus.io/port"] == "8080"
        assert notes["prometheus.io/path"] == "/metrics"
