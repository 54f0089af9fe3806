"""Reading from replicas when a data node is gone: one failover path in Client
for ranges, random access, epochs and Kubeflow shards, all with icefloe errors."""

from __future__ import annotations

import logging

import numpy as np
import pyarrow as pa
import pytest
from iceberg_util import Warehouse

import icefloe
from icefloe.torch import DataCacheDataset

N = 3000


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    root = tmp_path_factory.mktemp("failover")
    wh = Warehouse(root / "wh")
    table = wh.create("t", pa.table({"id": np.arange(N, dtype=np.int64)}))
    with icefloe.LocalCluster(num_nodes=2, log_dir=root / "logs",
                              head_args=["--default-dataset", "t"],
                              node_args=[["--default-dataset", "t"]] * 2) as c:
        with c.client() as client:
            client.load("t", table.metadata_location, batch_rows=500, replication=2)
            # Whichever node is listed first for some slice is killed below.
            first = client.describe("t")["slices"][0]["nodes"][0]
        c.victim = c.node_uris.index(first)
        yield c


class Ids(DataCacheDataset):
    def from_arrow_rb_to_tensor(self, chunk):
        yield chunk.column("id").to_pylist()


def test_reads_fail_over_to_the_replica(cluster):
    before = [i for chunk in Ids(cluster.head_uri, batch_size=256) for i in chunk]
    assert sorted(before) == list(range(N))
    cluster.kill_node(cluster.victim)
    with cluster.client() as client:
        assert client.read("t").column("id").to_pylist() == list(range(N))
        assert client.take("t", [2999, 0, 1500]).column("id").to_pylist() == [2999, 0, 1500]
        for shuffle in ("window", "none", "sample"):
            rows = [i for b in client.iter_epoch("t", batch_size=256, shuffle=shuffle,
                                                  drop_last=False)
                    for i in b.column("id").to_pylist()]
            assert sorted(rows) == list(range(N)), shuffle
    # Kubeflow shards too: every endpoint lists the slice's replicas, so
    # each shard is read from the survivor, every row exactly once.
    for world_size in (1, 3):
        rows = []
        for rank in range(world_size):
            ds = Ids(cluster.head_uri, batch_size=256)
            ds._dist = (rank, world_size)
            rows += [i for chunk in ds for i in chunk]
        assert sorted(rows) == list(range(N)), world_size


def test_kubeflow_shard_fails_over_mid_stream(tmp_path, caplog):
    # One data file in batches of 20k rows (~2.6 MiB each) on both nodes: the
    # shard's stream is far larger than what gRPC buffers, so killing the
    # node serving it after the first batch breaks it mid-stream. The
    # dataset goes on at the next row on the replica.
    rows = 400_000
    table = Warehouse(tmp_path / "wh").create("t", pa.table({
        "id": np.arange(rows, dtype=np.int64),
        "pad": pa.array([b"x" * 120] * rows, pa.binary())}))
    with icefloe.LocalCluster(num_nodes=2, log_dir=tmp_path / "logs",
                              head_args=["--default-dataset", "t"],
                              node_args=[["--default-dataset", "t"]] * 2) as c:
        with c.client() as client:
            client.load("t", table.metadata_location, batch_rows=20_000, replication=2)
            endpoints = client.kubeflow_shard(0, 1).endpoints
        serving = endpoints[0].locations[0].uri.decode()
        assert len(endpoints[0].locations) == 2
        caplog.set_level(logging.WARNING, logger="icefloe")
        chunks = iter(Ids(c.head_uri, batch_size=20_000))
        seen = list(next(chunks))
        c.kill_node(c.node_uris.index(serving))
        for chunk in chunks:
            seen += chunk
        assert seen == list(range(rows))
        broke = [r for r in caplog.records if "broke at row" in r.getMessage()]
        assert broke and serving in broke[0].getMessage(), caplog.text
        assert "broke at row 0 " not in broke[0].getMessage()  # mid-stream, not before it
