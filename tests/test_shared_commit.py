"""Copies are shared with same-host readers wherever they fit: a copy that
nearly fills its node's memory budget is laid out in segments one at a time
(each segment's heap rows go before the next is written) (docs/protocol.md,
"Shared memory")."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from iceberg_util import Warehouse
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
