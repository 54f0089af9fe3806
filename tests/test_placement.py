"""Even placement (issue 30): a table of few or large data files is split at
row-group boundaries, so every node gets a fair share and a table that fits the
cluster never fails for fitting no single node. The parts stay exact through a
node's SIGKILL (heal) and a head restart (adoption re-plans the same parts)."""

from __future__ import annotations

import time

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from iceberg_util import Warehouse

import icefloe

ROWS = 300_000
ROW_GROUP = 10_000  # 30 row groups in the table's one data file
HEAD_ARGS = ["--heartbeat-timeout-ms", "1000"]


def one_file_table(root):
    rng = np.random.default_rng(7)
    data = pa.table({"id": np.arange(ROWS, dtype=np.int64), "x": rng.random(ROWS)})
    table = Warehouse(root).create(
        "one", data, properties={"write.parquet.row-group-limit": str(ROW_GROUP)})
    files = [task.file for task in table.scan().plan_files()]
    assert len(files) == 1 and len(files[0].split_offsets) == ROWS // ROW_GROUP
    assert pq.ParquetFile(files[0].file_path.removeprefix("file://")).num_row_groups == 30
    return table, data


def wait_for(client, name, done, what, timeout_s=60.0):
    deadline = time.monotonic() + timeout_s
    while True:
        desc = client.describe(name)
        if done(desc):
            return desc
        assert time.monotonic() < deadline, f"{what} not reached in {timeout_s}s: {desc}"
        time.sleep(0.05)


def rows_per_node(desc) -> dict[str, int]:
    held: dict[str, int] = {}
    for s in desc["slices"]:
        held[s["nodes"][0]] = held.get(s["nodes"][0], 0) + s["stop"] - s["start"]
    return held


def test_a_one_file_table_spreads_over_every_node_and_stays_exact(tmp_path):
    table, data = one_file_table(tmp_path / "wh")
    # 4.8 MB of Arrow: no node's 4 MiB holds the file, the four together do.
    with icefloe.LocalCluster(num_nodes=4, memory_limit="4MiB", head_args=HEAD_ARGS,
                              log_dir=tmp_path / "logs") as cluster, cluster.client() as client:
        desc = client.load("one", table.metadata_location, batch_rows=4096)
        assert desc["rows"] == ROWS
        assert desc["tasks"] >= 4 and desc["scan"]["row_groups_total"] == 30
        held = rows_per_node(desc)
        assert set(held) == set(cluster.node_uris), held
        # Within two row groups of the fair share.
        assert max(held.values()) - min(held.values()) <= 2 * ROW_GROUP, held
        assert client.read("one").equals(data)
        # The file is one run of row ids, whatever its parts.
        files = client.describe("one")["files"]
        assert [(f["start"], f["rows"]) for f in files] == [(0, ROWS)]

        # A restarted head adopts the copy and re-plans the same parts.
        cluster.restart_head()
        files = client.describe("one")["files"]
        assert [(f["start"], f["rows"]) for f in files] == [(0, ROWS)]

        # A node SIGKILLed: its parts of the file are read again onto the others.
        victim = cluster.node_uris.index(desc["slices"][0]["nodes"][0])
        cluster.kill_node(victim)
        healed = wait_for(client, "one", lambda d: d["state"] == "ready" and
                          cluster.node_uris[victim] not in rows_per_node(d), "healed")
        assert healed["generation"] == desc["generation"]
        assert client.read("one").equals(data)
        # Epochs read every row once.
        seen = np.concatenate([b["id"].to_numpy() for b in client.iter_epoch(
            "one", seed=3, epoch=0, batch_size=1000, shuffle="window")])
        assert np.array_equal(np.sort(seen), np.arange(ROWS))


def test_row_group_counts_are_the_files_at_any_replication(tmp_path):
    """describe's row-group figures count each of the file's row groups once:
    every replica reads them, so the head sums the nodes' counts and divides
    by the replication (dividing each node's count first lost the remainders:
    29 of 30 on four nodes at replication 3)."""
    table, _ = one_file_table(tmp_path / "wh")
    with icefloe.LocalCluster(num_nodes=4, memory_limit="16MiB", head_args=HEAD_ARGS,
                              log_dir=tmp_path / "logs") as cluster, cluster.client() as client:
        desc = client.load("two", table.metadata_location, batch_rows=4096, replication=3)
        assert desc["rows"] == ROWS and desc["replication"] == 3
        assert (desc["scan"]["row_groups_total"], desc["scan"]["row_groups_read"]) == (30, 30)
