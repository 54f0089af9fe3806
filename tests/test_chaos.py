"""Chaos (issue 14): four consumers read epochs while data nodes are SIGKILLed
and restarted at random; every epoch each consumer reads must be exactly the
one it reads without faults: zero rows lost or repeated, same order.

Bounded in time and count. The seed is logged; ICEFLOE_CHAOS_SEED replays a
run, ICEFLOE_CHAOS_SECONDS sets each part's length (default 40 s).

A restarted node comes back empty. Without healing, only nodes whose data
still has another live copy may be killed, so ``test_chaos_replicas`` loads
with one replica per node and never kills the last holder; with healing
(``test_chaos_heals``) any node may die, one at a time, once the head says
the dataset is ``ready`` again.
"""

from __future__ import annotations

import logging
import os
import random
import threading
import time
import urllib.request

import numpy as np
import pyarrow as pa
import pytest
from iceberg_util import Warehouse

import icefloe

log = logging.getLogger(__name__)

N = 1_000_000
BATCH = 2048
CONSUMERS = 4
EPOCHS = 3  # distinct plans; consumers cycle through them
SECONDS = float(os.environ.get("ICEFLOE_CHAOS_SECONDS", "30"))
MAX_KILLS = 50


def _columns() -> pa.Table:
    rng = np.random.default_rng(7)
    columns = {"id": np.arange(N, dtype=np.int64)}
    columns.update({f"f{i}": rng.standard_normal(N) for i in range(3)})
    return pa.table(columns)


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    return Warehouse(tmp_path_factory.mktemp("chaos") / "wh").create("t", _columns())


@pytest.fixture(scope="module")
def small_files(tmp_path_factory):
    """The same rows in data files of about 1 MB: one read of each fits a
    node of 8 MiB, so nearly every row of such a node goes to its disk tier."""
    return Warehouse(tmp_path_factory.mktemp("chaos-tier") / "wh").create(
        "t", _columns(), properties={"write.target-file-size-bytes": str(1 << 20)})


def _seed() -> int:
    seed = int(os.environ.get("ICEFLOE_CHAOS_SEED", random.randrange(2**32)))
    log.warning("chaos seed %d (ICEFLOE_CHAOS_SEED=%d replays it)", seed, seed)
    print(f"chaos seed {seed}")
    return seed


def _plan(rank: int, epoch: int) -> dict:
    return {"batch_size": BATCH, "seed": 11, "epoch": epoch, "world_size": CONSUMERS,
            "rank": rank, "shuffle": ("window", "block", "sample")[epoch % 3],
            "drop_last": False}


def _ids(client, rank: int, epoch: int) -> list[int]:
    out: list[int] = []
    for b in client.iter_epoch("t", **_plan(rank, epoch)):
        out.extend(b.column("id").to_pylist())
    return out


def _consume(cluster, rank: int, want: dict, stop: threading.Event, results: dict) -> None:
    """Reads epochs until stopped, checking each against the unfaulted one."""
    done, errors = 0, []
    try:
        with cluster.client(failover_timeout_s=30.0) as client:
            while not stop.is_set() and done < 1000:
                epoch = done % EPOCHS
                got = _ids(client, rank, epoch)
                if got != want[rank, epoch]:
                    errors.append(f"rank {rank} epoch {epoch}: {len(got)} rows, "
                                  f"{len(set(got))} distinct, want {len(want[rank, epoch])}")
                done += 1
    except BaseException as exc:  # noqa: BLE001 - reported by the test
        errors.append(f"rank {rank}: {type(exc).__name__}: {exc}")
    results[rank] = (done, errors)


def _chaos(tmp_path, table, *, num_nodes: int, replication: int, healing: bool,
           **cluster: str) -> None:
    """Kills and restarts nodes for SECONDS while four consumers read epochs;
    ``cluster``: more LocalCluster arguments (a disk tier)."""
    rng = random.Random(_seed())
    failovers = _Count()
    logging.getLogger("icefloe").addHandler(failovers)
    try:
        _run(tmp_path, table, rng, num_nodes, replication, healing, failovers, cluster)
    finally:
        logging.getLogger("icefloe").removeHandler(failovers)


class _Count(logging.Handler):
    """Counts the client's failovers (its "failing over" warnings)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.count = 0

    def emit(self, record: logging.LogRecord) -> None:
        if "failing over" in record.getMessage():
            self.count += 1


def _run(tmp_path, table, rng, num_nodes, replication, healing, failovers, kwargs) -> None:
    with icefloe.LocalCluster(num_nodes=num_nodes, log_dir=tmp_path / "logs",
                              **kwargs) as cluster:
        with cluster.client() as client:
            client.load("t", table.metadata_location, replication=replication)
            if "disk_limit" in kwargs:  # most rows are read from the tier
                nodes = client.status()["nodes"]
                assert sum(n["disk_used_bytes"] for n in nodes) > \
                    2 * sum(n["memory_used_bytes"] for n in nodes), nodes
            want = {(r, e): _ids(client, r, e) for r in range(CONSUMERS) for e in range(EPOCHS)}
        for e in range(EPOCHS):
            rows = sorted(i for r in range(CONSUMERS) for i in want[r, e])
            assert rows == list(range(N))
        holders = set(range(num_nodes))  # nodes still holding their copy
        stop = threading.Event()
        results: dict = {}
        threads = [threading.Thread(target=_consume, args=(cluster, r, want, stop, results))
                   for r in range(CONSUMERS)]
        for t in threads:
            t.start()
        kills = 0
        try:
            # Runs SECONDS, and on (at most as long again) until a kill has
            # broken a reader's stream: a run whose kills all fell between
            # streams would test nothing.
            start = time.monotonic()
            while kills < MAX_KILLS and len(results) < CONSUMERS:
                elapsed = time.monotonic() - start
                if elapsed > 2 * SECONDS or (elapsed > SECONDS and failovers.count):
                    break
                time.sleep(rng.uniform(1.0, 6.0))
                candidates = set(range(num_nodes)) if healing else holders
                if len(candidates) < (1 if healing else 2):
                    continue
                victim = _serving(cluster, candidates, rng)
                gone = cluster.node_uris[victim]
                cluster.kill_node(victim)
                kills += 1
                log.warning("chaos: killed node %d", victim)
                time.sleep(rng.uniform(0.0, 2.0))
                cluster.restart_node(victim)  # empty, on a new port
                if healing:
                    _wait_replicated(cluster, replication, gone, timeout_s=30.0)
                else:
                    holders.discard(victim)
        finally:
            stop.set()
            for t in threads:
                t.join(timeout=120)
        assert not any(t.is_alive() for t in threads), "a consumer did not finish"
        errors = [e for _, errs in results.values() for e in errs]
        assert not errors, f"{kills} kills: {errors}\n{cluster.logs()}"
        epochs = sum(done for done, _ in results.values())
        print(f"chaos: {kills} kills, {failovers.count} failovers, {epochs} epochs read "
              "exactly")
        assert kills >= 1 and failovers.count >= 1 and epochs >= CONSUMERS


def _serving(cluster, candidates: set[int], rng: random.Random) -> int:
    """A candidate node serving a DoGet stream now (its
    ``icefloe_node_doget_streams_active`` gauge), polled for up to 2 s; else
    any candidate."""
    deadline = time.monotonic() + 2.0
    while time.monotonic() < deadline:
        busy = sorted(i for i in candidates if _streams_active(cluster.nodes[i].health) > 0)
        if busy:
            return rng.choice(busy)
        time.sleep(0.01)
    return rng.choice(sorted(candidates))


def _streams_active(health_url: str) -> float:
    with urllib.request.urlopen(health_url + "/metrics", timeout=10) as r:
        for line in r.read().decode().splitlines():
            if line.startswith("icefloe_node_doget_streams_active"):
                return float(line.split()[-1])
    raise AssertionError(f"{health_url}/metrics has no icefloe_node_doget_streams_active")


def _wait_replicated(cluster, replication: int, gone: str, timeout_s: float) -> None:
    """Until the head knows node ``gone`` died, says ``ready`` and has every
    slice's replicas on live nodes."""
    deadline = time.monotonic() + timeout_s
    with cluster.client() as client:
        while gone in _alive(client) or client.describe("t")["state"] != "ready" or \
                _short(client, replication):
            if time.monotonic() > deadline:
                raise TimeoutError(f"dataset not fully replicated again within {timeout_s} s")
            time.sleep(0.2)


def _alive(client) -> set[str]:
    return {n["location"] for n in client.status()["nodes"] if n["state"] == "alive"}


def _short(client, replication: int) -> bool:
    alive = _alive(client)
    return any(len(set(s["nodes"]) & alive) < replication
               for s in client.describe("t")["slices"])


def test_chaos_replicas(tmp_path, table):
    _chaos(tmp_path, table, num_nodes=4, replication=4, healing=False)


def test_chaos_heals(tmp_path, table):
    _chaos(tmp_path, table, num_nodes=3, replication=2, healing=True)


def test_chaos_heals_on_the_disk_tier(tmp_path, small_files):
    """The same with nodes of 8 MiB memory: copies, failovers and heals land
    on the nodes' disk tiers (issue 29: all guarantees hold for copies on
    disk)."""
    _chaos(tmp_path, small_files, num_nodes=3, replication=2, healing=True,
           memory_limit="8MiB", disk_limit="256MiB")
