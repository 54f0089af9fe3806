"""Reading from replicas when a data node is gone: one failover path in Client
for ranges, random access, epochs and Kubeflow shards, all with icefloe errors."""

from __future__ import annotations

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
            client.load("t", table.metadata_location, batch_size=500, replication=2)
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
        # Kubeflow shards name one node per endpoint (nodes return only the
        # rows they hold), so there is no replica to try: the dataset says
        # so with icefloe's error, not a raw gRPC one.
        with pytest.raises(icefloe.Unavailable):
            list(Ids(cluster.head_uri, batch_size=256))
