"""A refresh on shared-memory nodes lays out only the rows it read: the new
generation's shared file names the old generation's segments for the tasks it
reuses (the same memfds), and the retired generation's own segments go when
it is freed (docs/protocol.md, "Shared memory")."""

from __future__ import annotations

import os

import numpy as np
import pyarrow as pa
import pytest
from test_refresh import RETAIN_ARGS, rows, wait_freed

import icefloe


def _segments(export) -> list[tuple[int, int]]:
    """(inode, rows) of each segment of a mapped shared file, in file order."""
    paths = getattr(export, "_paths", None) or [(export._path, export._inode)]  # one file
    batches = getattr(export, "batches", None) or [export.batch]
    return list(zip((inode for _, inode in paths), (b.num_rows for b in batches), strict=True))


def _node_files(client, name: str) -> dict[str, object]:
    """Each node's shared file of the dataset's current generation, mapped by
    a take of every row (takes by reference keep the files they map)."""
    desc = client.describe(name)
    client.take(name, np.arange(desc["rows"]))
    gen = desc["generation"]
    files = {uri: e for (uri, _, g), e in client._exports.items() if g == gen}
    assert files, "no node answered by reference"
    return files


def _open_memfds(pid: int) -> set[int]:
    """Inodes of the memory files process ``pid`` holds open."""
    out = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        path = f"/proc/{pid}/fd/{fd}"
        try:
            if os.readlink(path).startswith("/memfd:icefloe:"):
                out.add(os.stat(path).st_ino)
        except OSError:
            continue  # closed meanwhile
    return out


def _pid(export) -> int:
    paths = getattr(export, "_paths", None) or [(export._path, export._inode)]
    return int(paths[0][0].split("/")[2])


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with icefloe.LocalCluster(num_nodes=2, memory_limit="256MiB", head_args=RETAIN_ARGS,
                              log_dir=tmp_path_factory.mktemp("logs")) as c:
        yield c


def test_a_refresh_shares_the_reused_tasks_segments(tmp_path, cluster):
    from iceberg_util import Warehouse

    table = Warehouse(tmp_path / "wh").create("grows", rows(5000))
    for i in range(1, 8):
        table.append(rows(5000, start=i * 5000))
    with cluster.client() as c, cluster.client(share_memory=False) as wire:
        first = c.load("grows", table.metadata_location, batch_rows=1000)
        before = {uri: _segments(e) for uri, e in _node_files(c, "grows").items()}
        pids = {uri: _pid(e) for uri, e in _node_files(c, "grows").items()}

        table.append(rows(3000, start=100_000))
        desc = c.load("grows", table.metadata_location, batch_rows=1000)
        r = desc["refresh"]
        assert (r["tasks_reused"], r["tasks_read"]) == (8, 1), r
        after = {uri: _segments(e) for uri, e in _node_files(c, "grows").items()}

        # (a) Exact across the refresh, by reference as over the wire.
        want = table.scan().to_arrow().sort_by("id")
        assert c.read("grows").sort_by("id").equals(wire.read("grows").sort_by("id"))
        assert c.read("grows").sort_by("id")["id"].equals(want["id"])
        for mode in ("none", "window"):
            ours = pa.Table.from_batches(list(c.iter_epoch("grows", batch_size=700, shuffle=mode,
                                                           seed=3, world_size=2, rank=1)))
            theirs = pa.Table.from_batches(list(wire.iter_epoch(
                "grows", batch_size=700, shuffle=mode, seed=3, world_size=2, rank=1)))
            assert ours.equals(theirs), mode

        # (b) Every old segment is the new generation's too (same memfd), and
        # the new segments hold only the rows the refresh read.
        written = 0
        for uri, old in before.items():
            new = after[uri]
            old_inodes = {i for i, _ in old}
            assert old_inodes <= {i for i, _ in new}, (uri, old, new)
            written += sum(n for i, n in new if i not in old_inodes)
        assert written == r["rows_read"] * desc["replication"], (before, after)

        # (c) Once the old generation is freed, the nodes hold the new file's
        # segments (the reused ones among them) and none of its own.
        wait_freed(c, "grows", first["generation"])
        for uri, pid in pids.items():
            held, new = _open_memfds(pid), {i for i, _ in after[uri]}
            assert new <= held and not (held & ({i for i, _ in before[uri]} - new)), uri


def test_a_retired_generations_own_segments_go_when_it_is_freed(tmp_path, cluster):
    from iceberg_util import Warehouse

    table = Warehouse(tmp_path / "wh").create("rewritten", rows(5000))
    table.append(rows(5000, start=5000))
    with cluster.client() as c:
        first = c.load("rewritten", table.metadata_location, batch_rows=1000)
        old = {uri: _segments(e) for uri, e in _node_files(c, "rewritten").items()}
        pids = {uri: _pid(e) for uri, e in _node_files(c, "rewritten").items()}
        table.delete("id >= 5000 and id < 5100")  # rewrites the second file
        desc = c.load("rewritten", table.metadata_location, batch_rows=1000)
        assert desc["refresh"]["tasks_dropped"] == 1 and desc["rows"] == 9900
        new = {uri: _segments(e) for uri, e in _node_files(c, "rewritten").items()}
        assert c.read("rewritten").sort_by("id")["id"].equals(
            table.scan().to_arrow().sort_by("id")["id"])
        wait_freed(c, "rewritten", first["generation"])
        dropped = 0
        for uri, pid in pids.items():
            held = _open_memfds(pid)
            mine = {i for i, _ in new.get(uri, [])}
            gone = {i for i, _ in old[uri]} - mine
            assert mine <= held and not (held & gone), (uri, old, new)
            dropped += len(gone)
        assert dropped, (old, new)  # the rewritten file's segment was the old copy's own
