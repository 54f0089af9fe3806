"""Global row ids follow the table's data in the order it was written: scan
tasks are ordered by data sequence number, then file path, and rows keep
their order within a file. pyiceberg lists the newest manifest first, so a
manifest-order plan gave the last append the lowest row ids.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from iceberg_util import Warehouse

import icefloe

APPENDS = 4
ROWS = 250


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    with icefloe.LocalCluster(num_nodes=2, memory_limit="1GiB",
                              log_dir=tmp_path_factory.mktemp("logs")) as cluster:
        with cluster.client() as c:
            yield c


def rows(start: int) -> pa.Table:
    return pa.table({"id": pa.array(range(start, start + ROWS), pa.int64())})


def test_row_ids_follow_append_order(tmp_path, client):
    table = Warehouse(tmp_path).create("appended", rows(0))
    for k in range(1, APPENDS):
        table.append(rows(k * ROWS))
    assert len(list(table.scan().plan_files())) == APPENDS  # one data file per append
    for load in ("first", "again"):
        client.load(f"order-{load}", table.metadata_location)
        assert client.read(f"order-{load}")["id"].to_pylist() == list(range(APPENDS * ROWS))
    # Random access by row id: row 0 is the first row written.
    assert client.take("order-first", [0])["id"].to_pylist() == [0]
    assert client.read("order-first", 0, 1)["id"].to_pylist() == [0]
    last = APPENDS * ROWS - 1
    assert client.read("order-first", last, last + 1)["id"].to_pylist() == [last]


def test_a_time_travel_load_orders_its_snapshot_the_same_way(tmp_path, client):
    table = Warehouse(tmp_path).create("travel", rows(0))
    table.append(rows(ROWS))
    second = table.current_snapshot().snapshot_id
    table.append(rows(2 * ROWS))
    client.load("order-travel", table.metadata_location, snapshot_id=second)
    assert client.read("order-travel")["id"].to_pylist() == list(range(2 * ROWS))


def test_describe_shows_each_data_files_row_ids(tmp_path, client):
    """Issue 12: a user can trace a row id to its file. describe lists every
    data file pyiceberg plans, oldest first, with its first row id and rows."""
    table = Warehouse(tmp_path).create("traced", rows(0))
    for k in range(1, APPENDS):
        table.append(rows(k * ROWS))
    client.load("order-traced", table.metadata_location)
    files = client.describe("order-traced")["files"]
    theirs = {t.file.file_path: t.file.record_count for t in table.scan().plan_files()}
    assert {f["path"]: f["rows"] for f in files} == theirs
    # Contiguous ids in plan order, covering the dataset.
    assert [f["start"] for f in files] == [k * ROWS for k in range(APPENDS)]
    # Each file's id range holds exactly that file's rows (oldest data first).
    for f in files:
        got = client.read("order-traced", f["start"], f["start"] + f["rows"])
        assert got["id"].to_pylist() == pq.read_table(f["path"].removeprefix("file://"))[
            "id"].to_pylist()
