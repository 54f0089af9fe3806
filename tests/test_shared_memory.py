"""Same-host readers map the nodes' shared memory (``--share-memory``) instead
of streaming rows: the same batches as over the wire, rows nobody can change,
and rows that stay readable after the node is gone."""

from __future__ import annotations

import json
import mmap
import os
import re
import signal
import threading

import numpy as np
import piece_util
import pyarrow as pa
import pytest
import torch
from iceberg_util import Warehouse
from test_metrics import nodes_total, scrape

import icefloe
from icefloe import _native, _pieces, _shared
from icefloe.torch import CacheDataset

N = 30_000
MODES = ["none", "block", "window", "sample"]


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    root = tmp_path_factory.mktemp("shared")
    ids = np.arange(N, dtype=np.int64)
    data = pa.table({"id": ids, "x": (ids * 0.5).astype(np.float32),
                     "label": (ids % 10).astype(np.int32)})
    t = Warehouse(root / "wh").create("t", data.slice(0, 10_000))
    for k in (1, 2):
        t.append(data.slice(k * 10_000, 10_000))
    return t


def _epochs(cluster: icefloe.LocalCluster, table, **client) -> dict[str, pa.Table]:
    """Every mode's epoch (rank 1 of 3, batch 500; and a projection)."""
    with cluster.client(**client) as c:
        c.load("t", table.metadata_location, batch_rows=2000)
        out = {}
        for mode in MODES:
            batches = c.iter_epoch("t", batch_size=500, shuffle=mode, seed=4, epoch=1,
                                   rank=1, world_size=3)
            out[mode] = pa.Table.from_batches(list(batches))
        out["columns"] = pa.Table.from_batches(list(c.iter_epoch(
            "t", batch_size=700, shuffle="block", seed=4, epoch=2, columns=["label", "id"])))
        return out


def _served_bytes(cluster, nodes=None, transport: str = "network") -> float:
    """Bytes of rows the nodes sent by value (or named by reference:
    transport="shared") for plan tickets."""
    scrapes = [scrape(n.health) for n in (cluster.nodes if nodes is None else nodes)]
    return nodes_total(scrapes, "icefloe_node_served_bytes_total", ticket="plan",
                       transport=transport)


def _plan_rows(cluster, transport: str) -> float:
    scrapes = [scrape(n.health) for n in cluster.nodes]
    return nodes_total(scrapes, "icefloe_node_served_rows_total", ticket="plan",
                       transport=transport)


def test_epochs_by_reference_equal_epochs_over_the_wire(table, tmp_path):
    with icefloe.LocalCluster(num_nodes=2, log_dir=tmp_path / "a") as shared:
        by_reference = _epochs(shared, table)
        served = _served_bytes(shared)
        # Another process's view: a client that does not map streams the same rows.
        by_value_here = _epochs(shared, table, share_memory=False)
        served_by_value = _served_bytes(shared) - served
    with icefloe.LocalCluster(num_nodes=2, share_memory=False, log_dir=tmp_path / "b") as plain:
        by_value = _epochs(plain, table)
    for name, got in by_reference.items():
        assert got.equals(by_value[name]), name
        assert got.equals(by_value_here[name]), name
    assert by_reference["columns"].column_names == ["label", "id"]
    # none, block and window went by reference: only sample rows were sent.
    assert 0 < served < served_by_value / 3


def test_window_rows_by_reference_are_put_in_place_from_the_files(table, tmp_path,
                                                                   monkeypatch):
    """Nodes name a window span's rows in their files; the client copies
    them from there into place in one native pass (the same batches as a
    reader over the wire gets), and no row crosses the wire."""
    real = _pieces._assembled
    from_files: list[bool] = []

    def spy(merger, messages):
        from_files.append(all(m.holds == _native.ROWS_IN_FILE for m in messages))
        return real(merger, messages)

    with icefloe.LocalCluster(num_nodes=2, log_dir=tmp_path) as cluster:
        with cluster.client() as c:
            c.load("t", table.metadata_location, batch_rows=2000)

            def epoch(client):
                return pa.Table.from_batches(list(client.iter_epoch(
                    "t", batch_size=1000, shuffle="window", seed=9, epoch=3)))

            monkeypatch.setattr(_pieces, "_assembled", spy)
            native = epoch(c)
            monkeypatch.undo()
            assert _served_bytes(cluster) == 0
            # Reads by reference count too, as transport="shared" (issue 30:
            # they were invisible): the epoch's rows, about their Arrow bytes.
            assert _plan_rows(cluster, "shared") == N
            assert _plan_rows(cluster, "network") == 0
            arrow_bytes = table.scan().to_arrow().nbytes
            assert 0.5 * arrow_bytes < _served_bytes(cluster, transport="shared") < 2 * arrow_bytes
            with cluster.client(share_memory=False) as wire:
                over_tcp = epoch(wire)
            assert _plan_rows(cluster, "network") == N
    assert from_files and all(from_files)
    assert native.equals(over_tcp)
    assert sorted(native.column("id").to_pylist()) == list(range(N))


def test_tensors_written_by_the_trainer_leave_the_cache_alone(table, tmp_path):
    with icefloe.LocalCluster(num_nodes=1, log_dir=tmp_path) as cluster:
        with cluster.client() as c:
            c.load("t", table.metadata_location, batch_rows=2000)
        ds = CacheDataset(cluster.head_uri, "t", batch_size=1000, shuffle="none")
        first = next(iter(ds))
        assert torch.equal(first["id"], torch.arange(1000))
        first["x"].fill_(-1.0)  # in place, on the mapped rows: a private copy
        first["id"] += 7
        again = next(iter(ds))
        assert torch.equal(again["id"], torch.arange(1000))
        assert torch.equal(again["x"], torch.arange(1000, dtype=torch.float32) * 0.5)
        assert torch.equal(first["id"], torch.arange(1000) + 7)


def test_epochs_by_reference_are_read_on_the_loops_thread(table, tmp_path, monkeypatch):
    """A batch by reference is a slice, or (window) one native assembly from
    the files: no assembly thread to hand it over, whatever ``prefetch``
    asks; streams over the wire (sample epochs, or no shared memory) keep
    theirs."""
    from icefloe import _pieces

    started: list[str] = []

    class Counted(threading.Thread):
        def start(self) -> None:
            started.append(self.name)  # every thread started (threading is one module)
            super().start()

    monkeypatch.setattr(_pieces.threading, "Thread", Counted)
    with icefloe.LocalCluster(num_nodes=2, log_dir=tmp_path) as cluster:
        with cluster.client() as c, cluster.client(share_memory=False) as wire:
            c.load("t", table.metadata_location, batch_rows=2000)
            for client, mode, threads in [(c, "none", 0), (c, "block", 0), (c, "window", 0),
                                          (c, "sample", 1), (wire, "none", 1)]:
                started.clear()
                got = list(client.iter_epoch("t", batch_size=1000, shuffle=mode, prefetch=2))
                assembly = [n for n in started if n == "icefloe-assemble"]
                assert len(assembly) == threads, (mode, client.share_memory)
                assert sum(b.num_rows for b in got) == N


def _mapped_file(address: int) -> str:
    """The file this process maps at ``address`` ("" for anonymous memory)."""
    with open("/proc/self/maps") as maps:
        for line in maps:
            fields = line.split(maxsplit=5)
            low, high = (int(a, 16) for a in fields[0].split("-"))
            if low <= address < high:
                return fields[5].strip() if len(fields) > 5 else ""
    return ""


def test_range_reads_by_reference_are_slices_of_the_nodes_files(table, tmp_path):
    """Client.read from nodes on this host maps their shared files: the rows
    are views of the mapping (no copy, nothing sent), equal to a read over
    TCP, projected and counted as any read."""
    with icefloe.LocalCluster(num_nodes=2, log_dir=tmp_path) as cluster:
        with cluster.client() as c, cluster.client(share_memory=False) as wire:
            c.load("t", table.metadata_location, batch_rows=2000)
            for start, stop, columns in [(0, None, None), (1234, 25_001, ["label", "id"]),
                                         (N - 1, N, ["x"]), (7, 7, None)]:
                before = _served_rows(cluster, "range", "shared")
                sent = _served_rows(cluster, "range", "network")
                got = c.read("t", start, stop, columns)
                assert _served_rows(cluster, "range", "shared") - before == got.num_rows
                assert _served_rows(cluster, "range", "network") == sent
                want = wire.read("t", start, stop, columns)
                assert got.num_rows == (stop or N) - start
                assert got.equals(want), (start, stop, columns)
                assert got.column_names == want.column_names
                for chunk in [c for c in got.column(0).chunks if len(c)]:  # views of memfds
                    assert "memfd:icefloe" in _mapped_file(chunk.buffers()[1].address)


def test_mapped_rows_outlive_a_killed_node(table, tmp_path):
    with icefloe.LocalCluster(num_nodes=2, log_dir=tmp_path) as cluster:
        with cluster.client() as c:
            c.load("t", table.metadata_location, batch_rows=2000)
            batches = list(c.iter_epoch("t", batch_size=1000, shuffle="none"))
            for node in cluster.nodes:
                os.kill(node.popen.pid, signal.SIGKILL)
                node.popen.wait(timeout=30)
    ids = pa.concat_arrays([b.column("id") for b in batches]).to_numpy()
    assert np.array_equal(ids, np.arange(N))
    x = pa.concat_arrays([b.column("x") for b in batches]).to_numpy()
    assert np.array_equal(x, (np.arange(N) * 0.5).astype(np.float32))


def test_a_file_that_is_not_the_nodes_is_refused(tmp_path):
    fd = os.memfd_create("icefloe-test")
    try:
        os.write(fd, b"\0" * mmap.PAGESIZE)
        inode = os.fstat(fd).st_ino
        with pytest.raises(_shared.Unshareable, match="is not the node's file"):
            _shared.Export(os.getpid(), fd, inode + 1, mmap.PAGESIZE)
        with pytest.raises(_shared.Unshareable, match="cannot open"):
            _shared.Export(os.getpid(), 987654, inode, mmap.PAGESIZE)
    finally:
        os.close(fd)


def test_a_file_of_several_batches_is_refused():
    data = pa.record_batch({"id": pa.array(np.arange(10, dtype=np.int64))})
    sink = pa.BufferOutputStream()
    with pa.ipc.new_file(sink, data.schema) as writer:
        writer.write_batch(data)
        writer.write_batch(data)
    raw = sink.getvalue().to_pybytes()
    fd = os.memfd_create("icefloe-test")
    try:
        os.write(fd, raw)
        with pytest.raises(icefloe.InvalidArgument, match="holds 2 record batches, not 1"):
            _shared.Export(os.getpid(), fd, os.fstat(fd).st_ino, len(raw))
    finally:
        os.close(fd)


def test_a_stream_naming_its_file_wrongly_is_refused():
    """The schema's "shared file" is checked field by field, the held rows
    against the file's, before anything is read from it."""
    fd, _ = _own_export(10)
    st = os.fstat(fd)
    good = {"pid": os.getpid(), "fd": fd, "inode": st.st_ino, "size": st.st_size,
            "columns": [], "dataset": "t", "generation": 1, "held": [0, 4, 6, 12],
            "segments": []}

    class Named:  # a stream whose schema names a file
        def __init__(self, **desc):
            self.schema = pa.schema([], metadata={"icefloe.shared": json.dumps({**good, **desc})})

    try:
        reader = _shared.shared_reader(Named())
        assert reader.export.held == ((0, 4), (6, 12)) and reader.export.generation == 1
        assert reader.export.local_rows(np.array([7, 0])).tolist() == [5, 0]
        for desc, words in (({"held": [0, 4, 6]}, "'held' must hold (start, stop) pairs"),
                            ({"held": [6, 12, 0, 4]}, "'held' range 1 [0, 4) is empty or before"),
                            ({"fd": -1}, "'fd'"), ({"columns": "0,1"}, "'columns'"),
                            ({"held": [0, 11]}, "holds 10 rows, not the 11 it named"),
                            ({"segments": [fd, st.st_ino]}, "(fd, inode, size) triples")):
            with pytest.raises(icefloe.ProtocolError, match=re.escape(words)):
                _shared.shared_reader(Named(**desc))
        with pytest.raises(icefloe.ProtocolError, match="shared file: not JSON"):
            _shared.shared_reader(type("Raw", (), {"schema": pa.schema(
                [], metadata={"icefloe.shared": "pid=1"})})())
    finally:
        os.close(fd)


def test_only_loopback_nodes_are_asked_to_share():
    assert _shared.is_local("grpc+tcp://127.0.0.1:5000")
    assert _shared.is_local("grpc://localhost:1")
    assert _shared.is_local("grpc+tcp://[::1]:5000")
    assert not _shared.is_local("grpc+tcp://10.0.0.7:5000")
    assert not _shared.is_local("grpc+tls://node-0.cache.svc:50051")


def _own_export(rows: int) -> tuple[int, _shared.Export]:
    """A shared file this process writes (as a node lays one out) and maps."""
    data = pa.record_batch({"id": pa.array(np.arange(rows, dtype=np.int64))})
    sink = pa.BufferOutputStream()
    with pa.ipc.new_file(sink, data.schema) as writer:
        writer.write_batch(data)
    raw = sink.getvalue().to_pybytes()
    fd = os.memfd_create("icefloe-test")
    os.write(fd, raw)
    return fd, _shared.Export(os.getpid(), fd, os.fstat(fd).st_ino, len(raw))


class _Sent:
    """One message as pyarrow's reader returns it: no columns, n rows."""

    def __init__(self, rows: int, metadata: bytes) -> None:
        self.data = pa.RecordBatch.from_pydict({}) if rows == 0 else \
            pa.record_batch([pa.nulls(rows)], names=["_"]).select([])
        self.app_metadata = pa.py_buffer(metadata)


class _Reader:
    def __init__(self, *sent: _Sent) -> None:
        self._sent = list(sent)

    def read_chunk(self) -> _Sent:
        return self._sent.pop(0)

    def cancel(self) -> None:
        pass


def _piece(*runs: tuple[int, int]) -> bytes:
    """A piece of batch 0 (5 rows, in order) by reference: ``runs`` of the file."""
    return piece_util.encode(0, 5, runs=[(0, 5)], source=runs)


def test_pieces_by_reference_are_checked():
    fd, export = _own_export(100)
    try:
        def read(rows: int, metadata: bytes) -> pa.RecordBatch:
            reader = _shared.SharedReader(_Reader(_Sent(rows, metadata)), export, ())
            return piece_util.merged(reader.read_chunk())

        got = read(5, _piece((90, 3), (7, 2)))
        assert got.column("id").to_pylist() == [90, 91, 92, 7, 8]
        # One run in order: a zero-copy slice of the file.
        got = read(4, piece_util.encode(0, 4, runs=[(0, 4)], source=[(10, 4)]))
        assert got.column("id").to_pylist() == [10, 11, 12, 13]
        assert got.column("id").offset == 10
        assert got.column("id").buffers()[1].address == \
            export.batch.column("id").buffers()[1].address
        for rows, metadata, error in [
                (5, _piece((98, 5)), "outside its shared file of 100 rows"),
                (5, _piece((1, 4)), "named 4 shared rows for a piece of 5"),
                (5, _piece((1, 5))[:-1], "its length is not its header's"),
                (5, piece_util.encode(0, 5, runs=[(0, 5)]), "carries its rows on a stream by "
                 "reference")]:
            with pytest.raises(icefloe.InvalidArgument, match=error):
                read(rows, metadata)
    finally:
        os.close(fd)


def test_a_piece_across_segments_is_assembled_from_the_whole_file():
    """A piece whose rows cross segments (a window span's over a copy on the
    tier, whose units are segments of their own) comes as one message; the
    reader hands it to the merge whole, with the file's segments exported
    once for the stream, and the merge assembles the batch in one call, each
    row at its position."""
    fd, _ = _own_export(100)
    try:
        me = (os.getpid(), fd, os.fstat(fd).st_ino, os.fstat(fd).st_size)
        export = _shared.Export(*me, segments=(me[1:], me[1:]),
                                batches=((0, 0, 40), (0, 40, 30), (0, 70, 30)))
        source = [(35, 10), (5, 3), (65, 10)]  # segments 0-1, 0, 1-2
        rows = [r for s, n in source for r in range(s, s + n)]
        positions = np.random.default_rng(1).permutation(len(rows)).tolist()
        for entries in ({"positions": positions}, {"runs": [(0, len(rows))]}):
            placed = positions if "positions" in entries else list(range(len(rows)))
            metadata = piece_util.encode(0, len(rows), source=source, **entries)
            reader = _shared.SharedReader(_Reader(_Sent(len(rows), metadata),
                                                  _Sent(len(rows), metadata)), export, ())
            message = reader.read_chunk()
            assert message.rows == len(rows) and message.file is not None
            assert message.data.num_rows == 100  # the whole file
            assert reader.read_chunk().file is message.file  # exported once per stream
            feed = iter([message])
            got = next(_pieces.merge_steps(_native.Merger(1, 0, 1), 1,
                                           lambda k, feed=feed: next(feed, None))).data
            want = [0] * len(rows)
            for r, p in zip(rows, placed, strict=True):
                want[p] = r
            assert got.column("id").to_pylist() == want
        # A chunk (whole batches in order) is never cut: the node keeps it in one.
        chunk = piece_util.encode(0, 13, whole=True, source=[(35, 10), (60, 3)])
        reader = _shared.SharedReader(_Reader(_Sent(13, chunk)), export, ())
        with pytest.raises(icefloe.ProtocolError, match="more than one segment"):
            reader.read_chunk()
    finally:
        os.close(fd)


def test_files_for_pieces_across_segments_are_kept_while_the_node_holds_them():
    """The file a piece across segments is assembled from is mapped and
    exported once and kept for later streams (by the node's process, its
    segments and the projection) while the node holds it, at most a few."""
    fd, _ = _own_export(100)
    me = (os.getpid(), fd, os.fstat(fd).st_ino, os.fstat(fd).st_size)
    key = (me[0], me[1:], (me[1:],), ((0, 0, 40), (0, 40, 60)))
    files = _shared._Files()
    try:
        first = files.get(key, ())
        assert first.num_rows == 100
        assert files.get(key, ()) is first  # kept
        assert files.get(key, (0,)) is not first  # another projection
        for k in range(files._MAX):  # the least recently used go first
            files.get((me[0], me[1:], (me[1:],), ((0, 0, k + 1), (0, 50, 50))), ())
        assert files.get(key, ()) is not first
    finally:
        os.close(fd)
    # The node let the file go (here: its descriptor closed): mapped anew, or
    # refused as the node's stream would be.
    with pytest.raises(_shared.Unshareable):
        files.get(key, ())
    files.clear()


def test_a_killed_node_fails_over_to_a_replica_by_reference(table, tmp_path):
    with icefloe.LocalCluster(num_nodes=2, log_dir=tmp_path) as cluster:
        with cluster.client(failover_timeout_s=30.0) as c:
            c.load("t", table.metadata_location, batch_rows=2000, replication=2)
            want = pa.Table.from_batches(list(c.iter_epoch("t", batch_size=1000,
                                                           shuffle="block", seed=2)))
            os.kill(cluster.nodes[0].popen.pid, signal.SIGKILL)
            cluster.nodes[0].popen.wait(timeout=30)
            sent = _served_bytes(cluster, cluster.nodes[1:])
            # The head still lists the dead node first for some rows: their
            # stream fails to open and the replica's, mapped, takes over.
            got = pa.Table.from_batches(list(c.iter_epoch("t", batch_size=1000,
                                                          shuffle="block", seed=2)))
            assert _served_bytes(cluster, cluster.nodes[1:]) == sent  # all by reference
    assert got.equals(want)
    assert sorted(got.column("id").to_pylist()) == list(range(N))


def _served_rows(cluster, ticket: str, transport: str | None = None) -> float:
    scrapes = [scrape(n.health) for n in cluster.nodes]
    labels = {} if transport is None else {"transport": transport}
    return nodes_total(scrapes, "icefloe_node_served_rows_total", ticket=ticket, **labels)


def test_takes_read_a_mapped_file_without_asking_the_node(table, tmp_path):
    rng = np.random.default_rng(5)
    asks = [rng.integers(0, N, 300).tolist(), [0], [N - 1, 3, 3, 29_999], [17]]
    with icefloe.LocalCluster(num_nodes=2, log_dir=tmp_path) as cluster:
        with cluster.client() as c, cluster.client(share_memory=False) as wire:
            c.load("t", table.metadata_location, batch_rows=2000)
            want = [wire.take("t", rows) for rows in asks]
            first = c.take("t", asks[0])  # by reference: both nodes' files mapped
            served = _served_rows(cluster, "rows")
            got = [c.take("t", rows) for rows in asks]
            narrow = c.take("t", asks[0], columns=["label", "id"])
            assert _served_rows(cluster, "rows") == served  # no node was asked
            assert first.equals(want[0])
            for g, w in zip(got, want, strict=True):
                assert g.equals(w)
            assert narrow.equals(want[0].select(["label", "id"]))
            # A take's rows are the caller's: writing into them changes no later take.
            ids = torch.from_dlpack(got[1].column("id").chunk(0))
            ids += 100
            assert c.take("t", [0]).column("id").to_pylist() == [0]

            # Another client replaces the copy: the mapped file is the node's no
            # more, and the take asks the nodes (which name the new copy).
            with cluster.client() as c2:
                c2.evict("t")
                c2.load("t", table.metadata_location, batch_rows=1000)
            assert c.take("t", [5]).column("id").to_pylist() == [5]
            assert _served_rows(cluster, "rows") > served


@pytest.mark.parametrize("world", [3, 7])  # 7: the last ranks repeat rows (padding)
def test_a_ranks_batches_come_as_chunks_of_views(table, tmp_path, monkeypatch, world):
    """A DDP rank's batches are every world's batch: by reference they come
    as chunks that are spans of the node's file, cut into tensor views, the
    same tensors as over the wire (batches of one node's rows and batches
    across two, a short last batch)."""
    spans: list[int] = []

    split = _pieces.Span.split

    def counted(span, convert):  # a chunk whose batches lie apart in a slice of the file
        if span.offsets is not None:
            spans.append(span.data.num_rows)
        return split(span, convert)

    monkeypatch.setattr(_pieces.Span, "split", counted)
    monkeypatch.setenv("WORLD_SIZE", str(world))
    with icefloe.LocalCluster(num_nodes=2, log_dir=tmp_path) as cluster:
        with cluster.client() as c:
            c.load("t", table.metadata_location, batch_rows=2000)
        for rank in range(world):
            monkeypatch.setenv("RANK", str(rank))
            got = {}
            for share in (True, False):
                ds = CacheDataset(cluster.head_uri, "t", batch_size=700, shuffle="none",
                                  drop_last=False, client_options={"share_memory": share})
                got[share] = list(ds)
            assert len(got[True]) == len(got[False])
            for a, b in zip(got[True], got[False], strict=True):
                assert a.keys() == b.keys()
                for k in a:
                    assert torch.equal(a[k], b[k]), (rank, k)
            ids = torch.cat([b["id"] for b in got[True]])
            assert len(ids) == -(-N // world)  # DistributedSampler's share, padded
    assert spans, "no chunk came as a span of a shared file"
