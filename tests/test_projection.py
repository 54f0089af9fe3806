"""Projection on the wire (issue 15, goal 4): a reader asking for some columns
receives only those. The head checks the names and puts their indices in the
tickets; the nodes slice or gather only those columns, so the bytes a node
sends (its served-bytes counter) shrink with the projection.

Every projected read is compared row for row with the full read's
``select(columns)``, for ranges, epochs (none, window, sample), take and the
torch datasets.
"""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.flight as flight
import pytest
import torch
from iceberg_util import Warehouse
from test_metrics import nodes_total, scrape_nodes

import icefloe
from icefloe.errors import InvalidArgument
from icefloe.torch import CacheDataset, CacheMapDataset

ROWS = 30_000
FEATURES = 16
BATCH = 1000
SERVED = "icefloe_node_served_bytes_total"
# id, label and 16 features: 18 columns (the table), plus a string
# column for the gather's non-fixed-width path.
PROJECTED = ["label", "f3"]


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    rng = np.random.default_rng(15)
    columns = {"id": np.arange(ROWS, dtype=np.int64),
               "label": rng.integers(0, 10, ROWS).astype(np.int32)}
    columns.update({f"f{i}": rng.standard_normal(ROWS).astype(np.float32)
                    for i in range(FEATURES)})
    data = pa.table(columns)
    names = pa.array([f"row-{i}" if i % 7 else None for i in range(ROWS)])
    data = data.append_column("name", names)
    return Warehouse(tmp_path_factory.mktemp("wh")).create("t", data)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, table):
    with icefloe.LocalCluster(num_nodes=2, log_dir=tmp_path_factory.mktemp("logs")) as c:
        with c.client() as client:
            client.load("t", table.metadata_location, batch_rows=4000)
        yield c


def _served(cluster) -> float:
    return nodes_total(scrape_nodes(cluster), SERVED)


def _measured(cluster, read):
    """``read()``'s result and the bytes the nodes sent for it."""
    before = _served(cluster)
    out = read()
    return out, _served(cluster) - before


def _column_bytes(table: pa.Table, names: list[str]) -> int:
    return sum(table.column(n).nbytes for n in names)


def test_range_read_projects_on_the_nodes(cluster):
    # Over the wire, whose bytes are measured (a reader of shared memory maps
    # the nodes' files: test_shared_memory.py).
    with cluster.client(share_memory=False) as c:
        full, full_bytes = _measured(cluster, lambda: c.read("t", 100, 25_100))
        got, got_bytes = _measured(
            cluster, lambda: c.read("t", 100, 25_100, columns=["f3", "name", "id"]))
        assert got.schema.names == ["f3", "name", "id"]
        assert got.equals(full.select(["f3", "name", "id"]))
        info = c.flight_info("t", 0, 10, columns=["id", "label"])
        assert info.schema.names == ["id", "label"]
        assert info.schema.field("label").type == pa.int32()
        narrow, narrow_bytes = _measured(cluster, lambda: c.read("t", 100, 25_100,
                                                                  columns=PROJECTED))
        assert narrow.equals(full.select(PROJECTED))
    # The nodes sent the projected columns' bytes (plus IPC padding), far
    # below the full width: 2 of 19 columns.
    assert full_bytes >= _column_bytes(full, full.schema.names)
    assert _column_bytes(narrow, PROJECTED) <= narrow_bytes < 0.3 * full_bytes
    assert got_bytes < full_bytes


@pytest.mark.parametrize("shuffle", ["none", "window", "sample"])
def test_epoch_projects_on_the_nodes(cluster, shuffle):
    plan = {"batch_size": BATCH, "seed": 3, "epoch": 2, "shuffle": shuffle, "drop_last": False}
    # Over the wire, whose bytes are measured (a reader of shared memory is
    # sent no rows at all: test_shared_memory.py).
    with cluster.client(share_memory=False) as c:
        full, full_bytes = _measured(cluster, lambda: list(c.iter_epoch("t", **plan)))
        got, got_bytes = _measured(
            cluster, lambda: list(c.iter_epoch("t", columns=PROJECTED, **plan)))
        info, _ = c.epoch_info("t", columns=["name", "id"], **plan)
        assert info.schema.names == ["name", "id"]
        wide = list(c.iter_epoch("t", columns=["name", "id", "f0"], **plan))
    assert len(got) == len(full) == -(-ROWS // BATCH)
    for k, (a, b) in enumerate(zip(got, full, strict=True)):
        assert a.schema.names == PROJECTED, k
        assert a.equals(b.select(PROJECTED)), f"batch {k}"
    for a, b in zip(wide, full, strict=True):
        assert a.equals(b.select(["name", "id", "f0"]))
    want = sum(_column_bytes(pa.Table.from_batches([b]), PROJECTED) for b in got)
    assert want <= got_bytes < 0.3 * full_bytes, (got_bytes, full_bytes)


def test_take_projects_on_the_nodes(cluster):
    rows = [ROWS - 1, 0, 17, 17, 20_001, 5, 14_000, 3]
    with cluster.client(share_memory=False) as c:  # over the wire, whose bytes are measured
        full, full_bytes = _measured(cluster, lambda: c.take("t", rows))
        got, got_bytes = _measured(cluster, lambda: c.take("t", rows, columns=["name", "id"]))
        assert got.schema.names == ["name", "id"]
        assert got.column("id").to_pylist() == rows
        assert got.equals(full.select(["name", "id"]))
        many = list(range(0, ROWS, 3))
        all_cols, all_bytes = _measured(cluster, lambda: c.take("t", many))
        narrow, narrow_bytes = _measured(cluster, lambda: c.take("t", many, columns=PROJECTED))
        assert narrow.equals(all_cols.select(PROJECTED))
        empty = c.take("t", [], columns=["f1"])
        assert empty.num_rows == 0 and empty.schema.names == ["f1"]
    assert got_bytes < full_bytes
    assert narrow_bytes < 0.3 * all_bytes


@pytest.mark.parametrize("read", ["range", "epoch", "take"])
def test_unknown_duplicate_or_empty_columns_are_refused(cluster, read):
    def run(columns):
        with cluster.client() as c:
            if read == "range":
                return c.read("t", columns=columns)
            if read == "epoch":
                return list(c.iter_epoch("t", batch_size=BATCH, columns=columns))
            return c.take("t", [1, 2], columns=columns)

    with pytest.raises(InvalidArgument, match=r"'columns'\[1\]: no column 'nope'"):
        run(["id", "nope"])
    with pytest.raises(InvalidArgument, match="'f1' is asked for twice"):
        run(["f1", "label", "f1"])
    with pytest.raises(InvalidArgument, match="'columns'"):
        run([])
    # The head keeps serving: the same read without the mistake works.
    assert run(["id"]) is not None


def test_get_schema_is_projected(cluster):
    cmd = json.dumps({"v": 1, "kind": "range", "dataset": "t", "columns": ["f2", "id"]})
    with cluster.client() as c:
        schema = c._head.get_schema(flight.FlightDescriptor.for_command(cmd.encode())).schema
    assert schema.names == ["f2", "id"]


def test_torch_datasets_receive_only_their_columns(cluster):
    with cluster.client() as c:
        full = list(c.iter_epoch("t", batch_size=BATCH, shuffle="window", seed=0,
                                 drop_last=True))
    ds = CacheDataset(cluster.head_uri, "t", batch_size=BATCH, shuffle="window", seed=0,
                      columns=["f5", "label"])
    got = list(ds)
    assert len(got) == len(full)
    for tensors, batch in zip(got, full, strict=True):
        assert list(tensors) == ["f5", "label"]
        for name in ("f5", "label"):
            assert isinstance(tensors[name], torch.Tensor)
            assert np.array_equal(tensors[name].numpy(), batch.column(name).to_numpy()), name
    rows = CacheMapDataset(cluster.head_uri, "t", columns=["id", "f0"], batched=True)
    tensors = rows.__getitems__([9, 4, 9])
    assert list(tensors) == ["id", "f0"]
    assert tensors["id"].tolist() == [9, 4, 9]
    assert CacheMapDataset(cluster.head_uri, "t", columns=["label"])[7].keys() == {"label"}
