"""The disk tier: a table larger than the nodes' memory budget loads, with
the rows that do not fit written to tier files and served memory-mapped
(docs/kubernetes.md, "Sizing"; cpp/icefloe/node/tier/tier_file.h)."""

from __future__ import annotations

import re
import time

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from iceberg_util import Warehouse
from test_head_restart import _node_status, _until
from test_heal import HEAD_ARGS, wait_for
from test_metrics import nodes_total, scrape, scrape_nodes

import icefloe
from icefloe._status_text import render

ROWS = 3_600_000  # about 256 MB of Arrow, in data files of about 2 MB
MEMORY = 32 << 20  # per node: the table is 4x the cluster's memory


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    ids = np.arange(ROWS, dtype=np.int64)
    columns = {"id": ids, "s": pc.cast(pa.array(ids % 1000), pa.string())}
    for k in range(7):
        columns[f"x{k}"] = (ids * (k + 1) % 9973).astype(np.float64)
    return Warehouse(tmp_path_factory.mktemp("tier") / "wh").create(
        "t", pa.table(columns), properties={"write.target-file-size-bytes": str(2 << 20)})


def _by_id(batches) -> pa.Table:
    return pa.Table.from_batches(list(batches)).sort_by("id")


def test_a_table_four_times_the_memory_budget_loads_and_reads_exactly(table, tmp_path):
    source = table.scan().to_arrow().sort_by("id")
    with icefloe.LocalCluster(num_nodes=2, memory_limit=str(MEMORY), disk_limit="512MiB",
                              log_dir=tmp_path) as cluster:
        # Over TCP, as a reader on another host: the streams read the tier
        # through the read-ahead (a same-host reader maps it instead:
        # test_tier_shared.py).
        with cluster.client(share_memory=False) as c:
            desc = c.load("t", table.metadata_location, batch_rows=4096)
            assert desc["rows"] == ROWS
            nodes = c.status()["nodes"]
            assert all(n["disk_limit_bytes"] == 512 << 20 for n in nodes)
            on_disk = sum(n["disk_used_bytes"] for n in nodes)
            scrapes = scrape_nodes(cluster)
            assert nodes_total(scrapes, "icefloe_node_disk_used_bytes") == on_disk
            assert nodes_total(scrapes, "icefloe_node_disk_limit_bytes") == 2 * (512 << 20)
            in_memory = sum(n["memory_used_bytes"] for n in nodes)
            assert in_memory <= 2 * MEMORY
            assert on_disk >= 3 * in_memory, (on_disk, in_memory)  # most rows live on disk
            _assert_describe_says_which_rows_are_on_disk(c, nodes)
            in_order = None  # the copy's rows in global row order
            for shuffle in ("none", "block", "window", "sample"):
                batches = list(c.iter_epoch("t", batch_size=1000, shuffle=shuffle, seed=7))
                in_order = in_order or pa.Table.from_batches(batches)
                assert _by_id(batches).equals(source), shuffle
                if shuffle == "block":
                    _assert_read_ahead_tracked(cluster, on_disk)
                    _assert_status_shows_the_tier_reads(c, on_disk)
            rows = [0, ROWS - 1, 123_456, 77, 123_456]
            assert c.take("t", rows).equals(in_order.take(rows))
            c.evict("t")
            assert sum(n["disk_used_bytes"] for n in c.status()["nodes"]) == 0


def _shards(c, shuffle: str) -> dict:
    """The id batches of an epoch read by 2 ranks of 2 DataLoader workers,
    and by each rank resumed after 5 steps (one worker)."""
    plan = {"batch_size": 1000, "shuffle": shuffle, "seed": 3, "world_size": 2,
            "columns": ["id"]}
    out = {}
    for r in range(2):
        for w in range(2):
            out[r, w] = [b.column("id").to_numpy() for b in
                         c.iter_epoch("t", rank=r, num_workers=2, worker=w, **plan)]
        out[r, "resumed"] = [b.column("id").to_numpy() for b in
                             c.iter_epoch("t", rank=r, start=5 * 2 * 1000, **plan)]
    return out


def test_ranks_workers_and_resume_read_a_tier_copy_as_one_in_memory(table, tmp_path):
    """Sharding over ranks and DataLoader workers, and an epoch resumed
    mid-way, read the very batches from a copy on the tier that they read
    from the same table held in memory: each rank's batches are its workers'
    taken in turn, every row is read once (less padding), and the resumed
    rank reads what the uninterrupted one read after its first 5 steps."""
    got = {}
    for where, kwargs in (("tier", {"memory_limit": str(MEMORY), "disk_limit": "512MiB"}),
                          ("memory", {})):
        with icefloe.LocalCluster(num_nodes=2, log_dir=tmp_path / where, **kwargs) as cluster:
            with cluster.client() as c:
                c.load("t", table.metadata_location, batch_rows=4096)
                on_disk = sum(n["disk_used_bytes"] for n in c.status()["nodes"])
                assert (on_disk > 0) == (where == "tier")
                got[where] = {shuffle: _shards(c, shuffle) for shuffle in ("block", "window")}
    for shuffle, shards in got["tier"].items():
        memory = got["memory"][shuffle]
        assert shards.keys() == memory.keys()
        for key, batches in shards.items():
            assert len(batches) == len(memory[key]), (shuffle, key)
            for a, b in zip(batches, memory[key], strict=True):
                np.testing.assert_array_equal(a, b, err_msg=f"{shuffle} {key}")
        ids = np.concatenate([np.concatenate(shards[r, w]) for r in range(2) for w in range(2)])
        assert np.array_equal(np.unique(ids), np.arange(ROWS)) and len(ids) - ROWS <= 1
        for r in range(2):
            steps = [shards[r, s % 2][s // 2] for s in range(len(shards[r, 0]) + len(shards[r, 1]))]
            assert len(shards[r, "resumed"]) == len(steps) - 5
            for a, b in zip(shards[r, "resumed"], steps[5:], strict=True):
                np.testing.assert_array_equal(a, b)


def _disk_rows(desc: dict) -> tuple[dict[str, int], dict[str, int]]:
    """Per node: the rows describe says it holds, and of those on its disk tier."""
    held: dict[str, int] = {}
    on_disk: dict[str, int] = {}
    for s in desc["slices"]:
        for node, n in zip(s["nodes"], s["disk_rows"], strict=True):
            assert 0 <= n <= s["stop"] - s["start"], s
            held[node] = held.get(node, 0) + s["stop"] - s["start"]
            on_disk[node] = on_disk.get(node, 0) + n
    return held, on_disk


def _assert_describe_says_which_rows_are_on_disk(c, nodes: list[dict]) -> None:
    """Per slice and node, describe's disk rows: on each node their share of
    its rows is the share of its bytes its tier files hold (rows here are of
    one size), and most rows are on disk."""
    desc = wait_for(c, "t", lambda d: sum(_disk_rows(d)[1].values()) > 0, "disk rows reported")
    held, on_disk = _disk_rows(desc)
    assert sum(on_disk.values()) >= 0.7 * ROWS, on_disk
    for n in nodes:
        node = n["location"]
        bytes_share = n["disk_used_bytes"] / (n["disk_used_bytes"] + n["memory_used_bytes"])
        assert on_disk[node] / held[node] == pytest.approx(bytes_share, abs=0.08), (n, on_disk)


def _assert_status_shows_the_tier_reads(c, on_disk: int) -> None:
    """The head's status (from the nodes' heartbeats) and `icefloe status`
    say what the streams read of the tier."""
    deadline = time.monotonic() + 30
    while True:
        nodes = c.status()["nodes"]
        read = sum(n["tier_ram_bytes"] + n["tier_disk_bytes"] for n in nodes)
        if read >= 0.98 * 2 * on_disk or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert read == pytest.approx(2 * on_disk, rel=0.02), nodes
    text = render(c.status())
    assert re.search(r"read \d+\.\d% from RAM, .* waited for; \d+ batches ahead", text), text


def _assert_read_ahead_tracked(cluster, on_disk: int) -> None:
    """After a `none` and a `block` epoch: each read every tier byte once,
    counted by where it was (RAM or disk), and the node's read-ahead read ahead
    within its working set (an eighth of the memory limit by default)."""
    scrapes = scrape_nodes(cluster)
    read = (nodes_total(scrapes, "icefloe_node_tier_read_bytes_total", **{"from": "ram"})
            + nodes_total(scrapes, "icefloe_node_tier_read_bytes_total", **{"from": "disk"}))
    assert read == pytest.approx(2 * on_disk, rel=0.02), (read, on_disk)
    assert nodes_total(scrapes, "icefloe_node_prefetched_bytes_total") > 0
    assert nodes_total(scrapes, "icefloe_node_prefetch_limit_bytes") == 2 * (MEMORY // 8)
    assert 0 < nodes_total(scrapes, "icefloe_node_prefetch_bytes") <= 2 * (MEMORY // 8)


def test_many_load_threads_on_a_small_budget_load_through_the_tier(table, tmp_path):
    """Sixteen reads in flight need more memory than a node of 32 MiB has: a
    read that runs out waits for another to finish (its rows go to the tier)
    and is tried again, so the load completes instead of failing."""
    source = table.scan(selected_fields=("id",)).to_arrow().sort_by("id")
    args = [["--load-threads", "16"] for _ in range(2)]
    with icefloe.LocalCluster(num_nodes=2, memory_limit=str(MEMORY), disk_limit="512MiB",
                              node_args=args, log_dir=tmp_path) as cluster:
        with cluster.client() as c:
            assert c.load("t", table.metadata_location, batch_rows=4096)["rows"] == ROWS
            got = pa.Table.from_batches(list(c.iter_epoch("t", batch_size=1000, seed=2,
                                                          shuffle="block",
                                                          columns=["id"]))).sort_by("id")
            assert got.equals(source)


def test_rows_kept_in_memory_do_not_depend_on_the_load_threads(table, tmp_path):
    """A load keeps in memory what its budget holds besides room for its reads
    in flight, and narrows its reads to that room: with 16 load threads a node
    of 128 MiB kept no rows in memory (room was kept for 16 reads at their
    peak), with 1 it kept half of its budget."""
    kept = {}
    for threads in (1, 16):
        args = [["--load-threads", str(threads)] for _ in range(2)]
        with icefloe.LocalCluster(num_nodes=2, memory_limit=str(4 * MEMORY),
                                  disk_limit="512MiB", node_args=args,
                                  log_dir=tmp_path / str(threads)) as cluster:
            with cluster.client() as c:
                assert c.load("t", table.metadata_location, batch_rows=4096)["rows"] == ROWS
                kept[threads] = [n["memory_used_bytes"] for n in c.status()["nodes"]]
    for threads, used in kept.items():
        assert all(u >= MEMORY for u in used), (threads, kept)  # a quarter of the budget
    assert sum(kept[16]) == pytest.approx(sum(kept[1]), rel=0.25), kept


def test_without_a_disk_tier_the_same_load_is_refused_naming_memory_and_disk(table, tmp_path):
    with icefloe.LocalCluster(num_nodes=2, memory_limit=str(MEMORY), log_dir=tmp_path) as cluster:
        with cluster.client() as c:
            with pytest.raises(icefloe.OutOfMemory, match=r"of memory, 0 B of disk tier"):
                c.load("t", table.metadata_location, batch_rows=4096)


def test_a_node_killed_with_rows_on_disk_heals_and_its_restart_clears_the_tier(table, tmp_path):
    """SIGKILL leaves the node's tier files behind; the head heals its slices
    onto the others (onto their disk tiers too) and the epoch reads every row
    again; the node restarted on the same directory adopts its old rows, which
    the head, having healed around it, drops: its tier empties."""
    source = table.scan(selected_fields=("id",)).to_arrow().sort_by("id")
    with icefloe.LocalCluster(num_nodes=3, memory_limit=str(MEMORY), disk_limit="512MiB",
                              head_args=HEAD_ARGS, log_dir=tmp_path) as cluster:
        with cluster.client() as c:
            loaded = c.load("t", table.metadata_location, batch_rows=4096)
            before = {n["location"]: n["disk_used_bytes"] for n in c.status()["nodes"]}
            victim = 1
            tier = cluster._tier_dir / f"node-{victim}"
            assert any(p.suffix == ".arrow" for p in tier.iterdir())
            cluster.kill_node(victim)
            healed = wait_for(c, "t", lambda d: d["state"] == "ready" and d.get("heal_seconds"),
                              "healed")
            assert healed["generation"] == loaded["generation"]
            after = {n["location"]: n["disk_used_bytes"] for n in c.status()["nodes"]
                     if n["state"] == "alive"}
            assert sum(after.values()) > sum(v for k, v in before.items() if k in after)
            got = pa.Table.from_batches(list(c.iter_epoch("t", batch_size=1000, seed=1,
                                                          columns=["id"]))).sort_by("id")
            assert got.equals(source)
            cluster.restart_node(victim)
            deadline = time.monotonic() + 30
            while any(p.suffix in (".arrow", ".partial") for p in tier.iterdir()):
                assert time.monotonic() < deadline, sorted(p.name for p in tier.iterdir())
                time.sleep(0.2)


def test_a_node_back_before_the_head_saw_it_die_takes_the_heal_of_its_replicas(tmp_path):
    """Replication 2 on 3 nodes whose rows live on their tiers. A node killed
    and restarted at once adopts its old rows and registers at a new address
    before the head has seen the old one die (heartbeat timeout 5 s): the head
    drops the adopted rows as stray (node.evict with stray), then, once it
    sees the death, heals the lost replicas onto that same node. Evicting the
    strays used to close their generation on the node, which then refused the
    heal for good: the copy stayed one replica short."""
    ids = np.arange(1_000_000, dtype=np.int64)
    table = Warehouse(tmp_path / "wh").create(
        "t", pa.table({"id": ids, "x": ids * 3.0}),
        properties={"write.target-file-size-bytes": str(1 << 20)})
    with icefloe.LocalCluster(num_nodes=3, memory_limit="8MiB", disk_limit="256MiB",
                              log_dir=tmp_path / "logs") as cluster:
        with cluster.client() as c:
            c.load("t", table.metadata_location, replication=2)
            assert sum(n["disk_used_bytes"] for n in c.status()["nodes"]) > 0
            gone = cluster.nodes[1].location
            cluster.kill_node(1)
            cluster.restart_node(1)  # adopts its tier; a new address

            def replicated() -> bool:
                alive = {n["location"] for n in c.status()["nodes"] if n["state"] == "alive"}
                desc = c.describe("t")
                return gone not in alive and desc["state"] == "ready" and all(
                    len(set(s["nodes"]) & alive) >= 2 for s in desc["slices"])

            deadline = time.monotonic() + 45
            while not replicated():
                assert time.monotonic() < deadline, (c.describe("t").get("heal_error"),
                                                     cluster.logs()[-3000:])
                time.sleep(0.25)
            got = pa.Table.from_batches(list(c.iter_epoch("t", batch_size=1000, seed=4,
                                                          columns=["id"]))).sort_by("id")
            assert np.array_equal(got.column("id").to_numpy(), ids)


def test_a_node_restarted_on_its_tier_adopts_the_files_it_can_prove(table, tmp_path):
    """A node SIGKILLed and restarted at once on its directory maps again the
    tier files it can prove intact (size and CRC-32): it serves those rows
    without reading them from the table, a file with one byte changed is
    removed, and the head heals the rest (what it held in memory, and the
    corrupt file's rows). Every row reads back exactly."""
    source = table.scan(selected_fields=("id",)).to_arrow().sort_by("id")
    with icefloe.LocalCluster(num_nodes=2, memory_limit=str(MEMORY), disk_limit="512MiB",
                              log_dir=tmp_path) as cluster:
        with cluster.client() as c:
            loaded = c.load("t", table.metadata_location, batch_rows=4096)
            victim = 1
            tier = cluster._tier_dir / f"node-{victim}"
            files = sorted(p for p in tier.iterdir() if p.suffix == ".arrow")
            assert len(files) >= 2
            cluster.kill_node(victim)
            with open(files[0], "r+b") as f:  # one byte of its data changed
                f.seek(files[0].stat().st_size // 2)
                byte = f.read(1)
                f.seek(-1, 1)
                f.write(bytes([byte[0] ^ 0xFF]))
            cluster.restart_node(victim, same_port=True)
            left = sorted(p for p in tier.iterdir() if p.suffix == ".arrow")
            assert left == files[1:]  # adopted, but for the corrupt one
            held = nodes_total([scrape(cluster.nodes[victim].health)],
                               "icefloe_node_disk_used_bytes")
            assert held == sum(p.stat().st_size for p in left)
            assert "is corrupt" in cluster.nodes[victim].tail()
            healed = wait_for(c, "t", lambda d: d["state"] == "ready" and d.get("heal_seconds"),
                              "healed")
            assert healed["generation"] == loaded["generation"]
            assert healed["slices_missing"] == 0
            # The head kept the adopted rows where they are: the node still
            # holds those files, and describe counts its rows on them.
            assert all(p.exists() for p in left)
            on_disk = _disk_rows(wait_for(c, "t", lambda d: _disk_rows(d)[1].get(
                cluster.nodes[victim].location, 0) > 0, "adopted rows described"))[1]
            assert on_disk[cluster.nodes[victim].location] > 0
            got = pa.Table.from_batches(list(c.iter_epoch("t", batch_size=1000, seed=3,
                                                          columns=["id"]))).sort_by("id")
            assert got.equals(source)


def test_a_head_restart_adopts_a_copy_on_the_tier(table, tmp_path):
    """The head SIGKILLed and restarted: it adopts the copy from the nodes'
    records (nothing read from the table, the tier files untouched), and a
    window epoch over it reads every row exactly."""
    source = table.scan(selected_fields=("id",)).to_arrow().sort_by("id")
    with icefloe.LocalCluster(num_nodes=2, memory_limit=str(MEMORY), disk_limit="512MiB",
                              log_dir=tmp_path) as cluster:
        with cluster.client() as c:
            loaded = c.load("t", table.metadata_location, batch_rows=4096)
            files = sorted(p for p in cluster._tier_dir.rglob("*.arrow"))
            # The head hands each node its catalog record on its next rounds.
            _until("records on every node", lambda: all(
                d.get("record") for n in cluster.nodes for d in _node_status(n)["datasets"]))
            cluster.kill_head()
            cluster.restart_head()
        with cluster.client() as c:
            desc = c.describe("t")
            assert desc["generation"] == loaded["generation"]
            assert desc["state"] == "ready"
            assert sorted(p for p in cluster._tier_dir.rglob("*.arrow")) == files
            got = pa.Table.from_batches(list(c.iter_epoch("t", batch_size=1000, seed=5,
                                                          columns=["id"]))).sort_by("id")
            assert got.equals(source)
