"""The Kubernetes manifests under deploy/kubernetes/: render and validate offline.

Every kustomization is rendered with ``kubectl kustomize``. Core objects are
validated against the Kubernetes 1.30 schemas bundled with
``kubernetes-validate`` (strict: unknown fields are errors); LeaderWorkerSet,
ClusterTrainingRuntime and TrainJob objects against the OpenAPI v3 schemas of
their CRDs in ../shared/k8s-crds/ (also strict). On top of schema validity the
tests check the deployment policy: hardened, sized and probed containers,
secrets only as mounted files, memory headroom on data nodes, NetworkPolicies
that cover the pods, least-privilege RBAC, and a Kubeflow runtime identical to
Kubeflow's own but for CACHE_IMAGE.
"""

from __future__ import annotations

import base64
import copy
import functools
import json
import os
import re
import secrets
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
K8S = ROOT / "deploy" / "kubernetes"
CRD_DIR = Path(__file__).resolve().parents[2] / "shared" / "k8s-crds"
KUBE_VERSION = "1.30"

IMAGE = "ghcr.io/icefloe/icefloe:0.1.0"
GRPC_PORT = 50051
HEALTH_PORT = 8080
# --memory-limit may use at most this share of the container's memory limit.
MEMORY_HEADROOM = 0.8

KUSTOMIZATIONS = sorted(
    p.parent.relative_to(K8S).as_posix() for p in K8S.rglob("kustomization.yaml")
)

CORE_GROUPS = {"", "apps", "batch", "policy", "rbac.authorization.k8s.io", "networking.k8s.io"}
# Custom resource kinds and the CRD (in CRD_DIR) that defines each.
CRD_FILES = {
    "LeaderWorkerSet": "leaderworkerset.x-k8s.io_leaderworkersets.v0.8.0.yaml",
    "ClusterTrainingRuntime": "trainer.kubeflow.org_clustertrainingruntimes.yaml",
    "TrainingRuntime": "trainer.kubeflow.org_trainingruntimes.yaml",
    "TrainJob": "trainer.kubeflow.org_trainjobs.yaml",
}
ORIGINAL_RUNTIME = "kubeflow-runtime-torch-distributed-with-cache.yaml"

# What Kubeflow's cache dataset initializer reads from its environment
# (besides STORAGE_URI, TRAIN_JOB_NAME and CACHE_IMAGE, which Kubeflow sets).
INITIALIZER_ENV = {
    "CLUSTER_SIZE",
    "METADATA_LOC",
    "HEAD_CPU",
    "HEAD_MEM",
    "WORKER_CPU",
    "WORKER_MEM",
    "IAM_ROLE",
}


# --------------------------------------------------------------------------- helpers


def _kubectl_problem() -> str | None:
    """Why `kubectl kustomize` cannot render this tree here, or None."""
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        return "kubectl is not installed (needed for `kubectl kustomize`)"
    out = subprocess.run(
        [kubectl, "version", "--client", "-o", "json"], capture_output=True, text=True, timeout=60
    )
    if out.returncode != 0:
        return f"`kubectl version --client` failed: {out.stderr.strip()}"
    info = json.loads(out.stdout)
    client = info["clientVersion"]
    kustomize = info.get("kustomizeVersion")  # printed since kubectl 1.24
    minor = int(re.match(r"\d*", client.get("minor", "")).group() or 0)
    too_old = (kustomize is None and minor < 22) or (
        kustomize is not None and tuple(int(x) for x in re.findall(r"\d+", kustomize)[:2]) < (4, 1)
    )
    if too_old:
        return (
            f"kubectl {client.get('gitVersion')} embeds kustomize {kustomize or 'v2/v4.0'}, "
            "too old for this tree (`labels` needs kustomize >= v4.1, i.e. kubectl >= 1.22; "
            "Debian 12's kubernetes-client is kubectl 1.20)"
        )
    return None


KUBECTL_PROBLEM = _kubectl_problem()
needs_kubectl = pytest.mark.skipif(KUBECTL_PROBLEM is not None, reason=KUBECTL_PROBLEM or "")
needs_crds = pytest.mark.skipif(
    not CRD_DIR.is_dir(),
    reason=f"CRD schemas not found at {CRD_DIR} (the shared/ folder beside the repository)",
)


def _render_path(path: Path) -> list[dict[str, Any]]:
    out = subprocess.run(
        ["kubectl", "kustomize", str(path)], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, f"kubectl kustomize {path} failed:\n{out.stderr}"
    return [d for d in yaml.safe_load_all(out.stdout) if d]


@functools.cache
def _render_cached(rel: str) -> tuple[str, ...]:
    return tuple(json.dumps(o) for o in _render_path(K8S / rel))


def render(rel: str) -> list[dict[str, Any]]:
    """The objects `kubectl kustomize deploy/kubernetes/<rel>` prints (fresh copies)."""
    return [json.loads(s) for s in _render_cached(rel)]


def group_of(obj: dict[str, Any]) -> str:
    api = obj["apiVersion"]
    return api.split("/")[0] if "/" in api else ""


def find(objs: list[dict[str, Any]], kind: str, name: str | None = None) -> list[dict[str, Any]]:
    return [
        o for o in objs if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)
    ]


def one(objs: list[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    found = find(objs, kind, name)
    assert len(found) == 1, f"expected one {kind} {name or ''}, found {len(found)}"
    return found[0]


def pod_templates(obj: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(label, pod template) for each pod template an icefloe workload object owns."""
    kind = obj["kind"]
    if kind in ("Deployment", "StatefulSet", "DaemonSet", "Job"):
        yield f"{kind}/{obj['metadata']['name']}", obj["spec"]["template"]
    elif kind == "LeaderWorkerSet":
        lwt = obj["spec"]["leaderWorkerTemplate"]
        name = obj["metadata"]["name"]
        if "leaderTemplate" in lwt:
            yield f"LeaderWorkerSet/{name}/leader", lwt["leaderTemplate"]
        yield f"LeaderWorkerSet/{name}/worker", lwt["workerTemplate"]


def all_pod_templates(rel: str) -> list[tuple[str, dict[str, Any]]]:
    return [t for o in render(rel) for t in pod_templates(o)]


def env_of(container: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {e["name"]: e for e in container.get("env", [])}


def parse_quantity(q: str | int) -> float:
    """A Kubernetes quantity ("8Gi", "500m", "1.5", "2G") or icefloe byte size ("6GiB")."""
    m = re.fullmatch(r"([0-9]+(?:\.[0-9]+)?)(m|k|[KMGTPE]i?)?(B?)", str(q))
    assert m, f"cannot parse quantity {q!r}"
    num, unit = float(m.group(1)), m.group(2) or ""
    if unit == "m":
        return num / 1000
    if unit == "k":
        unit = "K"
    powers = "KMGTPE"
    if unit.endswith("i"):
        return num * 1024 ** (powers.index(unit[0]) + 1)
    if unit:
        return num * 1000 ** (powers.index(unit[0]) + 1)
    return num


def selector_matches(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())


def _strict(schema: Any) -> Any:
    """A CRD's OpenAPI v3 schema as a strict JSON schema: objects with declared
    properties reject undeclared ones (the API server would silently prune them,
    hiding typos), unless marked x-kubernetes-preserve-unknown-fields. Other
    x-kubernetes-* extensions (CEL rules, list types) are dropped."""
    if isinstance(schema, list):
        return [_strict(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: _strict(v) for k, v in schema.items() if not k.startswith("x-kubernetes-")}
    if (
        "properties" in schema
        and "additionalProperties" not in schema
        and not schema.get("x-kubernetes-preserve-unknown-fields")
    ):
        out["additionalProperties"] = False
    return out


@functools.cache
def crd_validator(group: str, kind: str, version: str):
    import jsonschema

    crd = yaml.safe_load((CRD_DIR / CRD_FILES[kind]).read_text())
    assert crd["spec"]["names"]["kind"] == kind
    assert crd["spec"]["group"] == group, f"{kind} belongs to {crd['spec']['group']}, not {group}"
    for v in crd["spec"]["versions"]:
        if v["name"] == version:
            assert v.get("served", True), f"{group}/{version} {kind} is not served"
            schema = _strict(v["schema"]["openAPIV3Schema"])
            # metadata is `type: object` in CRDs; the API server checks it as ObjectMeta.
            schema["properties"]["metadata"] = {"type": "object"}
            return jsonschema.Draft4Validator(schema)
    raise AssertionError(f"CRD {kind} has no version {version}")


def validate_core(obj: dict[str, Any]) -> None:
    import kubernetes_validate

    try:
        kubernetes_validate.validate(obj, KUBE_VERSION, strict=True)
    except kubernetes_validate.ValidationError as e:
        path = "/".join(str(p) for p in e.path)
        raise AssertionError(
            f"{obj['kind']}/{obj['metadata'].get('name')}: {path}: {e.message}"
        ) from None


def validate_custom(obj: dict[str, Any]) -> None:
    version = obj["apiVersion"].split("/")[1]
    validator = crd_validator(group_of(obj), obj["kind"], version)
    errors = sorted(validator.iter_errors(obj), key=lambda e: list(e.path))
    if errors:
        lines = [f"{'/'.join(str(p) for p in e.path)}: {e.message}" for e in errors[:10]]
        raise AssertionError(f"{obj['kind']}/{obj['metadata'].get('name')}:\n" + "\n".join(lines))
    name = obj["metadata"].get("name", "")
    assert re.fullmatch(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?", name) and len(name) <= 253, name


def make_user_overlay(tmp_path: Path, base: str, tls: bool) -> tuple[Path, dict[str, str]]:
    """A kustomization like the one the README tells users to write: the base
    plus the Secret(s) generated from local files. Returns (dir, secret values)."""
    values = {"token": secrets.token_hex(32), "cluster-secret": secrets.token_hex(32)}
    for key, value in values.items():
        (tmp_path / key).write_text(value + "\n")
    gen = [
        {
            "name": "icefloe-auth",
            "files": ["token", "cluster-secret"],
            "options": {"disableNameSuffixHash": True},
        }
    ]
    if tls:
        pem = {
            "tls.crt": "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n",
            "tls.key": "-----BEGIN PRIVATE KEY-----\nMIIE"
            + secrets.token_hex(16)
            + "\n-----END PRIVATE KEY-----\n",
            "ca.crt": "-----BEGIN CERTIFICATE-----\nMIIC\n-----END CERTIFICATE-----\n",
        }
        for key, value in pem.items():
            (tmp_path / key).write_text(value)
        values["tls.key"] = pem["tls.key"].splitlines()[1]
        gen.append(
            {
                "name": "icefloe-tls",
                "type": "kubernetes.io/tls",
                "files": list(pem),
                "options": {"disableNameSuffixHash": True},
            }
        )
    kustomization = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "namespace": "icefloe",
        "resources": [os.path.relpath(K8S / base, tmp_path)],  # kustomize wants relative
        "secretGenerator": gen,
    }
    (tmp_path / "kustomization.yaml").write_text(yaml.safe_dump(kustomization))
    return tmp_path, values


# --------------------------------------------------------------------------- rendering and schemas


def test_tree_has_the_expected_kustomizations():
    for rel in (
        "kubeflow",
        "kubeflow/namespace-rbac",
        "kubeflow/example",
        "shared-cache/base",
        "shared-cache/overlays/tls",
        "shared-cache/examples",
        "lws",
    ):
        assert rel in KUSTOMIZATIONS, f"missing deploy/kubernetes/{rel}/kustomization.yaml"


@needs_kubectl
@pytest.mark.parametrize("rel", KUSTOMIZATIONS)
def test_renders(rel):
    objs = render(rel)
    assert objs, f"{rel} renders nothing"
    for o in objs:
        assert {"apiVersion", "kind", "metadata"} <= o.keys(), o
        assert o["metadata"].get("name"), o


@needs_kubectl
@pytest.mark.parametrize("rel", KUSTOMIZATIONS)
def test_core_objects_validate(rel):
    for o in render(rel):
        if group_of(o) in CORE_GROUPS:
            validate_core(o)


@needs_kubectl
@needs_crds
@pytest.mark.parametrize("rel", KUSTOMIZATIONS)
def test_custom_resources_validate_against_crds(rel):
    for o in render(rel):
        if group_of(o) not in CORE_GROUPS:
            validate_custom(o)


@needs_kubectl
@pytest.mark.parametrize("rel", KUSTOMIZATIONS)
def test_every_object_has_a_schema(rel):
    """No kind slips through unvalidated."""
    for o in render(rel):
        known = group_of(o) in CORE_GROUPS or o["kind"] in CRD_FILES
        assert known, f"{rel}: no schema to validate {o['apiVersion']} {o['kind']}"


@needs_kubectl
@needs_crds
def test_crd_validation_catches_mistakes():
    """The strict CRD schemas reject a misspelt field and a wrong type."""
    lws = one(render("lws"), "LeaderWorkerSet")
    bad = copy.deepcopy(lws)
    bad["spec"]["leaderWorkerTemplate"]["sise"] = 3
    with pytest.raises(AssertionError, match="sise"):
        validate_custom(bad)
    bad = copy.deepcopy(lws)
    bad["spec"]["leaderWorkerTemplate"]["size"] = "three"
    with pytest.raises(AssertionError, match="size"):
        validate_custom(bad)
    job = one(render("kubeflow/example"), "TrainJob")
    job["spec"]["trainer"]["numNode"] = 2
    with pytest.raises(AssertionError, match="numNode"):
        validate_custom(job)


@needs_kubectl
def test_core_validation_catches_mistakes():
    dep = one(render("shared-cache/base"), "Deployment", "icefloe-head")
    dep["spec"]["template"]["spec"]["containers"][0]["livenessProbes"] = {}
    with pytest.raises(AssertionError, match="livenessProbes"):
        validate_core(dep)


@needs_kubectl
@pytest.mark.parametrize("overlay", ["shared-cache/base", "shared-cache/overlays/tls"])
def test_user_overlay_with_generated_secrets(tmp_path, overlay):
    """The README's recipe (base + secretGenerator from local files) renders and
    validates, the servers mount those Secrets, and no secret value leaks into
    any other object."""
    tls = overlay.endswith("tls")
    path, values = make_user_overlay(tmp_path, overlay, tls=tls)
    objs = _render_path(path)
    for o in objs:
        if group_of(o) in CORE_GROUPS:
            validate_core(o)
    auth = one(objs, "Secret", "icefloe-auth")
    assert base64.b64decode(auth["data"]["token"]).decode().strip() == values["token"]
    for o in objs:
        if o["kind"] == "Secret":
            continue
        text = json.dumps(o)
        for key, value in values.items():
            assert value not in text, f"{key} leaks into {o['kind']}/{o['metadata']['name']}"
    wanted = {"icefloe-auth"} | ({"icefloe-tls"} if tls else set())
    for _, tpl in (t for o in objs for t in pod_templates(o)):
        mounted = {
            v["secret"]["secretName"] for v in tpl["spec"].get("volumes", []) if "secret" in v
        }
        assert mounted == wanted
    if tls:
        assert one(objs, "Secret", "icefloe-tls")["type"] == "kubernetes.io/tls"
        config = one(objs, "ConfigMap")
        assert config["data"]["ICEFLOE_HEAD"].startswith("grpc+tls://")


# --------------------------------------------------------------------------- container policy

# Pod templates of icefloe's own servers (the Kubeflow runtime and the example
# TrainJob hold Kubeflow's and the user's containers, not ours).
SERVER_TREES = ["shared-cache/base", "shared-cache/overlays/tls", "lws"]


@needs_kubectl
@pytest.mark.parametrize("rel", SERVER_TREES)
def test_server_pods_are_hardened(rel):
    templates = all_pod_templates(rel)
    assert templates
    for where, tpl in templates:
        spec = tpl["spec"]
        pod_sc = spec.get("securityContext", {})
        assert spec.get("automountServiceAccountToken") is False, f"{where}: API token mounted"
        assert spec.get("serviceAccountName"), f"{where}: runs as the default ServiceAccount"
        assert not spec.get("hostNetwork") and not spec.get("hostPID") and not spec.get("hostIPC")
        assert pod_sc.get("runAsNonRoot") is True and pod_sc.get("runAsUser") == 1000, where
        assert pod_sc.get("seccompProfile", {}).get("type") == "RuntimeDefault", where
        tmp_volumes = {v["name"] for v in spec.get("volumes", []) if "emptyDir" in v}
        for c in spec.get("initContainers", []) + spec["containers"]:
            cw = f"{where}/{c['name']}"
            sc = c.get("securityContext", {})
            assert sc.get("runAsNonRoot", pod_sc.get("runAsNonRoot")) is True, cw
            assert sc.get("runAsUser", pod_sc.get("runAsUser")) == 1000, cw
            assert sc.get("allowPrivilegeEscalation") is False, cw
            assert sc.get("readOnlyRootFilesystem") is True, cw
            assert "ALL" in sc.get("capabilities", {}).get("drop", []), cw
            assert not sc.get("capabilities", {}).get("add"), cw
            assert not sc.get("privileged"), cw
            seccomp = sc.get("seccompProfile", pod_sc.get("seccompProfile", {}))
            assert seccomp.get("type") == "RuntimeDefault", cw
            res = c.get("resources", {})
            for part in ("requests", "limits"):
                assert {"cpu", "memory"} <= set(res.get(part, {})), f"{cw}: no {part}"
            assert parse_quantity(res["requests"]["memory"]) <= parse_quantity(
                res["limits"]["memory"]
            )
            assert parse_quantity(res["requests"]["cpu"]) <= parse_quantity(res["limits"]["cpu"])
            assert c["image"] == IMAGE, cw
            ports = {p["name"]: p["containerPort"] for p in c.get("ports", [])}
            assert ports.get("grpc") == GRPC_PORT and ports.get("health") == HEALTH_PORT, cw
            for probe, path in (("readinessProbe", "/ready"), ("livenessProbe", "/healthz")):
                get = c.get(probe, {}).get("httpGet", {})
                assert get.get("path") == path, f"{cw}: {probe} is not GET {path}"
                assert get.get("port") in ("health", HEALTH_PORT), f"{cw}: {probe} port"
            tmp = [m for m in c.get("volumeMounts", []) if m["mountPath"] == "/tmp"]
            assert tmp and tmp[0]["name"] in tmp_volumes, f"{cw}: /tmp is not an emptyDir"


def containers_anywhere(obj: Any) -> Iterator[dict[str, Any]]:
    """Every container-like dict (one with a name and an image, env, command or
    args) anywhere in an object: pod templates, runtimes, TrainJob trainers."""
    if isinstance(obj, dict):
        if any(k in obj for k in ("image", "env", "envFrom", "command", "args")):
            yield obj
        for v in obj.values():
            yield from containers_anywhere(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from containers_anywhere(v)


SECRET_NAME = re.compile(r"TOKEN|SECRET|PASSWORD|CREDENTIAL|PRIVATE|_KEY")


@needs_kubectl
@pytest.mark.parametrize("rel", KUSTOMIZATIONS)
def test_no_secret_values_in_the_tree(rel):
    """Credentials are never committed, never in args, never in env literals:
    servers read the token and cluster secret from mounted files."""
    for o in render(rel):
        where = f"{rel}: {o['kind']}/{o['metadata']['name']}"
        assert o["kind"] != "Secret", f"{where}: the tree must not ship credentials"
        for c in containers_anywhere(o):
            for arg in c.get("command", []) + c.get("args", []):
                assert not re.search(r"--(token|cluster-secret|password)(=|\s|$)", arg), arg
            for e in c.get("env", []):
                assert not SECRET_NAME.search(e["name"]), f"{where}: {e['name']} in env"
            for src in c.get("envFrom", []):
                assert "secretRef" not in src, f"{where}: envFrom a Secret"
        if o["kind"] == "ConfigMap":
            for key in o.get("data", {}):
                assert not SECRET_NAME.search(key), f"{where}: {key} in a ConfigMap"


@needs_kubectl
@pytest.mark.parametrize("rel", ["shared-cache/base", "shared-cache/overlays/tls"])
def test_secrets_mounted_as_files_and_passed_by_path(rel):
    for where, tpl in all_pod_templates(rel):
        volumes = {v["name"]: v for v in tpl["spec"]["volumes"]}
        auth = volumes["auth"]["secret"]
        assert auth["secretName"] == "icefloe-auth"
        assert auth.get("defaultMode", 0o644) & 0o007 == 0, f"{where}: secret files world-readable"
        assert tpl["spec"]["securityContext"].get("fsGroup") == 1000, (
            f"{where}: uid 1000 cannot read"
        )
        c = tpl["spec"]["containers"][0]
        mounts = {m["name"]: m for m in c["volumeMounts"]}
        assert mounts["auth"]["readOnly"] is True
        args = c["args"]
        base = mounts["auth"]["mountPath"]
        assert f"--token-file={base}/token" in args, where
        assert f"--cluster-secret-file={base}/cluster-secret" in args, where
        if rel.endswith("tls"):
            tls = mounts["tls"]["mountPath"]
            for flag, key in (
                ("tls-cert", "tls.crt"),
                ("tls-key", "tls.key"),
                ("tls-root-certs", "ca.crt"),
            ):
                assert f"--{flag}={tls}/{key}" in args, where


def memory_limit_flag(c: dict[str, Any]) -> str | None:
    args = c.get("command", []) + c.get("args", [])
    for i, a in enumerate(args):
        if a.startswith("--memory-limit="):
            return a.split("=", 1)[1]
        if a == "--memory-limit":
            return args[i + 1]
    env = env_of(c).get("ICEFLOE_MEMORY_LIMIT")
    return env["value"] if env else None


@needs_kubectl
@pytest.mark.parametrize("rel", SERVER_TREES)
def test_node_memory_limit_leaves_headroom(rel):
    """Every data node caps its cache at <= 80% of its container memory limit."""
    nodes = [
        (w, c)
        for w, tpl in all_pod_templates(rel)
        for c in tpl["spec"]["containers"]
        if tpl["metadata"]["labels"].get("app.kubernetes.io/component") == "node"
    ]
    assert nodes, f"{rel}: no data node pod template"
    for where, c in nodes:
        flag = memory_limit_flag(c)
        assert flag, f"{where}: data node without --memory-limit / ICEFLOE_MEMORY_LIMIT"
        container = parse_quantity(c["resources"]["limits"]["memory"])
        assert parse_quantity(flag) <= MEMORY_HEADROOM * container, (
            f"{where}: --memory-limit {flag} exceeds {MEMORY_HEADROOM:.0%} of "
            f"{c['resources']['limits']['memory']}"
        )
        assert c["resources"]["requests"]["memory"] == c["resources"]["limits"]["memory"], (
            f"{where}: cache nodes must not be memory-overcommitted"
        )


def test_quantity_parser():
    assert parse_quantity("8Gi") == 8 * 2**30
    assert parse_quantity("6GiB") == 6 * 2**30
    assert parse_quantity("500m") == 0.5
    assert parse_quantity("2") == 2
    assert parse_quantity("1.5G") == 1.5e9


# --------------------------------------------------------------------------- shared cache wiring


@needs_kubectl
@pytest.mark.parametrize("rel", ["shared-cache/base", "shared-cache/overlays/tls"])
def test_shared_cache_topology(rel):
    objs = render(rel)
    head = one(objs, "Deployment", "icefloe-head")
    nodes = one(objs, "StatefulSet", "icefloe-node")
    assert head["spec"]["replicas"] == 1 and head["spec"]["strategy"]["type"] == "Recreate"
    head_labels = head["spec"]["template"]["metadata"]["labels"]
    node_labels = nodes["spec"]["template"]["metadata"]["labels"]
    assert selector_matches(head["spec"]["selector"]["matchLabels"], head_labels)
    assert selector_matches(nodes["spec"]["selector"]["matchLabels"], node_labels)
    assert not selector_matches(head["spec"]["selector"]["matchLabels"], node_labels)

    # Clients dial the ClusterIP Service icefloe-head on 50051 (port name grpc).
    svc = one(objs, "Service", "icefloe-head")
    assert svc["spec"].get("type", "ClusterIP") == "ClusterIP"
    assert svc["spec"].get("clusterIP") != "None"
    assert selector_matches(svc["spec"]["selector"], head_labels)
    assert not selector_matches(svc["spec"]["selector"], node_labels)
    assert {"name": "grpc", "port": GRPC_PORT} in [
        {"name": p.get("name"), "port": p["port"]} for p in svc["spec"]["ports"]
    ]

    # Nodes: headless Service named as the StatefulSet's serviceName, publishing
    # not-ready pods; each node advertises its stable DNS name.
    headless = one(objs, "Service", nodes["spec"]["serviceName"])
    assert headless["metadata"]["name"] == "icefloe-node"
    assert headless["spec"]["clusterIP"] == "None"
    assert headless["spec"].get("publishNotReadyAddresses") is True
    assert selector_matches(headless["spec"]["selector"], node_labels)
    c = nodes["spec"]["template"]["spec"]["containers"][0]
    assert c["command"] == ["icefloe-node"]
    env = c["env"]
    names = [e["name"] for e in env]
    adv = env_of(c)["ICEFLOE_ADVERTISE_HOST"]["value"]
    assert adv == "$(POD_NAME).icefloe-node.$(POD_NAMESPACE).svc"
    for var, field in (("POD_NAME", "metadata.name"), ("POD_NAMESPACE", "metadata.namespace")):
        assert env_of(c)[var]["valueFrom"]["fieldRef"]["fieldPath"] == field
        assert names.index(var) < names.index("ICEFLOE_ADVERTISE_HOST"), "defined too late"

    # Nodes register with the head through a Service that selects the head and
    # resolves before the head is ready (the head is ready only after that).
    assert one(objs, "Deployment", "icefloe-head")["spec"]["template"]["spec"]["containers"][0][
        "command"
    ] == ["icefloe-head"]
    config = one(objs, "ConfigMap")
    assert c["envFrom"] == [{"configMapRef": {"name": config["metadata"]["name"]}}]
    m = re.fullmatch(r"grpc(\+tls)?://([a-z0-9-]+):(\d+)", config["data"]["ICEFLOE_HEAD"])
    assert m and int(m.group(3)) == GRPC_PORT
    reg = one(objs, "Service", m.group(2))
    assert selector_matches(reg["spec"]["selector"], head_labels)
    assert reg["spec"].get("publishNotReadyAddresses") is True
    assert bool(m.group(1)) == rel.endswith("tls")


@needs_kubectl
def test_shared_cache_disruption_budgets():
    objs = render("shared-cache/base")
    pdbs = find(objs, "PodDisruptionBudget")
    for name in ("icefloe-head", "icefloe-node"):
        kind = "Deployment" if name.endswith("head") else "StatefulSet"
        labels = one(objs, kind, name)["spec"]["template"]["metadata"]["labels"]
        covering = [
            p for p in pdbs if selector_matches(p["spec"]["selector"]["matchLabels"], labels)
        ]
        assert len(covering) == 1, f"{name}: {len(covering)} PDBs"
    node_pdb = one(objs, "PodDisruptionBudget", "icefloe-node")
    assert node_pdb["spec"]["maxUnavailable"] == 1


@needs_kubectl
def test_shared_cache_service_account_has_no_api_access():
    objs = render("shared-cache/base")
    sa = one(objs, "ServiceAccount")
    assert sa["automountServiceAccountToken"] is False
    for _, tpl in all_pod_templates("shared-cache/base"):
        assert tpl["spec"]["serviceAccountName"] == sa["metadata"]["name"]
    for kind in ("Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding"):
        assert not find(objs, kind), f"the servers need no {kind}"


def policy_peers(policy: dict[str, Any], port: int) -> list[dict[str, Any]]:
    peers = []
    for rule in policy["spec"].get("ingress", []):
        if any(p.get("port") == port for p in rule.get("ports", [])):
            assert rule.get("from"), "a rule without `from` admits everyone"
            peers += rule["from"]
    return peers


def peer_admits(
    peer: dict[str, Any], pod_labels: dict[str, str], same_ns: bool, ns_labels: dict[str, str]
) -> bool:
    """NetworkPolicy peer semantics (matchLabels only; ipBlock peers admit no pod
    here): a namespaceSelector peer matches pods in any namespace whose labels it
    selects, a podSelector-only peer pods of the policy's own namespace."""
    for sel in (peer.get("podSelector", {}), peer.get("namespaceSelector", {})):
        assert set(sel) <= {"matchLabels"}, f"unsupported selector {sel}"
    pod_ok = selector_matches(peer.get("podSelector", {}).get("matchLabels", {}), pod_labels)
    if "namespaceSelector" in peer:
        return pod_ok and selector_matches(
            peer["namespaceSelector"].get("matchLabels", {}), ns_labels
        )
    return same_ns and "podSelector" in peer and pod_ok


def admitted(policy, port, labels, same_ns=True, ns_labels=None) -> bool:
    """Whether `policy` lets a pod with `labels` in on `port`."""
    return any(peer_admits(p, labels, same_ns, ns_labels or {}) for p in policy_peers(policy, port))


@needs_kubectl
@pytest.mark.parametrize("rel", ["shared-cache/base", "shared-cache/overlays/tls"])
def test_shared_cache_network_policy(rel):
    objs = render(rel)
    policies = find(objs, "NetworkPolicy")
    head_labels = one(objs, "Deployment")["spec"]["template"]["metadata"]["labels"]
    node_labels = one(objs, "StatefulSet")["spec"]["template"]["metadata"]["labels"]

    def policy_for(labels):
        found = [
            p
            for p in policies
            if selector_matches(p["spec"]["podSelector"].get("matchLabels", {}), labels)
        ]
        assert len(found) == 1
        assert found[0]["spec"]["policyTypes"] == ["Ingress"]
        return found[0]

    node_policy, head_policy = policy_for(node_labels), policy_for(head_labels)
    client = {"icefloe.io/client": "true"}
    admin = {"icefloe.io/admin": "true"}
    stranger = {"app": "something-else"}

    # Data nodes: the head and training pods only.
    assert admitted(node_policy, GRPC_PORT, head_labels)
    assert admitted(node_policy, GRPC_PORT, client)
    assert admitted(node_policy, GRPC_PORT, client, same_ns=False, ns_labels=client)
    assert not admitted(node_policy, GRPC_PORT, client, same_ns=False, ns_labels=stranger)
    assert not admitted(node_policy, GRPC_PORT, stranger)
    assert not admitted(node_policy, GRPC_PORT, admin)
    assert not admitted(node_policy, GRPC_PORT, node_labels)
    # Head: nodes, training pods and admin tools.
    for labels in (node_labels, client, admin):
        assert admitted(head_policy, GRPC_PORT, labels)
    assert not admitted(head_policy, GRPC_PORT, stranger)
    # Metrics: from the Prometheus namespace.
    prom = {"icefloe.io/prometheus": "true"}
    for policy in (node_policy, head_policy):
        assert admitted(policy, HEALTH_PORT, {}, same_ns=False, ns_labels=prom)
        assert not admitted(policy, HEALTH_PORT, stranger, same_ns=False, ns_labels=stranger)
        ports = {p["port"] for r in policy["spec"]["ingress"] for p in r["ports"]}
        assert ports == {GRPC_PORT, HEALTH_PORT}


# --------------------------------------------------------------------------- LeaderWorkerSet


@needs_kubectl
def test_lws_is_a_kubeflow_style_cache():
    objs = render("lws")
    lws = one(objs, "LeaderWorkerSet")
    name = lws["metadata"]["name"]
    spec = lws["spec"]
    lwt = spec["leaderWorkerTemplate"]
    assert spec["replicas"] == 1 and lwt["size"] >= 2  # head + at least one data node
    assert spec.get("startupPolicy", "LeaderCreated") == "LeaderCreated"
    leader = lwt["leaderTemplate"]["spec"]["containers"][0]
    worker = lwt["workerTemplate"]["spec"]["containers"][0]
    assert (leader["name"], leader["command"], leader["args"]) == (
        "head",
        ["head"],
        ["0.0.0.0", "50051"],
    )
    assert (worker["name"], worker["command"], worker["args"]) == (
        "worker",
        ["worker"],
        ["0.0.0.0", "50051"],
    )
    config = one(objs, "ConfigMap")
    assert {"METADATA_LOC", "SCHEMA_NAME", "TABLE_NAME"} <= set(config["data"])
    assert re.match(r"(s3a?|file)://|/", config["data"]["METADATA_LOC"])
    for c in (leader, worker):
        assert c["envFrom"] == [{"configMapRef": {"name": config["metadata"]["name"]}}]
        # LWS sets these itself.
        assert not {"LWS_LEADER_ADDRESS", "LWS_GROUP_SIZE"} & set(env_of(c))

    svc = one(objs, "Service", f"{name}-service")
    leader_labels = lwt["leaderTemplate"]["metadata"]["labels"]
    worker_labels = lwt["workerTemplate"]["metadata"].get("labels", {})
    assert svc["spec"]["selector"] == {"app": f"{name}-head"}
    assert selector_matches(svc["spec"]["selector"], leader_labels)
    assert not selector_matches(svc["spec"]["selector"], worker_labels)
    assert [(p["port"], p.get("targetPort")) for p in svc["spec"]["ports"]] == [
        (GRPC_PORT, GRPC_PORT)
    ]

    # The NetworkPolicy selects every pod of the group (LWS labels them all
    # with leaderworkerset.sigs.k8s.io/name) and lets the group talk to itself.
    group = {"leaderworkerset.sigs.k8s.io/name": name}
    policy = one(objs, "NetworkPolicy")
    assert policy["spec"]["podSelector"]["matchLabels"] == group
    peers = policy_peers(policy, GRPC_PORT)
    assert any(peer_admits(p, {**group, **leader_labels}, True, {}) for p in peers)
    assert any(peer_admits(p, {"icefloe.io/client": "true"}, True, {}) for p in peers)
    assert not any(peer_admits(p, {"app": "other"}, True, {}) for p in peers)

    sa = one(objs, "ServiceAccount")
    assert sa["automountServiceAccountToken"] is False
    for tpl in (lwt["leaderTemplate"], lwt["workerTemplate"]):
        assert tpl["spec"]["serviceAccountName"] == sa["metadata"]["name"]


# --------------------------------------------------------------------------- Kubeflow


def _original_runtime() -> dict[str, Any]:
    return yaml.safe_load((CRD_DIR / ORIGINAL_RUNTIME).read_text())


def _cache_image_env(runtime: dict[str, Any]) -> dict[str, Any]:
    for job in runtime["spec"]["template"]["spec"]["replicatedJobs"]:
        if job["name"] == "dataset-initializer":
            c = job["template"]["spec"]["template"]["spec"]["containers"][0]
            return env_of(c)["CACHE_IMAGE"]
    raise AssertionError("no dataset-initializer job")


@needs_kubectl
@needs_crds
def test_kubeflow_runtime_is_kubeflows_with_our_cache_image():
    runtime = one(render("kubeflow"), "ClusterTrainingRuntime", "torch-distributed-with-cache")
    assert _cache_image_env(runtime)["value"] == IMAGE
    expected = _original_runtime()
    assert _cache_image_env(expected)["value"] != IMAGE
    _cache_image_env(expected)["value"] = IMAGE
    assert runtime == expected


@needs_kubectl
def test_kubeflow_initializer_rbac_is_least_privilege():
    objs = render("kubeflow")
    runtime = one(objs, "ClusterTrainingRuntime")
    init = next(
        j
        for j in runtime["spec"]["template"]["spec"]["replicatedJobs"]
        if j["name"] == "dataset-initializer"
    )
    sa_name = init["template"]["spec"]["template"]["spec"]["serviceAccountName"]
    sa = one(objs, "ServiceAccount", sa_name)
    role = one(objs, "Role")
    binding = one(objs, "RoleBinding")
    assert not find(objs, "ClusterRole") and not find(objs, "ClusterRoleBinding")
    ns = sa["metadata"]["namespace"]
    assert role["metadata"]["namespace"] == binding["metadata"]["namespace"] == ns
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "Role",
        "name": role["metadata"]["name"],
    }
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": sa_name, "namespace": ns}]
    allowed = {
        ("leaderworkerset.x-k8s.io", "leaderworkersets"): {"create", "get", "list", "watch"},
        ("", "services"): {"create", "get"},
        ("", "serviceaccounts"): {"create", "delete", "get"},
        ("trainer.kubeflow.org", "trainjobs"): {"get"},
        ("trainer.kubeflow.org", "trainjobs/finalizers"): {"update"},
    }
    granted: dict[tuple[str, str], set[str]] = {}
    for rule in role["rules"]:
        assert "resourceNames" not in rule or rule["resourceNames"]
        for g in rule["apiGroups"]:
            for r in rule["resources"]:
                assert "*" not in (g, r) and "*" not in rule["verbs"], rule
                granted.setdefault((g, r), set()).update(rule["verbs"])
    for key, verbs in granted.items():
        assert key in allowed and verbs <= allowed[key], f"{key}: {verbs} is more than needed"
    # What the initializer cannot work without.
    for resource, verb in (
        ("leaderworkersets", "create"),
        ("services", "create"),
        ("serviceaccounts", "create"),
        ("trainjobs", "get"),
    ):
        assert any(r == resource and verb in v for (_, r), v in granted.items()), (resource, verb)


@needs_kubectl
def test_kubeflow_namespace_rbac_is_reusable_in_other_namespaces(tmp_path):
    (tmp_path / "kustomization.yaml").write_text(
        yaml.safe_dump(
            {
                "apiVersion": "kustomize.config.k8s.io/v1beta1",
                "kind": "Kustomization",
                "namespace": "team-a",
                "resources": [os.path.relpath(K8S / "kubeflow" / "namespace-rbac", tmp_path)],
            }
        )
    )
    objs = _render_path(tmp_path)
    assert {o["metadata"]["namespace"] for o in objs} == {"team-a"}
    assert {o["kind"] for o in objs} == {"ServiceAccount", "Role", "RoleBinding"}


@needs_kubectl
def test_example_trainjob_uses_the_runtime_and_the_cache():
    job = one(render("kubeflow/example"), "TrainJob")
    runtime = one(render("kubeflow"), "ClusterTrainingRuntime")
    ref = job["spec"]["runtimeRef"]
    assert ref["name"] == runtime["metadata"]["name"]
    assert ref.get("kind", "ClusterTrainingRuntime") == "ClusterTrainingRuntime"

    ds = job["spec"]["initializer"]["dataset"]
    m = re.fullmatch(r"cache://([A-Za-z0-9_]+)/([A-Za-z0-9_]+)", ds["storageUri"])
    assert m, "storageUri must be cache://<schema>/<table>"
    env = {e["name"]: e["value"] for e in ds["env"]}
    assert set(env) <= INITIALIZER_ENV, (
        f"the initializer does not read {set(env) - INITIALIZER_ENV}"
    )
    assert {"CLUSTER_SIZE", "METADATA_LOC"} <= set(env)
    assert int(env["CLUSTER_SIZE"]) >= 2  # head + at least one data node
    assert re.match(r"s3a?://.+\.metadata\.json$", env["METADATA_LOC"])
    for key in ("HEAD_MEM", "WORKER_MEM", "HEAD_CPU", "WORKER_CPU"):
        parse_quantity(env[key])

    trainer = job["spec"]["trainer"]
    script = "\n".join(trainer.get("command", []) + trainer.get("args", []))
    assert "grpc://$(TRAIN_JOB_NAME)-cache-service:50051" in trainer["args"]
    assert "from icefloe.torch import CacheDataset" in script
    # The dataset name icefloe gives a Kubeflow-loaded table.
    assert env_of(trainer)["ICEFLOE_DATASET"]["value"] == f"{m.group(1)}.{m.group(2)}"
    # TRAIN_JOB_NAME comes from the runtime's trainer container.
    node_job = next(
        j for j in runtime["spec"]["template"]["spec"]["replicatedJobs"] if j["name"] == "node"
    )
    node = node_job["template"]["spec"]["template"]["spec"]["containers"][0]
    assert "TRAIN_JOB_NAME" in env_of(node)


@needs_kubectl
def test_shared_cache_examples_reach_the_cache_with_only_the_token():
    """The example load and training Jobs carry the labels the NetworkPolicies
    admit, dial the head Service, and mount the token but not the cluster
    secret."""
    base = render("shared-cache/base")
    svc = one(base, "Service", "icefloe-head")
    head_url = f"grpc://{svc['metadata']['name']}:{GRPC_PORT}"
    head_policy = one(base, "NetworkPolicy", "icefloe-head")
    node_policy = one(base, "NetworkPolicy", "icefloe-node")
    jobs = {j["metadata"]["name"]: j for j in find(render("shared-cache/examples"), "Job")}
    load = jobs["icefloe-load-transactions"]["spec"]["template"]
    train = jobs["icefloe-train-example"]["spec"]["template"]
    assert admitted(head_policy, GRPC_PORT, load["metadata"]["labels"])
    assert not admitted(node_policy, GRPC_PORT, load["metadata"]["labels"])
    for tpl in (load, train):
        c = tpl["spec"]["containers"][0]
        assert any(head_url in part for part in c["command"] + c.get("args", []))
        secret_volumes = [v["secret"] for v in tpl["spec"]["volumes"] if "secret" in v]
        assert secret_volumes == [
            {
                "secretName": "icefloe-auth",
                "defaultMode": 0o440,
                "items": [{"key": "token", "path": "token"}],
            }
        ]
    for policy in (head_policy, node_policy):
        assert admitted(policy, GRPC_PORT, train["metadata"]["labels"])
    assert "icefloe.torch import CacheDataset" in "".join(train["spec"]["containers"][0]["command"])


@needs_kubectl
@needs_crds
def test_documented_cache_image_patch_turns_kubeflows_runtime_into_ours():
    """docs/kubernetes.md tells Kubeflow users to `kubectl patch` one JSON
    pointer; applied to Kubeflow's runtime it must give exactly ours."""
    doc = (ROOT / "docs" / "kubernetes.md").read_text()
    m = re.search(r'"path": "(/spec/[^"]+)",\s*"value": "([^"]+)"', doc)
    assert m, "the CACHE_IMAGE patch is missing from docs/kubernetes.md"
    pointer, value = m.groups()
    assert value == IMAGE
    runtime = _original_runtime()
    *parents, last = pointer.lstrip("/").split("/")
    node: Any = runtime
    for part in parents:
        node = node[int(part)] if isinstance(node, list) else node[part]
    assert last in node, f"{pointer} does not exist in Kubeflow's runtime"
    node[last] = value
    assert runtime == one(render("kubeflow"), "ClusterTrainingRuntime")
