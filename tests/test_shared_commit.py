"""Copies are shared with same-host readers wherever they fit: a copy that
nearly fills its node's memory budget is laid out in segments one at a time
(each segment's heap rows go before the next is written), and a copy a node
adopts from its disk tier after a restart names its tier files as segments
(docs/protocol.md, "Shared memory")."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from iceberg_util import Warehouse
from test_heal import wait_for
from test_metrics import nodes_total, scrape_nodes

import icefloe


def _by_reference(scrapes) -> tuple[float, float]:
    """(rows named by reference, rows sent) for plan and range tickets."""
    shared = sum(nodes_total(scrapes, "icefloe_node_served_rows_total", ticket=t,
                             transport="shared") for t in ("plan", "range"))
    sent = sum(nodes_total(scrapes, "icefloe_node_served_rows_total", ticket=t,
                           transport="network") for t in ("plan", "range"))
    return shared, sent


def _table(root, rows: int, file_bytes: int):
    ids = np.arange(rows, dtype=np.int64)
    columns = {"id": ids, "s": pc.cast(pa.array(ids % 1000), pa.string())}
    for k in range(7):
        columns[f"x{k}"] = (ids * (k + 1) % 9973).astype(np.float64)
    return Warehouse(root / "wh").create(
        "t", pa.table(columns), properties={"write.target-file-size-bytes": str(file_bytes)})


def _disk_rows(desc: dict) -> int:
    return sum(sum(s["disk_rows"]) for s in desc["slices"])


FULL_ROWS = 1_000_000  # about 76 MB of Arrow (9 columns)
FULL_MEMORY = 76 << 20  # the copy takes about 0.9 of it


@pytest.fixture(scope="module")
def big_table(tmp_path_factory):
    return _table(tmp_path_factory.mktemp("full"), FULL_ROWS, 16 << 20)


def test_a_copy_that_nearly_fills_the_budget_is_shared(big_table, tmp_path):
    """One node whose copy takes about 0.9 of --memory-limit: committing it
    lays out each segment while the heap rows it replaces are released, so the
    copy is shared (not 'not shared' for want of room for a second copy) and a
    same-host reader's epoch and read are by reference and exact."""
    source = big_table.scan().to_arrow().sort_by("id")
    with icefloe.LocalCluster(num_nodes=1, memory_limit=str(FULL_MEMORY),
                              log_dir=tmp_path) as cluster:
        with cluster.client() as c:
            c.load("t", big_table.metadata_location, batch_rows=8192)
            used = c.status()["nodes"][0]["memory_used_bytes"]
            assert used > 0.85 * FULL_MEMORY, used  # the copy nearly fills the budget
            log = cluster.nodes[0].tail()
            assert "not shared" not in log and " msg=shared " in log, log
            before = scrape_nodes(cluster)
            got = pa.Table.from_batches(list(c.iter_epoch("t", batch_size=1000, seed=3)))
            read = c.read("t")
            after = scrape_nodes(cluster)
            assert got.sort_by("id").equals(source)
            assert read.equals(source)
            shared = _by_reference(after)[0] - _by_reference(before)[0]
            sent = _by_reference(after)[1] - _by_reference(before)[1]
            assert (shared, sent) == (2 * FULL_ROWS, 0)
            # The budget holds the shared copy alone: no heap rows kept beside it.
            assert c.status()["nodes"][0]["memory_used_bytes"] <= FULL_MEMORY


TIER_ROWS = 300_000  # about 23 MB of Arrow, in files of about 2 MB
TIER_MEMORY = 4 << 20  # too small to keep a row group in memory: every row goes to the tier


@pytest.fixture(scope="module")
def tier_table(tmp_path_factory):
    return _table(tmp_path_factory.mktemp("adopt"), TIER_ROWS, 2 << 20)


def test_a_copy_adopted_from_the_tier_is_shared(tier_table, tmp_path):
    """A shared-memory node with its copy on the disk tier, SIGKILLed and
    restarted at its address over the same --disk-dir, adopts the copy; a
    same-host reader's epoch, take and read of it map the tier files (by
    reference, nothing sent) and are exact."""
    source = tier_table.scan().to_arrow().sort_by("id")
    with icefloe.LocalCluster(num_nodes=1, memory_limit=str(TIER_MEMORY), disk_limit="256MiB",
                              log_dir=tmp_path) as cluster:
        with cluster.client() as c:
            loaded = c.load("t", tier_table.metadata_location, batch_rows=4096)
            node = c.status()["nodes"][0]
            assert node["disk_used_bytes"] > 0, node
            wait_for(c, "t", lambda d: _disk_rows(d) == TIER_ROWS,  # wholly on the tier
                     "every row on the tier")
            cluster.kill_node(0)
            cluster.restart_node(0, same_port=True)
            assert "adopted from the disk tier" in cluster.nodes[0].tail()
        # New clients: no mapping of the old process's files.
        with cluster.client() as c, cluster.client(share_memory=False) as wire:
            desc = wait_for(c, "t", lambda d: _disk_rows(d) == TIER_ROWS, "adopted rows described")
            assert desc["generation"] == loaded["generation"] and desc["state"] == "ready", desc
            before = scrape_nodes(cluster)
            got = pa.Table.from_batches(list(c.iter_epoch("t", batch_size=1000, shuffle="block",
                                                          seed=5)))
            read = c.read("t", 1000, 250_000, ["id", "x3"])
            taken = c.take("t", [0, TIER_ROWS - 1, 123_456, 77])
            after = scrape_nodes(cluster)
            assert taken.equals(wire.take("t", [0, TIER_ROWS - 1, 123_456, 77]))
            assert got.sort_by("id").equals(source)
            assert read.num_rows == 249_000
            assert read.equals(wire.read("t", 1000, 250_000, ["id", "x3"]))
            shared = _by_reference(after)[0] - _by_reference(before)[0]
            sent = _by_reference(after)[1] - _by_reference(before)[1]
            assert shared >= TIER_ROWS + 249_000 and sent == 0, (shared, sent)
