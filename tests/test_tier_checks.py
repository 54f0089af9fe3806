"""What a node keeps on its disk tier is checked before it is trusted (issue
42, defects 4 and 6): a tier manifest edited into other valid JSON is not
adopted, and a load whose rows the nodes' memory and disk cannot hold under
the node's own rule is refused up front, never half-way (docs/kubernetes.md,
"Larger than memory: the disk tier")."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pytest
from iceberg_util import Warehouse
from test_heal import wait_for

import icefloe

ROWS = 1_000_000


def _table(path, rows: int, file_bytes: int, seed: int = 0):
    """id in order and random doubles (no compression to speak of): its
    Arrow size is what the head estimates, 8 bytes a value."""
    rng = np.random.default_rng(seed)
    ids = np.arange(rows, dtype=np.int64)
    columns = {"id": ids, **{f"x{k}": rng.random(rows) for k in range(3)}}
    return Warehouse(path).create("t", pa.table(columns),
                                  properties={"write.target-file-size-bytes": str(file_bytes)})


def _swap_two_batch_starts(tier) -> tuple[int, int]:
    """Swaps, in the one manifest in `tier`, the row ids of two tier batches
    of the same row count (the result is valid JSON, each file intact)."""
    (manifest,) = tier.glob("*.manifest.json")
    m = json.loads(manifest.read_text())
    by_rows: dict[int, tuple[int, int]] = {}
    for fi, f in enumerate(m["files"]):
        with pa.ipc.open_file(tier / f["file"]) as reader:
            for bi in range(reader.num_record_batches):
                if f["starts"][bi] is None:
                    continue
                n = reader.get_batch(bi).num_rows
                if n in by_rows:
                    (fa, ba) = by_rows[n]
                    a, b = m["files"][fa]["starts"][ba], f["starts"][bi]
                    m["files"][fa]["starts"][ba], f["starts"][bi] = b, a
                    manifest.write_text(json.dumps(m))
                    return a, b
                by_rows[n] = (fi, bi)
    raise AssertionError("no two tier batches of the same row count")


def test_a_manifest_with_swapped_batch_starts_is_not_adopted_and_reads_stay_exact(tmp_path):
    """A node SIGKILLed, its manifest edited (two batches' row ids swapped:
    valid JSON, every file's CRC-32 still holds) and restarted on its
    directory: it refuses the manifest by its checksum, naming it, removes
    its files, and the head heals the node's rows from the table. Row ids
    read back exactly; before the manifest had a checksum of its own, the
    node served the two batches at each other's ids."""
    table = _table(tmp_path / "wh", ROWS, 1 << 20)
    with icefloe.LocalCluster(num_nodes=2, memory_limit="8MiB", disk_limit="256MiB",
                              log_dir=tmp_path / "logs") as cluster:
        with cluster.client() as c:
            loaded = c.load("t", table.metadata_location, batch_rows=4096)
            expected = c.read("t", 0, ROWS, columns=["id"]).column("id").to_numpy()
            victim = 1
            tier = cluster._tier_dir / f"node-{victim}"
            files = sorted(p for p in tier.iterdir() if p.suffix == ".arrow")
            assert files
            cluster.kill_node(victim)
            _swap_two_batch_starts(tier)
            cluster.restart_node(victim, same_port=True)
            assert not any(p.exists() for p in files), cluster.nodes[victim].tail()
            log = cluster.nodes[victim].tail(50)
            assert ".manifest.json: its content does not match its checksum" in log, log
            healed = wait_for(c, "t", lambda d: d["state"] == "ready" and d.get("heal_seconds"),
                              "healed")
            assert healed["generation"] == loaded["generation"]
            got = c.read("t", 0, ROWS, columns=["id"]).column("id").to_numpy()
            np.testing.assert_array_equal(got, expected)


def test_a_disk_limit_too_small_for_what_memory_cannot_keep_is_refused_up_front(tmp_path):
    """Two nodes of 16 MiB memory and 3 MiB disk; a table of 4 x 8 bytes x
    1M rows (30.5 MiB). Counting all memory (16 + 3 MiB a node) it fits, and
    the load was admitted, then failed half-way: a node keeps a quarter of
    its memory and its read-ahead's eighth free of rows (10 MiB of rows at
    most), so its tier needs more than 5 MiB. Placement now counts what the
    node says it keeps (row_memory_bytes): refused up front, naming memory
    and disk. With disk enough, the same load fits and reads back exactly."""
    table = _table(tmp_path / "wh", ROWS, 256 << 10)
    with icefloe.LocalCluster(num_nodes=2, memory_limit="16MiB", disk_limit="3MiB",
                              log_dir=tmp_path / "small") as cluster:
        with cluster.client() as c:
            with pytest.raises(icefloe.OutOfMemory,
                               match=r"dataset does not fit: needs .* of memory, .* of disk tier"):
                c.load("t", table.metadata_location, batch_rows=4096)
            assert all(n["disk_used_bytes"] == 0 for n in c.status()["nodes"])
    with icefloe.LocalCluster(num_nodes=2, memory_limit="16MiB", disk_limit="32MiB",
                              log_dir=tmp_path / "enough") as cluster:
        with cluster.client() as c:
            assert c.load("t", table.metadata_location, batch_rows=4096)["rows"] == ROWS
            ids = c.read("t", 0, ROWS, columns=["id"]).column("id").to_numpy()
            np.testing.assert_array_equal(np.sort(ids), np.arange(ROWS))
