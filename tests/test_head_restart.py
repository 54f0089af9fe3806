"""The head killed (SIGKILL) and restarted: it adopts the catalog its nodes
keep (no reload, nothing orphaned), readers mid-epoch never notice, and a load
the dead head left staged on the nodes is dropped within the nodes' lease."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
import urllib.request

import numpy as np
import pyarrow as pa
import pytest
from iceberg_util import Warehouse, assert_same_rows

import icefloe
from icefloe._bin import bin_path
from icefloe._process import ServerProcess

N = 200_000
# Large enough that a reader is still being sent data when the head dies
# (the client buffers ~26 MB per stream ahead): 3 columns x 8 B x 4M = 96 MB,
# 48 MB per node.
N_BIG = 4_000_000
LEASE_MS = 2000


def _node_status(node) -> dict:
    with urllib.request.urlopen(node.health + "/status", timeout=10) as resp:
        return json.loads(resp.read())


def _until(what: str, done, timeout_s: float = 60.0):
    deadline = time.monotonic() + timeout_s
    while True:
        value = done()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s:.0f}s waiting for {what}")
        time.sleep(0.05)


def _memory(cluster) -> list[int]:
    return [_node_status(n)["memory_used_bytes"] for n in cluster.nodes]


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory):
    return Warehouse(tmp_path_factory.mktemp("restart") / "wh")


def _create(warehouse, name: str, rows: int, files: int = 4):
    # Several files, so the slices spread over both nodes.
    def part(i):
        ids = np.arange(i * rows // files, (i + 1) * rows // files, dtype=np.int64)
        return pa.table({"id": ids, "x": ids.astype(np.float64) * 0.5, "y": ids * 7})

    table = warehouse.create(name, part(0))
    for i in range(1, files):
        table.append(part(i))
    return table


@pytest.fixture(scope="module")
def table(warehouse):
    return _create(warehouse, "t", N)


@pytest.fixture(scope="module")
def big_table(warehouse):
    return _create(warehouse, "big", N_BIG)


@pytest.fixture
def cluster(tmp_path):
    node_args = [["--staged-lease-ms", str(LEASE_MS)]] * 2
    with icefloe.LocalCluster(num_nodes=2, log_dir=tmp_path / "logs", node_args=node_args,
                              token="restart-token") as c:
        yield c


def test_restarted_head_adopts_the_catalog_from_its_nodes(cluster, table):
    with cluster.client() as client:
        client.load("t", table.metadata_location, batch_rows=65536)
        client.load("alias", table.metadata_location, batch_rows=65536)  # shares t's copy
        before = {name: client.describe(name) for name in ("t", "alias")}
        assert before["alias"]["generation"] == before["t"]["generation"]
        listed = sorted(d["name"] for d in client.datasets())
    assert len({s["nodes"][0] for s in before["t"]["slices"]}) == 2  # both nodes hold rows
    # The head hands each node its catalog record on its next rounds.
    _until("records on every node", lambda: all(
        d.get("record") for n in cluster.nodes for d in _node_status(n)["datasets"]))
    memory = _memory(cluster)

    cluster.kill_head()
    with pytest.raises(icefloe.Unavailable):
        with cluster.client() as client:
            client.datasets()
    started = time.monotonic()
    cluster.restart_head()
    with cluster.client() as client:
        assert sorted(d["name"] for d in client.datasets()) == listed
        recovered_s = time.monotonic() - started
        for name, description in before.items():
            assert client.describe(name) == description, name
        assert_same_rows(client.read("t"), table.scan().to_arrow())
        assert client.read("alias", 1000, 1010).column("id").to_pylist() == list(range(1000, 1010))
    assert recovered_s < 30
    # No reload (same generation, nothing read from storage) and no orphan:
    # the nodes hold exactly what they held.
    assert _memory(cluster) == memory
    log = (cluster.log_dir / "head.log").read_text()
    assert "adopted a dataset from the nodes" in log

    with cluster.client() as client:
        # The adopted catalog is the head's own: evicting the alias keeps
        # the shared copy, evicting the last name frees it on the nodes.
        assert client.evict("alias")["bytes"] == 0
        assert client.evict("t")["bytes"] > 0
        _until("memory freed", lambda: all(m < 1 << 20 for m in _memory(cluster)))
        again = client.load("t", table.metadata_location, batch_rows=65536)
        assert again["generation"] > before["t"]["generation"]


def test_a_reader_mid_epoch_finishes_across_a_head_restart(cluster, big_table):
    plan = dict(batch_size=4096, shuffle="window", seed=11, epoch=0, drop_last=False)
    with cluster.client() as client:
        client.load("big", big_table.metadata_location, batch_rows=65536)
        expected = [b.column("id") for b in client.iter_epoch("big", **plan)]
        expected_ids = pa.chunked_array(expected).to_numpy()
        assert np.array_equal(np.sort(expected_ids), np.arange(N_BIG))
        got = []
        epoch = client.iter_epoch("big", **plan)
        got.append(next(epoch).column("id"))
        cluster.kill_head()
        # Still to be sent by the nodes when the head died.
        got.extend(b.column("id") for b in epoch)
    assert np.array_equal(pa.chunked_array(got).to_numpy(), expected_ids)
    cluster.restart_head()
    with cluster.client() as client:
        again = [b.column("id") for b in client.iter_epoch("big", **plan)]
    assert np.array_equal(pa.chunked_array(again).to_numpy(), expected_ids)


def test_a_load_the_dead_head_left_staged_is_dropped_within_the_lease(cluster, table):
    baseline = _memory(cluster)
    slow = cluster.nodes[1].popen
    errors = []

    def load():
        try:
            with cluster.client() as client:
                client.load("t", table.metadata_location, batch_rows=65536)
        except icefloe.Error as e:
            errors.append(e)

    # Node 1 is paused, so the head waits on it while node 0 loads and
    # stages its share: the head dies mid-load, with a load staged on node 0
    # and one not even started on node 1.
    os.kill(slow.pid, signal.SIGSTOP)
    try:
        loader = threading.Thread(target=load)
        loader.start()
        _until("node 0 staged", lambda: any(
            ld["state"] == "staged" for ld in _node_status(cluster.nodes[0])["loads"]))
        staged = _node_status(cluster.nodes[0])["memory_used_bytes"]
        assert staged > baseline[0] + (1 << 20)
        cluster.kill_head()
    finally:
        os.kill(slow.pid, signal.SIGCONT)
    loader.join(timeout=60)
    assert not loader.is_alive() and errors
    # Nobody confirms those loads any more: both nodes drop them.
    _until("staged loads dropped", lambda: _memory(cluster) == baseline and not any(
        _node_status(n)["loads"] for n in cluster.nodes), timeout_s=LEASE_MS / 1000 + 30)
    # (Node 1 may never have taken its node.load: the head died first.)
    assert "dropping a load the head stopped following" in (
        cluster.log_dir / "node-0.log").read_text()

    cluster.restart_head()
    with cluster.client() as client:
        client.load("t", table.metadata_location, batch_rows=65536)
        assert_same_rows(client.read("t"), table.scan().to_arrow())


def test_a_rescheduled_kubeflow_head_adopts_its_workers_table(tmp_path, table):
    """Kubeflow mode: the head polls a static list of workers and loads its
    table at start-up; a new head (the pod rescheduled, the workers kept)
    adopts the workers' copy instead of loading the table again."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    os.symlink(bin_path("icefloe-head"), bindir / "head")
    os.symlink(bin_path("icefloe-node"), bindir / "worker")
    env = {**os.environ, "METADATA_LOC": table.metadata_location, "SCHEMA_NAME": "db",
           "TABLE_NAME": "t", "LWS_LEADER_ADDRESS": "localhost", "LWS_GROUP_SIZE": "3",
           "HEALTH_PORT": "0"}
    procs: list[ServerProcess] = []

    def start_head(port: str) -> ServerProcess:
        head_env = {**env, "ICEFLOE_NODES": ",".join(p.location for p in procs[:2])}
        head = ServerProcess(name="head", argv=[str(bindir / "head"), "127.0.0.1", port],
                             log_path=tmp_path / "head.log", env=head_env).start()
        procs.append(head)
        _until("head ready", lambda: _ready(head))
        return head

    try:
        for i in range(2):
            procs.append(ServerProcess(name=f"worker-{i}", argv=[str(bindir / "worker"),
                                       "127.0.0.1", "0"], log_path=tmp_path / f"w{i}.log",
                                       env=env).start())
        head = start_head("0")
        with icefloe.Client(head.location) as client:
            [before] = client.datasets()
            described = client.describe(before["name"])
        _until("records on the workers", lambda: all(
            d.get("record") for w in procs[:2] for d in _node_status(w)["datasets"]))
        memory = [_node_status(w)["memory_used_bytes"] for w in procs[:2]]

        head.kill()
        head = start_head(head.location.rsplit(":", 1)[1])
        with icefloe.Client(head.location) as client:
            assert client.describe(before["name"]) == described  # same generation: no reload
            assert_same_rows(client.read(before["name"]), table.scan().to_arrow())
        assert [_node_status(w)["memory_used_bytes"] for w in procs[:2]] == memory
        log = (tmp_path / "head.log").read_text()
        assert log.count("load started") == 1, log  # only the first head read the table
    finally:
        for p in procs:
            p.stop()


def _ready(server) -> bool:
    try:
        with urllib.request.urlopen(server.health + "/ready", timeout=5) as resp:
            return resp.status == 200
    except OSError:
        return False
