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


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    rng = np.random.default_rng(7)
    columns = {"id": np.arange(N, dtype=np.int64)}
    columns.update({f"f{i}": rng.standard_normal(N) for i in range(3)})
    return Warehouse(tmp_path_factory.mktemp("chaos") / "wh").create("t", pa.table(columns))


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


def _chaos(tmp_path, table, *, num_nodes: int, replication: int, healing: bool) -> None:
    """Kills and restarts nodes for SECONDS while four consumers read epochs."""
    rng = random.Random(_seed())
    failovers = _Count()
    logging.getLogger("icefloe").addHandler(failovers)
    try:
        _run(tmp_path, table, rng, num_nodes, replication, healing, failovers)
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


def _run(tmp_path, table, rng, num_nodes, replication, healing, failovers) -> None:
    with icefloe.LocalCluster(num_nodes=num_nodes, log_dir=tmp_path / "logs") as cluster:
        with cluster.client() as client:
            client.load("t", table.metadata_location, replication=replication)
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
            end = time.monotonic() + SECONDS
            while time.monotonic() < end and kills < MAX_KILLS and len(results) < CONSUMERS:
                time.sleep(rng.uniform(1.0, 6.0))
                if healing:
                    victim = rng.randrange(num_nodes)
                elif len(holders) > 1:
                    victim = _streaming(cluster, holders)  # the node readers use
                else:
                    continue
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


def _streaming(cluster, holders: set[int]) -> int:
    """The holder listed first for the first slice: the one readers stream from."""
    with cluster.client() as client:
        first = client.describe("t")["slices"][0]["nodes"]
    return next(cluster.node_uris.index(u) for u in first
                if u in cluster.node_uris and cluster.node_uris.index(u) in holders)


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
