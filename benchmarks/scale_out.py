"""Scale-out: aggregate client throughput with 1, 2 and 4 data nodes whose links
are capped, clients and servers in separate network namespaces.

Every server and client has its own network namespace, joined by veth links to
a bridge in a hub namespace (subnet 10.201.0.0/24, which exists only inside
these namespaces). Each data node's link is capped with tc tbf at NODE_RATE in
both directions; the head's link at HEAD_RATE, far below what the clients
receive, so a head on the data path would show at once (its link byte counters
are reported too). Clients' links are not capped. Four client processes, one
namespace each, are the four ranks of one job reading an epoch (block shuffle,
to tensors); the figure is the bytes they received over the wall time from the
first start to the last end. Needs root (ip netns, tc); skipped otherwise.
Everything it creates is removed on the way out, also on failure.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

from . import common
from .common import Env

NAME = "scale_out"
SUBNET = "10.201.0"
HEAD_IP = f"{SUBNET}.1"
NODE_RATE = "200mbit"
HEAD_RATE = "20mbit"
CLIENTS = 4
NODE_COUNTS = (1, 2, 4)


def _ip(*args: str) -> None:
    out = subprocess.run(["ip", *args], capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {out.stderr.strip()}")


def _tc(ns: str, dev: str, rate: str) -> None:
    out = subprocess.run(["ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", dev, "root",
                          "tbf", "rate", rate, "burst", "256kb", "latency", "50ms"],
                         capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"tc in {ns}: {out.stderr.strip()}")


class Namespaces:
    """A hub namespace with a bridge, and one namespace per endpoint on it."""

    def __init__(self) -> None:
        self.prefix = f"ifb{os.getpid() % 100000}"
        self.hub = f"{self.prefix}-hub"
        self.created: list[str] = []

    def __enter__(self) -> Namespaces:
        try:
            self._add(self.hub)
            _ip("-n", self.hub, "link", "add", "br0", "type", "bridge")
            _ip("-n", self.hub, "link", "set", "br0", "up")
            _ip("-n", self.hub, "link", "set", "lo", "up")
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _add(self, ns: str) -> None:
        _ip("netns", "add", ns)
        self.created.append(ns)

    def endpoint(self, name: str, address: str, rate: str | None) -> str:
        """A namespace `<prefix>-<name>` with eth0 at `address` on the bridge;
        its link capped at `rate` both ways when given."""
        ns = f"{self.prefix}-{name}"
        self._add(ns)
        _ip("-n", self.hub, "link", "add", ns, "type", "veth", "peer", "name", "eth0",
            "netns", ns)
        _ip("-n", self.hub, "link", "set", ns, "master", "br0", "up")
        _ip("-n", ns, "addr", "add", f"{address}/24", "dev", "eth0")
        _ip("-n", ns, "link", "set", "eth0", "up")
        _ip("-n", ns, "link", "set", "lo", "up")
        if rate:
            _tc(ns, "eth0", rate)          # what the endpoint sends
            _tc(self.hub, ns, rate)        # what it receives
        return ns

    def tx_bytes(self, ns: str) -> int:
        out = subprocess.run(["ip", "-n", ns, "-s", "-j", "link", "show", "eth0"],
                             capture_output=True, text=True, check=True)
        return int(json.loads(out.stdout)[0]["stats64"]["tx"]["bytes"])

    def close(self) -> None:
        for ns in reversed(self.created):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
            shutil.rmtree(Path("/etc/netns") / ns, ignore_errors=True)
        self.created.clear()


def _problem() -> str | None:
    if os.geteuid() != 0:
        return "needs root (ip netns, tc): skipped"
    for tool in ("ip", "tc"):
        if shutil.which(tool) is None:
            return f"needs {tool} (iproute2): skipped"
    probe = f"ifbprobe{os.getpid() % 100000}"
    if subprocess.run(["ip", "netns", "add", probe], capture_output=True).returncode != 0:
        return "cannot create network namespaces here: skipped"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return None


def _measure(env: Env, nets: Namespaces, clients: list[str], nodes: int, r: int,
             head_ns: str, node_ns: list[str]) -> dict[str, Any]:
    start_at = time.time() + 6.0  # after every client has imported torch and connected
    before = {ns: nets.tx_bytes(ns) for ns in [head_ns, *node_ns]}
    procs = [common.start_worker("job", {"head": f"grpc://{HEAD_IP}:50051", "dataset": "scale",
                                         "world_size": CLIENTS, "ranks": [rank],
                                         "batch_size": env.cfg.batch_size, "shuffle": "block",
                                         "seed": r, "start_at": start_at},
                                 prefix=["ip", "netns", "exec", ns])
             for rank, ns in enumerate(clients)]
    results = [common.finish_worker(p, "job") for p in procs]
    after = {ns: nets.tx_bytes(ns) for ns in [head_ns, *node_ns]}
    t0 = min(x["start"] for x in results)
    t1 = max(x["end"] for x in results)
    total = sum(x["bytes"] for x in results)
    late = max(x["start"] for x in results) - start_at
    return {"nodes": nodes, "bytes": total, "seconds": t1 - t0, "gbps": total / (t1 - t0) / 1e9,
            "mbit_per_s": total * 8 / (t1 - t0) / 1e6, "late_start_s": late,
            "head_tx_bytes": after[head_ns] - before[head_ns],
            "node_tx_bytes": [after[ns] - before[ns] for ns in node_ns],
            "clients": results}


def run(env: Env) -> dict[str, Any]:
    from icefloe._bin import bin_path
    from icefloe._process import ServerProcess

    cfg, log, table = env.cfg, env.log, env.table
    problem = _problem()
    if problem:
        log(f"scale_out: {problem}")
        result = {"name": NAME, "skipped": problem, "notes": [problem],
                  "targets": [common.target("aggregate throughput, 4 data nodes / 1 (capped links)",
                                            ">=", 3.5, None, problem)]}
        common.write_result(cfg, NAME, result)
        return result
    label_below = 5 if cfg.quick else 2  # a share of every file, so every node gets rows
    got: dict[str, list[dict[str, Any]]] = {}
    procs: list[Any] = []
    with Namespaces() as nets:
        try:
            head_ns = nets.endpoint("h", HEAD_IP, HEAD_RATE)
            node_ns = [nets.endpoint(f"n{i}", f"{SUBNET}.{10 + i}", NODE_RATE)
                       for i in range(1, max(NODE_COUNTS) + 1)]
            clients = [nets.endpoint(f"c{i}", f"{SUBNET}.{100 + i}", None)
                       for i in range(1, CLIENTS + 1)]
            for nodes in NODE_COUNTS:
                logs = env.log_dir(f"scale_out-{nodes}")
                # Nodes take node actions only signed by their head: one secret for all.
                secret = logs / "cluster-secret"
                secret.write_text(secrets.token_hex(32))
                secret.chmod(0o600)
                auth = ["--cluster-secret-file", str(secret)]
                head = ServerProcess(
                    name="head", log_path=logs / "head.log", env=common.child_env(),
                    argv=["ip", "netns", "exec", head_ns, bin_path("icefloe-head"), "--host",
                          HEAD_IP, "--port", "50051", "--health-port", "0",
                          "--recover-ms", "0", *auth]).start(60)  # a new cluster
                procs.append(head)
                for i in range(nodes):
                    ip = f"{SUBNET}.{11 + i}"
                    procs.append(ServerProcess(
                        name=f"node-{i}", log_path=logs / f"node-{i}.log", env=common.child_env(),
                        argv=["ip", "netns", "exec", node_ns[i], bin_path("icefloe-node"),
                              "--host", ip, "--port", "50051", "--advertise", ip,
                              "--health-port", "0", "--head", f"grpc://{HEAD_IP}:50051", *auth]
                    ).start(60))
                prefix = ["ip", "netns", "exec", clients[0]]
                common.run_worker("wait_nodes", {"head": f"grpc://{HEAD_IP}:50051", "n": nodes},
                                  prefix=prefix)
                desc = common.run_worker("load", {
                    "head": f"grpc://{HEAD_IP}:50051", "name": "scale",
                    "source": table.metadata_location, "filter": f"label < {label_below}"},
                    prefix=prefix)
                log(f"scale_out: {nodes} node(s), {desc['rows']:,} rows, "
                    f"{desc['bytes'] / 1e6:.0f} MB cached")
                key = f"{nodes} node{'s' * (nodes > 1)}"
                got[key] = []
                for r in range(cfg.repeats):
                    res = _measure(env, nets, clients, nodes, r, head_ns, node_ns[:nodes])
                    got[key].append(res)
                    log(f"  {key} [{r + 1}/{cfg.repeats}]: {res['mbit_per_s']:.0f} Mbit/s, "
                        f"head sent {res['head_tx_bytes'] / 1e6:.2f} MB, nodes sent "
                        f"{[round(b / 1e6) for b in res['node_tx_bytes']]} MB")
                for p in reversed(procs):
                    p.stop()
                procs.clear()
        finally:
            for p in reversed(procs):
                p.stop()

    med = {k: common.median(x["gbps"] for x in v) for k, v in got.items()}
    one = med["1 node"]
    rows = []
    for k, v in got.items():
        rows.append([k, med[k] * 8e3, min(x["gbps"] for x in v) * 8e3,
                     max(x["gbps"] for x in v) * 8e3, med[k] / one,
                     common.median(x["head_tx_bytes"] for x in v) / 1e6,
                     common.median(sum(x["node_tx_bytes"]) for x in v) / 1e6])
    text = common.print_table(
        f"scale-out: {CLIENTS} client ranks (block shuffle), node links {NODE_RATE}, head link "
        f"{HEAD_RATE}", ["data nodes", "Mbit/s", "min", "max", "x 1 node", "head sent MB",
                         "nodes sent MB"], rows)
    targets = [common.target("aggregate throughput, 4 data nodes / 1 (capped links, clients in "
                             "their own namespaces)", ">=", 3.5, med["4 nodes"] / one)]
    labels = list(got)
    common.bar_plot(cfg, NAME, f"scale-out: aggregate Mbit/s of {CLIENTS} clients, node links "
                    f"{NODE_RATE}", labels, [med[k] * 8e3 for k in labels],
                    lows=[min(x["gbps"] for x in got[k]) * 8e3 for k in labels],
                    highs=[max(x["gbps"] for x in got[k]) * 8e3 for k in labels],
                    ylabel="Mbit/s",
                    lines=[(int(NODE_RATE[:-4]) * n, f"{n} x {NODE_RATE}") for n in NODE_COUNTS])
    head_mb = common.median(x["head_tx_bytes"] for v in got.values() for x in v) / 1e6
    result = {"name": NAME, "node_rate": NODE_RATE, "head_rate": HEAD_RATE, "clients": CLIENTS,
              "runs": got, "median_gbps": med, "targets": targets, "table": text,
              "notes": [f"The head's link is capped at {HEAD_RATE}; it sent {head_mb:.2f} MB per "
                        "run (plans and endpoints) while the clients received the data straight "
                        "from the nodes."]}
    common.write_result(cfg, NAME, result)
    return result
