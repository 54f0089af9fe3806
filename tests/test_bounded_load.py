"""Loads in bounded memory (issue 42): each scan task streams from its file
into memory or the disk tier a batch at a time, and each batch's read is
admitted only once the memory its file's footer says it needs is free. So a
row group larger than a node's whole budget loads, the load threads do not
decide whether a load fits, and a batch that cannot fit at all is refused
before anything is read (docs/kubernetes.md, "Sizing")."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from iceberg_util import Warehouse

import icefloe

ROWS = 2_000_000  # one row group of about 130 MB of Arrow
MEMORY = 32 << 20  # per node: a quarter of that row group


def _columns(rows: int) -> dict:
    ids = np.arange(rows, dtype=np.int64)
    columns = {"id": ids, "s": pc.cast(pa.array(ids % 100_003), pa.string())}
    for k in range(6):
        columns[f"x{k}"] = (ids * (k + 1) % 9973).astype(np.float64)
    return columns


@pytest.fixture(scope="module")
def big_row_group(tmp_path_factory):
    table = Warehouse(tmp_path_factory.mktemp("bounded") / "wh").create(
        "big", pa.table(_columns(ROWS)),
        properties={"write.parquet.row-group-limit": str(ROWS),
                    "write.target-file-size-bytes": str(1 << 30)})
    files = [t.file.file_path for t in table.scan().plan_files()]
    assert len(files) == 1
    meta = pq.ParquetFile(files[0].removeprefix("file://")).metadata
    assert meta.num_row_groups == 1  # the premise: one row group, read as one unit before
    return table


def test_a_row_group_four_times_a_nodes_memory_loads_and_reads_back_exactly(big_row_group,
                                                                             tmp_path):
    source = big_row_group.scan().to_arrow().sort_by("id")
    assert source.nbytes > 3 * MEMORY
    with icefloe.LocalCluster(num_nodes=2, memory_limit=str(MEMORY), disk_limit="1GiB",
                              log_dir=tmp_path) as cluster:
        with cluster.client() as c:
            assert c.load("big", big_row_group.metadata_location, batch_rows=8192,
                          replication=2)["rows"] == ROWS
            nodes = c.status()["nodes"]
            assert all(n["memory_used_bytes"] <= MEMORY for n in nodes), nodes
            assert all(n["disk_used_bytes"] > 0 for n in nodes), nodes
            for shuffle in ("none", "window"):
                got = pa.Table.from_batches(list(c.iter_epoch("big", batch_size=10_000,
                                                              shuffle=shuffle, seed=3)))
                assert got.sort_by("id").equals(source), shuffle
            assert c.read("big", 0, ROWS).sort_by("id").equals(source)


@pytest.fixture(scope="module")
def many_files(tmp_path_factory):
    return Warehouse(tmp_path_factory.mktemp("bounded-many") / "wh").create(
        "many", pa.table(_columns(600_000)),
        properties={"write.target-file-size-bytes": str(1 << 20)})


def test_sixteen_load_threads_on_small_nodes_load_twenty_times_in_a_row(many_files, tmp_path):
    """Before, the first wave of reads started before any task's size was
    known and relied on an out-of-memory retry: whether a load succeeded
    depended on timing. Each read is now admitted by its estimate."""
    source = many_files.scan(selected_fields=("id",)).to_arrow().sort_by("id")
    assert len(list(many_files.scan().plan_files())) >= 8
    args = [["--load-threads", "16"] for _ in range(2)]
    with icefloe.LocalCluster(num_nodes=2, memory_limit=str(16 << 20), disk_limit="512MiB",
                              node_args=args, log_dir=tmp_path) as cluster:
        with cluster.client() as c:
            for attempt in range(20):
                assert c.load("m", many_files.metadata_location,
                              batch_rows=4096)["rows"] == 600_000, attempt
                if attempt in (0, 19):
                    got = pa.Table.from_batches(list(c.iter_epoch(
                        "m", batch_size=5000, shuffle="block", seed=attempt,
                        columns=["id"]))).sort_by("id")
                    assert got.equals(source)
                c.evict("m")


def test_a_batch_no_budget_can_hold_is_refused_up_front_naming_file_and_budget(big_row_group,
                                                                             tmp_path):
    with icefloe.LocalCluster(num_nodes=1, memory_limit=str(MEMORY), disk_limit="1GiB",
                              log_dir=tmp_path) as cluster:
        with cluster.client() as c:
            with pytest.raises(icefloe.OutOfMemory,
                               match=r"reading \S+\.parquet needs about \d+ bytes of memory at "
                                     r"once \(batches of 2000000 rows.*memory budget is \d+ bytes: "
                                     r"lower batch_rows"):
                c.load("big", big_row_group.metadata_location, batch_rows=ROWS)
            assert c.status()["nodes"][0]["disk_used_bytes"] == 0  # nothing was written
            # The node serves on: the same rows in smaller batches load.
            assert c.load("big", big_row_group.metadata_location,
                          batch_rows=4096)["rows"] == ROWS
