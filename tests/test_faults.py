"""Readers fail over mid-epoch (issue 14): a data node is SIGKILLed while an
epoch is being read, and the epoch goes on with exactly the batches of an
unfaulted run of the same plan; with no replica left the error names the node
and the dataset.

The table (~96 MB) is several times what a client buffers per stream (~26 MB
of gRPC flow-control window), so the kill lands while the node still has data
to send; each test checks (by the client's log or its error) that a stream
really broke.
"""

from __future__ import annotations

import logging
import time
from contextlib import contextmanager

import numpy as np
import pyarrow as pa
import pytest
from iceberg_util import Warehouse
from torch.utils.data import DataLoader

import icefloe
from icefloe import _stall
from icefloe.torch import CacheDataset, CacheMapDataset

N = 1_500_000
BATCH = 4096
KILL_AFTER = 4  # batches the consumer has taken when the node dies
# A projection (the nodes send only these) still several times the client's
# buffers, so a kill lands mid-stream; failover asks for the same columns.
COLUMNS = ["id", "f1", "f2", "f3", "f4", "f5", "f6"]


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    root = tmp_path_factory.mktemp("faults")
    rng = np.random.default_rng(14)
    columns = {"id": np.arange(N, dtype=np.int64)}
    columns.update({f"f{i}": rng.standard_normal(N) for i in range(7)})
    return Warehouse(root / "wh").create("t", pa.table(columns))


@contextmanager
def _cluster(tmp_path, table, num_nodes: int, replication: int):
    with icefloe.LocalCluster(num_nodes=num_nodes, log_dir=tmp_path / "logs") as cluster:
        with cluster.client() as client:
            client.load("t", table.metadata_location, replication=replication)
        yield cluster


@pytest.fixture
def rep2(tmp_path, table):
    with _cluster(tmp_path, table, 2, 2) as cluster:
        yield cluster


def _streaming_node(cluster, **plan) -> int:
    """The node the plan's first endpoint is read from (its first replica)."""
    with cluster.client() as client:
        info, _ = client.epoch_info("t", batch_size=BATCH, **plan)
        uri = info.endpoints[0].locations[0].uri.decode()
    return cluster.node_uris.index(uri)


def _ids(batches) -> list[int]:
    out: list[int] = []
    for b in batches:
        col = b["id"] if isinstance(b, dict) else b.column("id")
        out.extend(col.tolist() if hasattr(col, "tolist") else col.to_pylist())
    return out


def _read_killing(batches, cluster, victim: int, columns=None) -> list[int]:
    """Every batch's ids, killing node ``victim`` after KILL_AFTER batches;
    with ``columns``, checks every batch (dict) holds exactly those."""
    out = []
    for k, batch in enumerate(batches):
        if k == KILL_AFTER:
            cluster.kill_node(victim)
        if columns is not None:
            assert list(batch) == columns, (k, list(batch))
        out.append(batch)
    return _ids(out)


PLAN = {"seed": 5, "epoch": 1, "shuffle": "window", "drop_last": False}


def test_iter_epoch_survives_a_node_kill_exactly(rep2, caplog):
    # Over the wire, where the rows are many times gRPC's buffers, so the kill
    # lands mid-stream: a stream by reference is a few small messages that a
    # loaded machine may have received whole before the kill (then no stream
    # breaks; tests/test_shared_memory.py kills a node under those).
    with rep2.client(share_memory=False) as client:
        want = _ids(client.iter_epoch("t", batch_size=BATCH, **PLAN))
        assert sorted(want) == list(range(N))
        victim = _streaming_node(rep2, **PLAN)
        # The shape names the copy, so a resumed epoch can check it is the same one.
        assert client.epoch_info("t", batch_size=BATCH)[1]["generation"] == \
            client.describe("t")["generation"]
        with caplog.at_level(logging.WARNING, logger="icefloe"):
            got = _read_killing(client.iter_epoch("t", batch_size=BATCH, **PLAN), rep2, victim)
        assert got == want
        assert any("failing over" in r.message for r in caplog.records), "no stream broke"
        # Ranges and random access after the kill: the survivor serves them.
        rows = [N - 1, 0, 777_777, 0]
        assert client.take("t", rows).column("id").to_pylist() == rows
        assert client.read("t", 1000, 5000).column("id").to_pylist() == list(range(1000, 5000))
        assert CacheMapDataset(rep2.head_uri, "t").__getitems__([3, 2])[1]["id"] == 2
    # A slow loop outlives its stream's deadline (gRPC's covers a whole call):
    # the epoch goes on from a fresh stream, exactly.
    caplog.clear()
    with rep2.client(stream_timeout_s=1.0) as client, \
            caplog.at_level(logging.INFO, logger="icefloe"):
        got = []
        for k, batch in enumerate(client.iter_epoch("t", batch_size=BATCH, **PLAN)):
            if k < 8:
                time.sleep(0.25)  # the training step
            got.append(batch)
        assert _ids(got) == want
        assert any("Deadline" in r.message for r in caplog.records), "no deadline passed"


@pytest.mark.parametrize("batch, plan", [(BATCH, PLAN),
                                         (1024, {"shuffle": "none", "drop_last": False})])
def test_the_stall_meter_counts_each_batch_once_across_a_failover(rep2, caplog, monkeypatch,
                                                                  batch, plan):
    reports: list[dict] = []
    monkeypatch.setattr(_stall, "submitter", lambda *a, **k: reports.append)
    monkeypatch.setenv("ICEFLOE_STALL_REPORT_S", "0.05")
    with rep2.client(share_memory=False) as client:
        victim = _streaming_node(rep2, **plan)
        with caplog.at_level(logging.WARNING, logger="icefloe"):
            got = _read_killing(client.iter_epoch("t", batch_size=batch,
                                                  prefetch=4, **plan), rep2, victim)
    assert sorted(got) == list(range(N))
    assert any("failing over" in r.message for r in caplog.records), "no stream broke"
    assert sum(r["batches"] for r in reports) == -(-N // batch)
    assert sum(r["rows"] for r in reports) == N


def test_chunked_epoch_survives_a_node_kill_exactly(rep2, caplog):
    # Shuffle none at 1024 rows: nodes send dozens of whole batches a message
    # (chunks); the kill lands after 4 batches of the first one.
    plan = {"shuffle": "none", "drop_last": False}
    # Over the wire: by reference, the whole epoch's (small) messages may
    # have arrived before the kill, and nothing breaks.
    with rep2.client(share_memory=False) as client:
        victim = _streaming_node(rep2, **plan)
        with caplog.at_level(logging.WARNING, logger="icefloe"):
            batches = client.iter_epoch("t", batch_size=1024, **plan)
            got = _read_killing(batches, rep2, victim)
    assert got == list(range(N))
    assert any("failing over" in r.message for r in caplog.records), "no stream broke"


def test_cache_dataset_survives_a_node_kill_exactly(rep2, caplog):
    ds = CacheDataset(rep2.head_uri, "t", batch_size=BATCH, shuffle="sample", seed=2,
                      drop_last=True, columns=COLUMNS, client_options={"failover_attempts": 4})
    want = _ids(DataLoader(ds, batch_size=None))
    assert ds.client().failover_attempts == 4
    victim = _streaming_node(rep2, shuffle="sample", seed=2)
    with caplog.at_level(logging.WARNING, logger="icefloe"):
        got = _read_killing(DataLoader(ds, batch_size=None), rep2, victim, COLUMNS)
    assert got == want
    assert len(got) == (N // BATCH) * BATCH
    assert any("failing over" in r.message for r in caplog.records), "no stream broke"


def test_cache_dataset_with_workers_survives_a_node_kill_exactly(rep2):
    ds = CacheDataset(rep2.head_uri, "t", batch_size=BATCH, shuffle="block", seed=1,
                      drop_last=False, columns=COLUMNS)
    # The unfaulted run: a DataLoader hands the loop the rank's steps in
    # order, whatever its worker count (docs/epochs.md, section 3), so the
    # rank read in this process is the reference.
    with rep2.client() as client:
        want = _ids(client.iter_epoch("t", batch_size=BATCH, shuffle="block", seed=1,
                                      drop_last=False))
    assert sorted(want) == list(range(N))
    victim = _streaming_node(rep2, shuffle="block", seed=1, num_workers=2, worker=0)
    loader = DataLoader(ds, batch_size=None, num_workers=2, multiprocessing_context="forkserver")
    got = _read_killing(loader, rep2, victim, COLUMNS)
    assert got == want
    assert not rep2.nodes[victim].alive()  # the workers' streams broke and they read on


def test_rep1_kill_names_node_and_dataset(tmp_path, table):
    with _cluster(tmp_path, table, 1, 1) as cluster:
        uri = cluster.node_uris[0]
        # Over the wire: a reader of shared memory may have been sent the
        # whole epoch's (small) messages before the kill and read on.
        with cluster.client(failover_timeout_s=2.0, share_memory=False) as client:
            batches = client.iter_epoch("t", batch_size=BATCH, shuffle="none")
            with pytest.raises(icefloe.DataUnavailable) as err:
                _read_killing(batches, cluster, 0)
    message = str(err.value)
    print(message)
    assert uri in message and "'t'" in message, message
    assert "replication" in message and "reload" in message, message
    assert err.value.nodes == [uri] and err.value.dataset == "t"


def test_rep1_kill_heals_mid_epoch(tmp_path, table):
    with _cluster(tmp_path, table, 2, 1) as cluster:
        with cluster.client(failover_timeout_s=60.0) as client:
            want = _ids(client.iter_epoch("t", batch_size=BATCH, **PLAN))
            victim = _streaming_node(cluster, **PLAN)
            got = []
            for k, batch in enumerate(client.iter_epoch("t", batch_size=BATCH, **PLAN)):
                if k == KILL_AFTER:
                    cluster.kill_node(victim)
                    cluster.restart_node(victim)
                got.append(batch)
            assert _ids(got) == want
