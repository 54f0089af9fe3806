"""The container image, run the way a Kubernetes cluster runs it.

deploy/image/build.sh builds the OCI image (cached while the binaries are
unchanged); its root filesystem is unpacked with umoci and every "pod" runs from
it: its own network namespace (veth to a bridge in a hub namespace, subnet
10.200.0.0/24, which exists only inside these namespaces), its own mount
namespace with the image read-only, /proc, /sys, a minimal /dev, a tmpfs /tmp,
/etc/hosts from /etc/netns/<ns>/hosts (the LWS DNS names), the table and the
secrets mounted read-only, and the process chrooted as uid 1000 starting
`head` / `worker` from the image's PATH with LeaderWorkerSet's environment. A
training client in another namespace reads through the head's Service name,
once in plain gRPC and once with TLS and a token.

Needs root (debootstrap, chroot, namespaces); CI runs it as root.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from iceberg_util import Warehouse

from icefloe._bin import bin_path

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

ROOT = Path(__file__).resolve().parents[1]
BUILD_SH = ROOT / "deploy" / "image" / "build.sh"
CLIENT = Path(__file__).resolve().parent / "image_client.py"
ROWS = 3000
NAMESPACE = "job-cache.ns"  # LWS: <group>-<i>.<headless service>.<namespace>
LEADER = f"job-cache-0.{NAMESPACE}"
SERVICE = "job-cache-service"
SUBNET = "10.200.0"
SERVICE_IP = f"{SUBNET}.250"  # stands in for the Service's ClusterIP, on the head
CLIENT_IP = f"{SUBNET}.100"
WORKERS = 2
# (world_size, dataloader workers): 1 to 20 consumers, none past the last row.
COMBOS = [(1, 1), (1, 3), (2, 2), (3, 2), (4, 3), (5, 4)]
SECURE_ARGS = ["--token-file=/etc/icefloe/auth/token",
               "--cluster-secret-file=/etc/icefloe/auth/cluster-secret",
               "--tls-cert=/etc/icefloe/tls/tls.crt", "--tls-key=/etc/icefloe/tls/tls.key",
               "--tls-root-certs=/etc/icefloe/tls/ca.crt"]

# A pod: private mounts over the shared, unpacked image (ip netns exec has
# already given us a mount namespace and bound /etc/netns/<ns>/hosts on
# /etc/hosts), then the container process as uid 1000.
POD_SH = r"""
set -eu
R=$1; USERSPEC=$2; DATA=$3; SECRETS=$4; shift 4
mount --bind "$R" "$R"
mount -t proc proc "$R/proc"
mount -t sysfs -o ro sysfs "$R/sys"
mount -t tmpfs -o mode=755,size=1m tmpfs "$R/dev"
for d in null zero full random urandom; do : >"$R/dev/$d"; mount --bind "/dev/$d" "$R/dev/$d"; done
mount -t tmpfs -o mode=1777,size=64m tmpfs "$R/tmp"
mount --bind /etc/hosts "$R/etc/hosts"
mkdir -p "$R$DATA"
mount --bind -o ro "$DATA" "$R$DATA"
if [ -n "$SECRETS" ]; then mount --bind -o ro "$SECRETS" "$R/etc/icefloe"; fi
mount -o remount,bind,ro "$R"
exec chroot --userspec="$USERSPEC" "$R" "$@"
"""


def _problem() -> str | None:
    if os.geteuid() != 0:
        return ("needs root: builds the image with debootstrap and chroot and runs it in "
                "network namespaces (CI runs it as root)")
    missing = [t for t in ("debootstrap", "umoci", "ip", "chroot", "unshare", "mount", "openssl")
               if shutil.which(t) is None]
    if missing:
        return f"missing {', '.join(missing)} (./dev.sh setup installs them)"
    return None


@dataclass
class Image:
    rootfs: Path
    config: dict  # the OCI image config's "config": User, Env, ExposedPorts, Cmd, ...

    @property
    def env(self) -> dict[str, str]:
        return dict(e.split("=", 1) for e in self.config.get("Env", []))


def _image_config(layout: Path, tag: str) -> dict:
    def blob(descriptor: dict) -> dict:
        return json.loads((layout / "blobs" / descriptor["digest"].replace(":", "/")).read_bytes())

    index = json.loads((layout / "index.json").read_text())
    [manifest] = [m for m in index["manifests"]
                  if m["annotations"]["org.opencontainers.image.ref.name"] == tag]
    return blob(blob(manifest)["config"])["config"]


@pytest.fixture(scope="module")
def image(tmp_path_factory):
    """The image's root filesystem, unpacked from the OCI layout build.sh made."""
    if problem := _problem():
        pytest.skip(problem)
    probe = f"ifprobe{os.getpid()}"
    if subprocess.run(["ip", "netns", "add", probe], capture_output=True).returncode != 0:
        pytest.skip("cannot create network namespaces here (needs CAP_SYS_ADMIN, CAP_NET_ADMIN)")
    subprocess.run(["ip", "netns", "del", probe], check=True)

    started = time.monotonic()
    env = {**os.environ, "PYTHON": sys.executable}
    build = subprocess.run([str(BUILD_SH), "--bin-dir", str(Path(bin_path("icefloe-head")).parent)],
                           env=env, capture_output=True, text=True, timeout=840)
    assert build.returncode == 0, f"build.sh failed:\n{build.stdout}\n{build.stderr}"
    build_s = time.monotonic() - started
    info = json.loads((ROOT / "build" / "image" / "icefloe.json").read_text())
    layout, tag = info["image"].rsplit(":", 1)
    config = _image_config(Path(layout), tag)
    # What Kubernetes relies on: runAsUser 1000 matches, `command: [head]` is
    # looked up on PATH (ahead of coreutils' head), no ENTRYPOINT to prepend.
    assert config["User"] == "1000:1000"
    assert "Entrypoint" not in config
    assert {"50051/tcp", "8080/tcp"} <= set(config["ExposedPorts"])
    path = Image(Path(), config).env["PATH"].split(":")
    assert path.index("/usr/local/bin") < path.index("/usr/bin"), path

    rootfs = tmp_path_factory.mktemp("image") / "rootfs"
    subprocess.run(["umoci", "raw", "unpack", "--image", info["image"], str(rootfs)], check=True,
                   capture_output=True)
    # Mount points the runtime provides: /etc/hosts, the secrets volume.
    (rootfs / "etc" / "hosts").touch()
    (rootfs / "etc" / "icefloe").mkdir(exist_ok=True)
    print(f"\nimage {info['image']}: built in {build_s:.1f}s, "
          f"{info['compressed_bytes'] / 2**20:.1f} MiB compressed, "
          f"{info['unpacked_bytes'] / 2**20:.1f} MiB unpacked; "
          f"unpacked in {time.monotonic() - started - build_s:.1f}s")
    yield Image(rootfs, config)
    shutil.rmtree(rootfs, ignore_errors=True)


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    """An Iceberg table in six data files; world-readable, as uid 1000 reads it."""
    root = tmp_path_factory.mktemp("image-data")
    wh = Warehouse(root / "wh")
    ids = np.arange(ROWS, dtype=np.int64)
    step = ROWS // 6
    t = wh.create("t", pa.table({"id": ids[:step], "v": ids[:step] * 2.0}))
    for start in range(step, ROWS, step):
        t.append(pa.table({"id": ids[start:start + step], "v": ids[start:start + step] * 2.0}))
    for d, _, files in os.walk(root):
        os.chmod(d, 0o755)
        for f in files:
            os.chmod(os.path.join(d, f), 0o644)
    return root, t.metadata_location


class Cluster:
    """Network namespaces for a head, its workers and a client, on one bridge."""

    def __init__(self, image: Image, data: Path, workdir: Path, tag: str,
                 secrets_dir: Path | None = None) -> None:
        self.image, self.data, self.workdir, self.secrets = image, data, workdir, secrets_dir
        prefix = f"if{tag}{os.getpid() % 100000}"
        self.hub = f"{prefix}-hub"
        self.ns = {"head": f"{prefix}-h", "client": f"{prefix}-c"}
        self.ns.update({f"worker-{i}": f"{prefix}-w{i}" for i in range(1, WORKERS + 1)})
        self.ip = {"head": f"{SUBNET}.10", "client": CLIENT_IP}
        self.ip.update({f"worker-{i}": f"{SUBNET}.{10 + i}" for i in range(1, WORKERS + 1)})
        self.procs: dict[str, subprocess.Popen] = {}
        self.created: list[str] = []

    def host(self, pod: str) -> str:
        return LEADER if pod == "head" else f"job-cache-0-{pod.split('-')[1]}.{NAMESPACE}"

    def __enter__(self) -> Cluster:
        try:
            self._create()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _create(self) -> None:
        hosts = ["127.0.0.1 localhost", f"{SERVICE_IP} {SERVICE}"]
        hosts += [f"{self.ip[p]} {self.host(p)}" for p in self.ns if p != "client"]
        self._netns(self.hub)
        ip = ["ip", "-n", self.hub, "link"]
        _run(ip + ["add", "br0", "type", "bridge"])
        _run(ip + ["set", "br0", "up"])
        for pod, ns in self.ns.items():
            self._netns(ns)
            etc = Path("/etc/netns") / ns
            etc.mkdir(parents=True, exist_ok=True)
            (etc / "hosts").write_text("\n".join(hosts) + "\n")
            # The hub end is named like the pod's namespace; the pod's end is eth0.
            _run(ip + ["add", ns, "type", "veth", "peer", "name", "eth0", "netns", ns])
            _run(ip + ["set", ns, "master", "br0", "up"])
            _run(["ip", "-n", ns, "addr", "add", f"{self.ip[pod]}/24", "dev", "eth0"])
            if pod == "head":
                _run(["ip", "-n", ns, "addr", "add", f"{SERVICE_IP}/24", "dev", "eth0"])
            _run(["ip", "-n", ns, "link", "set", "eth0", "up"])
            _run(["ip", "-n", ns, "link", "set", "lo", "up"])

    def _netns(self, name: str) -> None:
        _run(["ip", "netns", "add", name])
        self.created.append(name)

    def start(self, pod: str, extra_args: list[str], metadata_loc: str) -> None:
        """`head` or `worker` with args 0.0.0.0 50051, as LWS starts the containers."""
        command = "head" if pod == "head" else "worker"
        env = {**self.image.env, "HOME": "/home/icefloe", "HOSTNAME": self.host(pod),
               "METADATA_LOC": metadata_loc, "SCHEMA_NAME": "db", "TABLE_NAME": "t",
               "LWS_LEADER_ADDRESS": LEADER, "LWS_GROUP_SIZE": str(WORKERS + 1),
               "ICEFLOE_STARTUP_TIMEOUT": "120"}
        argv = ["ip", "netns", "exec", self.ns[pod], "sh", "-c", POD_SH, "pod",
                str(self.image.rootfs), self.image.config["User"], str(self.data),
                str(self.secrets or ""), command, "0.0.0.0", "50051", *extra_args]
        # The pod's environment, also what ip, sh and chroot run with here.
        with open(self.log(pod), "wb") as log:
            self.procs[pod] = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT,
                                               stdin=subprocess.DEVNULL, start_new_session=True)

    def log(self, pod: str) -> Path:
        return self.workdir / f"{pod}.log"

    def logs(self) -> str:
        return "\n".join(f"--- {pod}\n{self.log(pod).read_text(errors='replace')[-3000:]}"
                         for pod in self.procs)

    def client(self, *args: str, timeout_s: float = 120) -> object:
        """Runs image_client.py in the client's namespace; its JSON answer."""
        argv = ["ip", "netns", "exec", self.ns["client"], sys.executable, str(CLIENT), *args]
        out = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s)
        assert out.returncode == 0, f"client {args[0]} failed:\n{out.stderr}\n{self.logs()}"
        return json.loads(out.stdout)

    def ready_urls(self, pods: list[str]) -> list[str]:
        return [f"http://{self.host(p)}:8080/ready" for p in pods]

    def wait(self, pods: list[str], timeout_s: float, want: int = 200) -> dict:
        """Polls the pods' /ready from the client until each answers `want`
        (any HTTP answer for want=0); fails early when a pod exits."""
        deadline = time.monotonic() + timeout_s
        while True:
            got = self.client("ready", *self.ready_urls(pods), "--timeout", "2")
            if all(status == want or (want == 0 and status) for status, _ in got.values()):
                return got
            dead = {p: proc.returncode for p, proc in self.procs.items() if proc.poll() is not None}
            assert not dead, f"pods exited: {dead}\n{self.logs()}"
            assert time.monotonic() < deadline, f"not ready: {got}\n{self.logs()}"

    def close(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs.values():
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
        for ns in reversed(self.created):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
            shutil.rmtree(Path("/etc/netns") / ns, ignore_errors=True)
        self.created.clear()


def _run(argv: list[str]) -> None:
    out = subprocess.run(argv, capture_output=True, text=True)
    assert out.returncode == 0, f"{' '.join(argv)}: {out.stderr}"


def _uid(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Uid:"):
            return int(line.split()[1])
    raise AssertionError(f"no Uid in /proc/{pid}/status")


def assert_every_row_once(results: list[dict], worker_locations: set[str]) -> None:
    by_combo: dict[tuple[int, int], list[dict]] = {}
    for r in results:
        by_combo.setdefault((r["world_size"], r["num_workers"]), []).append(r)
    assert sorted(by_combo) == sorted(COMBOS)
    for combo, consumers in by_combo.items():
        total = combo[0] * combo[1]
        per = -(-ROWS // total)
        seen: list[int] = []
        for c in consumers:
            assert "error" not in c, (combo, c)
            # Shards are ranges of global row ids (the head's file order), not of "id".
            first = c["index"] * per
            assert len(c["ids"]) == min(first + per, ROWS) - first, (combo, c["index"])
            assert 0 < c["max_chunk"] <= 128
            assert set(c["locations"]) <= worker_locations, c["locations"]
            seen += c["ids"]
        assert sorted(seen) == list(range(ROWS)), combo
    # The table is spread over both workers.
    assert {loc for r in results for loc in r["locations"]} == worker_locations


def test_kubeflow_group_from_the_image(image, table, tmp_path):
    data, metadata_loc = table
    started = time.monotonic()
    with Cluster(image, data, tmp_path, "p") as cluster:
        cluster.start("head", [], metadata_loc)
        # LWS starts the leader first: it answers, but is not ready without its workers.
        [(status, body)] = cluster.wait(["head"], 60, want=0).values()
        assert status == 503 and body.startswith("not ready"), (status, body)
        for i in range(1, WORKERS + 1):
            cluster.start(f"worker-{i}", [], metadata_loc)
        pods = ["head"] + [f"worker-{i}" for i in range(1, WORKERS + 1)]
        got = cluster.wait(pods, 120)
        assert all(body == "ready" for _, body in got.values()), got
        ready_s = time.monotonic() - started
        for pod, proc in cluster.procs.items():
            assert _uid(proc.pid) == 1000, pod

        results = cluster.client("read", f"grpc://{SERVICE}:50051", "--combos",
                                 ",".join(f"{w}x{n}" for w, n in COMBOS))
        locations = {f"grpc://job-cache-0-{i}.{NAMESPACE}:50051" for i in range(1, WORKERS + 1)}
        assert_every_row_once(results, locations)
    print(f"\nplain group: ready after {ready_s:.1f}s, "
          f"total {time.monotonic() - started:.1f}s with {len(results)} consumers")


@pytest.fixture()
def secrets_dir(tmp_path):
    """The Secret volumes, as Kubernetes mounts them: root-owned, group 1000, mode 0440."""
    root = tmp_path / "secrets"
    (root / "auth").mkdir(parents=True)
    (root / "tls").mkdir()
    (root / "auth" / "token").write_text(secrets.token_hex(32))
    (root / "auth" / "cluster-secret").write_text(secrets.token_hex(32))
    # One self-signed certificate naming the Service and every pod; it is also the root.
    names = [SERVICE, LEADER] + [f"job-cache-0-{i}.{NAMESPACE}" for i in range(1, WORKERS + 1)]
    tls = root / "tls"
    _run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
          "-nodes", "-days", "2", "-subj", "/CN=job-cache", "-keyout", str(tls / "tls.key"),
          "-out", str(tls / "tls.crt"),
          "-addext", "subjectAltName=" + ",".join(f"DNS:{n}" for n in names)])
    shutil.copy(tls / "tls.crt", tls / "ca.crt")
    for d, _, files in os.walk(root):
        os.chown(d, 0, 1000)
        os.chmod(d, 0o750)
        for f in files:
            os.chown(os.path.join(d, f), 0, 1000)
            os.chmod(os.path.join(d, f), 0o440)
    return root


def test_kubeflow_group_with_tls_and_token(image, table, tmp_path, secrets_dir):
    data, metadata_loc = table
    started = time.monotonic()
    with Cluster(image, data, tmp_path, "s", secrets_dir) as cluster:
        pods = ["head"] + [f"worker-{i}" for i in range(1, WORKERS + 1)]
        for pod in pods:
            cluster.start(pod, SECURE_ARGS, metadata_loc)
        cluster.wait(pods, 120)
        head = f"grpc+tls://{SERVICE}:50051"
        roots = ["--tls-roots", str(secrets_dir / "tls" / "ca.crt")]
        token = ["--token-file", str(secrets_dir / "auth" / "token")]
        locations = {f"grpc+tls://job-cache-0-{i}.{NAMESPACE}:50051"
                     for i in range(1, WORKERS + 1)}

        refused = cluster.client("refused", head, *roots, *token)
        assert "Unauthenticated" in refused.pop("GetFlightInfo")
        assert {k.split(" ", 1)[1] for k in refused} <= locations and refused
        assert all("Unauthenticated" in v for v in refused.values()), refused

        results = cluster.client("read", head, "--combos",
                                 ",".join(f"{w}x{n}" for w, n in COMBOS), *roots, *token)
        assert_every_row_once(results, locations)
    print(f"\nTLS + token group: {time.monotonic() - started:.1f}s")


def test_a_killed_worker_pod_replaced_by_an_empty_one_heals(image, table, tmp_path):
    """A worker pod SIGKILLed and started again at the same address with
    nothing in memory (what a StatefulSet does): the head, polling its static
    workers, reloads the lost slices onto it, and every consumer again reads
    every row exactly once through Kubeflow's own reading loop."""
    data, metadata_loc = table
    with Cluster(image, data, tmp_path, "k") as cluster:
        pods = ["head"] + [f"worker-{i}" for i in range(1, WORKERS + 1)]
        cluster.start("head", ["--heartbeat-timeout-ms", "1000"], metadata_loc)
        for pod in pods[1:]:
            cluster.start(pod, [], metadata_loc)
        cluster.wait(pods, 120)
        head = f"grpc://{SERVICE}:50051"
        combos = ",".join(f"{w}x{n}" for w, n in COMBOS)
        locations = {f"grpc://job-cache-0-{i}.{NAMESPACE}:50051" for i in range(1, WORKERS + 1)}
        assert_every_row_once(cluster.client("read", head, "--combos", combos), locations)

        victim = cluster.procs["worker-1"]
        os.killpg(victim.pid, signal.SIGKILL)
        victim.wait(timeout=30)
        cluster.start("worker-1", [], metadata_loc)  # the replacement pod: empty
        cluster.wait(["worker-1"], 60)
        deadline = time.monotonic() + 90
        while True:  # bounded: until the head has healed the lost slices
            results = cluster.client("read", head, "--combos", combos)
            if not any("error" in r for r in results):
                break
            assert time.monotonic() < deadline, f"not healed: {results}\n{cluster.logs()}"
            time.sleep(0.5)
        assert_every_row_once(results, locations)
        head_log = cluster.log("head").read_text(errors="replace")
        assert "heal finished" in head_log, cluster.logs()
        assert head_log.count("load started") == 1, cluster.logs()  # healed, not reloaded
