"""Lost slices heal themselves (issue 14): a data node SIGKILLed, then replaced
by an empty one or not at all; the head marks the dataset degraded, reloads
just the lost scan tasks onto nodes with room under the same generation, and
the dataset reads exactly as before: same rows, same order."""

from __future__ import annotations

import os
import signal
import time
import urllib.request

import numpy as np
import pyarrow as pa
import pytest
from iceberg_util import Warehouse

import icefloe

FILES = 16
ROWS = 25_000  # per file: 16 x 25,000 rows x 32 bytes = 12.8 MB in all
# Dead after one second of silence (the default is five): bounded tests.
HEAD_ARGS = ["--heartbeat-timeout-ms", "1000"]


def part(k: int) -> pa.Table:
    ids = np.arange(k * ROWS, (k + 1) * ROWS, dtype=np.int64)
    return pa.table({"id": ids, "x": ids * 0.5, "y": ids * 2, "z": -ids})


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    """A table of FILES appends (one data file each) and its oracle."""
    t = Warehouse(tmp_path_factory.mktemp("heal")).create("t", part(0))
    for k in range(1, FILES):
        t.append(part(k))
    # The pyarrow oracle: rows in the order they were written (docs/iceberg.md).
    return t, pa.concat_tables([part(k) for k in range(FILES)])


def wait_for(client, name: str, done, what: str, timeout_s: float = 60.0) -> dict:
    """Polls describe(name) until done(description); bounded."""
    deadline = time.monotonic() + timeout_s
    while True:
        desc = client.describe(name)
        if done(desc):
            return desc
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not reached in {timeout_s}s: {desc}")
        time.sleep(0.05)


def node_index(cluster, location: str) -> int:
    return cluster.node_uris.index(location)


def head_metrics(cluster) -> dict[str, float]:
    with urllib.request.urlopen(cluster.head.health + "/metrics", timeout=10) as resp:
        lines = resp.read().decode().splitlines()
    return {k: float(v) for k, v in (line.split() for line in lines if not line.startswith("#"))}


def held_bytes(client, desc: dict) -> int:
    """Bytes the alive nodes report for the dataset's copy."""
    total = 0
    for n in client.status()["nodes"]:
        if n["state"] != "alive":
            continue
        for d in n["datasets"]:
            if d["name"] == desc["name"] and d["generation"] == desc["generation"]:
                total += d["bytes"]
    return total


def test_no_room_stays_degraded_then_a_node_back_empty_heals(tmp_path, table):
    t, oracle = table
    # 12 MiB a node: half the table (6.5 MB) and its decode buffers fit, the whole does
    # not, so with one node gone nothing has room.
    with icefloe.LocalCluster(num_nodes=2, memory_limit="12MiB", head_args=HEAD_ARGS,
                              log_dir=tmp_path / "logs") as cluster, cluster.client() as client:
        loaded = client.load("t", t.metadata_location, batch_rows=4096)
        assert {s["nodes"][0] for s in loaded["slices"]} == set(cluster.node_uris)
        victim = node_index(cluster, loaded["slices"][0]["nodes"][0])
        cluster.kill_node(victim)
        desc = wait_for(client, "t", lambda d: d["state"] == "degraded" and "heal_error" in d,
                        "degraded with a heal error")
        assert desc["slices_missing"] >= 1
        assert "no node has room" in desc["heal_error"] and "needs" in desc["heal_error"]
        assert desc["generation"] == loaded["generation"]
        # load() of the same arguments never returns the broken copy as ready.
        with pytest.raises(icefloe.OutOfMemory, match="no node has room"):
            client.load("t", t.metadata_location, batch_rows=4096)
        # Status and metrics tell the truth about the node and the dataset.
        dead = [n for n in client.status()["nodes"] if n["state"] == "dead"]
        assert len(dead) == 1 and dead[0]["last_heartbeat_s"] >= 1.0
        metrics = head_metrics(cluster)
        assert metrics["icefloe_head_datasets_degraded"] == 1
        assert metrics["icefloe_head_slices_missing"] == desc["slices_missing"]

        # The pod comes back, empty, at the same address: the lost slices go back on it.
        cluster.restart_node(victim, same_port=True)
        healed = wait_for(client, "t", lambda d: d["state"] == "ready", "ready again")
        assert healed["generation"] == loaded["generation"]
        assert healed["slices_missing"] == 0 and "heal_error" not in healed
        assert healed["heal_seconds"] > 0
        assert client.read("t").equals(oracle)  # exact rows, exact order
        # Memory: what the nodes hold is the table once, as right after the load.
        assert held_bytes(client, healed) == healed["bytes"]
        assert abs(healed["bytes"] - loaded["bytes"]) <= loaded["bytes"] // 20


def test_a_spare_node_takes_the_lost_slices_and_load_joins_the_heal(tmp_path, table):
    t, oracle = table
    with icefloe.LocalCluster(num_nodes=3, memory_limit="64MiB", head_args=HEAD_ARGS,
                              log_dir=tmp_path / "logs") as cluster, cluster.client() as client:
        loaded = client.load("t", t.metadata_location, batch_rows=4096)
        lost = loaded["slices"][0]["nodes"][0]
        cluster.kill_node(node_index(cluster, lost))
        wait_for(client, "t", lambda d: d["state"] != "ready" or d.get("heal_seconds"),
                 "the loss noticed")
        # Same arguments while degraded or healing: heals (or joins the heal).
        again = client.load("t", t.metadata_location, batch_rows=4096)
        assert again["state"] == "ready"
        assert again["generation"] == loaded["generation"]
        assert all(lost not in s["nodes"] for s in again["slices"])
        assert client.read("t").equals(oracle)
        assert held_bytes(client, again) == again["bytes"]


def test_replication_two_stays_readable_and_re_replicates(tmp_path, table):
    t, oracle = table
    with icefloe.LocalCluster(num_nodes=3, memory_limit="64MiB", head_args=HEAD_ARGS,
                              log_dir=tmp_path / "logs") as cluster, cluster.client() as client:
        loaded = client.load("t", t.metadata_location, batch_rows=4096, replication=2)
        lost = loaded["slices"][0]["nodes"][0]
        cluster.kill_node(node_index(cluster, lost))
        assert client.read("t").equals(oracle)  # the surviving replicas serve
        healed = wait_for(
            client, "t",
            lambda d: d["state"] == "ready" and all(lost not in s["nodes"] for s in d["slices"]),
            "re-replicated")
        assert healed["generation"] == loaded["generation"]
        assert healed["slices_missing"] == 0 and healed["replicas_missing"] == 0
        assert all(len(s["nodes"]) == 2 for s in healed["slices"])
        assert client.read("t").equals(oracle)
        assert held_bytes(client, healed) == healed["bytes"]


def test_a_copy_adopted_after_a_head_restart_heals(tmp_path, table):
    """A restarted head knows the copy only from its nodes' catalog records; it
    re-plans the pinned snapshot to show the file map and to reload the scan
    tasks of a node lost afterwards."""
    t, oracle = table
    with icefloe.LocalCluster(num_nodes=3, head_args=HEAD_ARGS,
                              log_dir=tmp_path / "logs") as cluster:
        with cluster.client() as client:
            client.load("t", t.metadata_location, batch_rows=4096)
            before = client.describe("t")
        cluster.kill_head()
        cluster.restart_head()
        with cluster.client() as client:
            adopted = client.describe("t")
            assert adopted["generation"] == before["generation"]
            assert adopted["files"] == before["files"] and len(before["files"]) == FILES
            lost = before["slices"][0]["nodes"][0]
            cluster.kill_node(node_index(cluster, lost))
            healed = wait_for(
                client, "t",
                lambda d: d["state"] == "ready" and all(lost not in s["nodes"]
                                                        for s in d["slices"]),
                "healed after the head restart")
            assert healed["generation"] == before["generation"]
            assert client.read("t").equals(oracle)  # exact rows, exact order


def test_a_node_back_from_the_dead_drops_rows_healed_elsewhere(tmp_path, table):
    # SIGSTOP: the node misses its heartbeats and is declared dead with its
    # rows intact; the head heals them onto the others. Back (SIGCONT), it
    # still held them, charged against its memory, read by nobody.
    t, oracle = table
    with icefloe.LocalCluster(num_nodes=3, head_args=HEAD_ARGS,
                              log_dir=tmp_path / "logs") as cluster, cluster.client() as client:
        loaded = client.load("t", t.metadata_location, batch_rows=4096)
        lost = loaded["slices"][0]["nodes"][0]
        pid = cluster.nodes[node_index(cluster, lost)].popen.pid
        os.kill(pid, signal.SIGSTOP)
        try:
            wait_for(client, "t", lambda d: d["state"] == "ready" and
                     lost not in {n for s in d["slices"] for n in s["nodes"]}, "healed elsewhere")
        finally:
            os.kill(pid, signal.SIGCONT)
        deadline = time.monotonic() + 30
        while True:
            node = next(n for n in client.status()["nodes"] if n["location"] == lost)
            if node["state"] == "alive" and not node["datasets"]:
                break
            assert time.monotonic() < deadline, node
            time.sleep(0.1)
        assert node["memory_used_bytes"] == 0
        desc = client.describe("t")
        assert desc["state"] == "ready" and desc["generation"] == loaded["generation"]
        assert held_bytes(client, desc) == desc["bytes"]
        assert client.read("t").equals(oracle)
