"""A copy partly on the disk tier is shared with same-host readers: a node
started with --share-memory names its tier files' record batches in the
shared file beside its memory segments, and a reader maps them read-only
instead of having their rows sent (docs/protocol.md, "Shared memory")."""

from __future__ import annotations

import os
import signal
import threading
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from iceberg_util import Warehouse
from test_metrics import nodes_total, scrape, scrape_nodes

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
                # Every row named by reference (a window span's rows too,
                # across hundreds of tier units): none sent, none read from the
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


@pytest.mark.parametrize("version", [b"1", b"2"])
def test_earlier_readers_get_window_epochs_over_tier_rows_over_tcp(table, tmp_path, monkeypatch,
                                                                   version):
    """A reader of header version 1 or 2 paid per segment for a window span
    across tier units (0.3-0.4x TCP): nodes send it such an epoch over TCP,
    the same rows, and still answer its block epochs by reference."""
    from icefloe import _shared

    monkeypatch.setattr(_shared, "HEADER", (b"icefloe-shared", version))
    with icefloe.LocalCluster(num_nodes=2, memory_limit=str(MEMORY), disk_limit="256MiB",
                              log_dir=tmp_path) as cluster:
        with cluster.client() as c, cluster.client(share_memory=False) as wire:
            c.load("t", table.metadata_location, batch_rows=4096)
            for shuffle in ("window", "block"):
                before = scrape_nodes(cluster)
                got = pa.Table.from_batches(list(c.iter_epoch(
                    "t", batch_size=1000, shuffle=shuffle, seed=2, rank=1, world_size=2)))
                after = scrape_nodes(cluster)
                assert got.equals(pa.Table.from_batches(list(wire.iter_epoch(
                    "t", batch_size=1000, shuffle=shuffle, seed=2, rank=1, world_size=2))))
                by_reference = _served(after, "shared") > _served(before, "shared")
                assert by_reference == (shuffle == "block"), shuffle
                assert (_served(after, "network") > _served(before, "network")) == \
                    (shuffle == "window"), shuffle


def _range_served(scrapes, transport: str) -> float:
    return nodes_total(scrapes, "icefloe_node_served_rows_total", ticket="range",
                       transport=transport)


def test_epochs_of_two_ranks_and_range_reads_map_memory_and_tier(table, tmp_path):
    """A copy partly in memory, partly on the tier: two ranks' block and
    window epochs and range reads come by reference (nothing sent, nothing
    read from the tier by the nodes), the same rows in the same order as
    over TCP."""
    with icefloe.LocalCluster(num_nodes=2, memory_limit=str(MEMORY), disk_limit="256MiB",
                              log_dir=tmp_path) as cluster:
        with cluster.client() as c, cluster.client(share_memory=False) as wire:
            c.load("t", table.metadata_location, batch_rows=4096)
            nodes = c.status()["nodes"]
            assert sum(n["disk_used_bytes"] for n in nodes) > 0, nodes
            assert sum(n["memory_used_bytes"] for n in nodes) > 0, nodes
            for shuffle, rank in [(s, r) for s in ("block", "window") for r in (0, 1)]:
                def epoch(client, shuffle=shuffle, rank=rank):
                    return pa.Table.from_batches(list(client.iter_epoch(
                        "t", batch_size=1000, shuffle=shuffle, seed=3, epoch=1, rank=rank,
                        world_size=2)))
                before = scrape_nodes(cluster)
                got = epoch(c)
                after = scrape_nodes(cluster)
                assert got.num_rows == ROWS // 2, (shuffle, rank)
                assert got.equals(epoch(wire)), (shuffle, rank)
                assert _served(after, "shared") > _served(before, "shared"), (shuffle, rank)
                assert _served(after, "network") == _served(before, "network"), (shuffle, rank)
                assert _tier_read(after) == _tier_read(before), (shuffle, rank)
            for start, stop, columns in [(0, None, None), (123_457, 456_789, ["s", "id"]),
                                         (ROWS - 5, ROWS, ["x3"]), (9, 9, None)]:
                before = scrape_nodes(cluster)
                got = c.read("t", start, stop, columns)
                after = scrape_nodes(cluster)
                want = wire.read("t", start, stop, columns)
                assert got.num_rows == want.num_rows == (stop or ROWS) - start
                assert got.equals(want), (start, stop, columns)
                assert _range_served(after, "shared") - _range_served(before, "shared") == \
                    got.num_rows, (start, stop)
                assert _range_served(after, "network") == _range_served(before, "network")
                assert _tier_read(after) == _tier_read(before)


def test_a_node_killed_mid_read_fails_over_by_reference(table, tmp_path, monkeypatch):
    """Every node holds every row (replication 3 of 3): a node SIGKILLed in
    the middle of two ranks' block and window epochs, and another as a range
    read asks it, are failed over to replicas, mapped too; the rows are
    exactly those over TCP."""
    from icefloe import client as client_module

    with icefloe.LocalCluster(num_nodes=3, memory_limit=str(MEMORY), disk_limit="256MiB",
                              log_dir=tmp_path) as cluster:
        with cluster.client(failover_timeout_s=60.0) as c, \
                cluster.client(share_memory=False) as wire:
            c.load("t", table.metadata_location, batch_rows=4096, replication=3)
            readers = [(s, r) for s in ("block", "window") for r in (0, 1)]
            want = [pa.Table.from_batches(list(wire.iter_epoch(
                "t", batch_size=1000, shuffle=s, seed=5, rank=r, world_size=2)))
                for s, r in readers]
            want_read = wire.read("t", 1000, ROWS - 1000)
            sent = [scrape(n.health) for n in cluster.nodes[1:]]
            epochs = [c.iter_epoch("t", batch_size=1000, shuffle=s, seed=5, rank=r,
                                   world_size=2) for s, r in readers]
            # 40 batches each (inside a window epoch's first span of 65, read whole)
            got = [[next(e) for _ in range(40)] for e in epochs]
            os.kill(cluster.nodes[0].popen.pid, signal.SIGKILL)
            cluster.nodes[0].popen.wait(timeout=30)
            for k, reader in enumerate(readers):
                got[k] += list(epochs[k])
                assert pa.Table.from_batches(got[k]).equals(want[k]), reader
            # The replicas that took over named their rows too: none sent.
            now = [scrape(n.health) for n in cluster.nodes[1:]]
            assert _served(now, "network") == _served(sent, "network")
            assert _served(now, "shared") > _served(sent, "shared")
            # A range read whose first DoGet goes to a live node killed just before.
            real = client_module.Client._do_get
            by_uri = {n.location: n for n in cluster.nodes}
            killed: list[Any] = []
            lock = threading.Lock()  # the read asks its endpoints' nodes at once

            def kill_first(self, ticket, uri, shared):
                with lock:
                    node = by_uri[uri]
                    if not killed and node.popen.poll() is None:
                        os.kill(node.popen.pid, signal.SIGKILL)
                        node.popen.wait(timeout=30)
                        killed.append(node)
                return real(self, ticket, uri, shared)

            monkeypatch.setattr(client_module.Client, "_do_get", kill_first)
            alive = [n for n in cluster.nodes if n.popen.poll() is None]
            before = [scrape(n.health) for n in alive]
            got_read = c.read("t", 1000, ROWS - 1000)
            survivor = [n for n in alive if n.popen.poll() is None]
            assert len(killed) == 1 and survivor and survivor[0] is not killed[0]
            after = [scrape(survivor[0].health)]
            before = [s for n, s in zip(alive, before, strict=True) if n is survivor[0]]
            assert _range_served(after, "shared") - _range_served(before, "shared") == \
                ROWS - 2000
            assert _range_served(after, "network") == _range_served(before, "network")
    assert got_read.equals(want_read)
