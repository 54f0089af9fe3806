"""A copy partly on the disk tier is shared with same-host readers: a node
started with --share-memory names its tier files' record batches in the
shared file beside its memory segments, and a reader maps them read-only
instead of having their rows sent (docs/protocol.md, "Shared memory")."""

from __future__ import annotations

import os

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from iceberg_util import Warehouse
from test_metrics import nodes_total, scrape_nodes

import icefloe

ROWS = 600_000  # about 45 MB of Arrow: more than the two nodes' 16 MiB budgets hold
MEMORY = 16 << 20


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    ids = np.arange(ROWS, dtype=np.int64)
    columns = {"id": ids, "s": pc.cast(pa.array(ids % 1000), pa.string())}
    for k in range(7):
        columns[f"x{k}"] = (ids * (k + 1) % 9973).astype(np.float64)
    return Warehouse(tmp_path_factory.mktemp("tier") / "wh").create(
        "t", pa.table(columns), properties={"write.target-file-size-bytes": str(2 << 20)})


def _served(scrapes, transport: str) -> float:
    return nodes_total(scrapes, "icefloe_node_served_bytes_total", ticket="plan",
                       transport=transport)


def _tier_read(scrapes) -> float:
    return (nodes_total(scrapes, "icefloe_node_tier_read_bytes_total", **{"from": "ram"})
            + nodes_total(scrapes, "icefloe_node_tier_read_bytes_total", **{"from": "disk"}))


def test_a_same_host_reader_maps_the_tier_rows_and_reads_them_exactly(table, tmp_path):
    source = table.scan().to_arrow().sort_by("id")
    with icefloe.LocalCluster(num_nodes=2, memory_limit=str(MEMORY), disk_limit="256MiB",
                              log_dir=tmp_path) as cluster:
        with cluster.client() as c, cluster.client(share_memory=False) as wire:
            c.load("t", table.metadata_location, batch_rows=4096)
            nodes = c.status()["nodes"]
            assert sum(n["disk_used_bytes"] for n in nodes) > 0, nodes  # partly on the tier
            in_order = None  # the copy's rows in global row order (the none epoch)
            for shuffle in ("none", "block", "window"):
                before = scrape_nodes(cluster)
                got = pa.Table.from_batches(
                    list(c.iter_epoch("t", batch_size=1000, shuffle=shuffle, seed=7)))
                after = scrape_nodes(cluster)
                in_order = in_order or got
                assert got.sort_by("id").equals(source), shuffle
                over_tcp = pa.Table.from_batches(
                    list(wire.iter_epoch("t", batch_size=1000, shuffle=shuffle, seed=7)))
                assert got.equals(over_tcp), shuffle  # the same rows in the same order
                if shuffle == "window":  # over TCP on a copy with tier rows (node_server.cc)
                    continue
                # Every row named by reference: none sent, none read from the
                # tier by the node for this reader.
                assert _served(after, "shared") - _served(before, "shared") > 0, shuffle
                assert _served(after, "network") == _served(before, "network"), shuffle
                assert _tier_read(after) == _tier_read(before), shuffle
            # Takes by reference map the same files; a read (over TCP) agrees.
            rows = [0, ROWS - 1, 123_456, 77, 599_000, 123_456]
            assert c.take("t", rows).equals(in_order.take(rows))
            mapped = {os.readlink(path) for e in c._exports.values() for path, _ in e._paths}
            tier = str(cluster._tier_dir)
            assert any(p.startswith(tier) for p in mapped), mapped  # tier files, mapped
            assert any(p.startswith("/memfd:") for p in mapped), mapped  # beside memory segments
            assert c.read("t").equals(in_order)


def _ipc_file(path, batches: list[pa.RecordBatch]) -> int:
    """Writes ``batches`` as one Arrow IPC file; an fd of it open read-only."""
    with pa.ipc.new_file(str(path), batches[0].schema) as writer:
        for b in batches:
            writer.write_batch(b)
    return os.open(path, os.O_RDONLY)


def test_the_reader_maps_a_tier_files_batches_and_refuses_a_replaced_file(tmp_path):
    from icefloe import _shared
    from icefloe.errors import ProtocolError

    parts = [pa.record_batch({"id": pa.array(range(k * 100, k * 100 + 100))}) for k in range(3)]
    fd = _ipc_file(tmp_path / "t.arrow", parts)
    try:
        st = os.fstat(fd)
        me = (os.getpid(), fd, st.st_ino, st.st_size)
        # Three segments of one file: batch 2, rows 10..39 of batch 0, batch 1.
        export = _shared.Export(*me, segments=(me[1:], me[1:]),
                                batches=((2, 0, 100), (0, 10, 30), (1, 0, 100)))
        assert [b.column(0).to_pylist()[:2] for b in export.batches] == [[200, 201], [10, 11],
                                                                          [100, 101]]
        assert export.num_rows == 230 and len(export._views) == 1  # the file mapped once
        with pytest.raises(_shared.Unshareable, match="not the node's file"):
            _shared.Export(os.getpid(), fd, st.st_ino + 1, st.st_size, batches=((0, 0, 100),))
        with pytest.raises(ProtocolError, match="record batch 3 of a file of 3"):
            _shared.Export(*me, batches=((3, 0, 1),))
        with pytest.raises(ProtocolError, match=r"rows \[90, 110\) of record batch 0"):
            _shared.Export(*me, batches=((0, 90, 20),))
        with pytest.raises(ProtocolError, match="2 segments' batches for a shared file of 1"):
            _shared.Export(*me, batches=((0, 0, 100), (1, 0, 100)))
    finally:
        os.close(fd)
