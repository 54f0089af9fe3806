"""Whole consecutive batches travel as one message (chunks) and are split
exactly: the same batches as when every batch is its own message (batch size
65536, one batch per cached batch), at any batch size, from any first batch,
for every rank, as record batches and as tensors."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import piece_util
import pyarrow as pa
import pyarrow.flight as flight
import pytest
import torch
from iceberg_util import Warehouse
from torch.utils.data import DataLoader

import icefloe
from icefloe import _native, _pieces
from icefloe.torch import CacheDataset, batch_to_tensors

N = 200_000
MAYBE_NULL_EVERY = 5000  # rows of column "maybe" that are null: some batches have one
SPAN_ROWS = 65536  # positions of a window span: the nodes' kWindowSpanRows (window_pieces.h)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    root = tmp_path_factory.mktemp("chunks")
    ids = np.arange(N, dtype=np.int64)
    maybe = pa.array(ids.astype(np.float32), mask=ids % MAYBE_NULL_EVERY == 0)
    data = pa.table({"id": ids, "x": (ids * 0.5).astype(np.float32), "maybe": maybe})
    table = Warehouse(root / "wh").create("t", data)
    with icefloe.LocalCluster(num_nodes=2, log_dir=root / "logs") as c:
        with c.client() as client:
            client.load("t", table.metadata_location)
        c.table_location = table.metadata_location
        yield c


def _ids(batches) -> list[list[int]]:
    return [b.column("id").to_pylist() for b in batches]


def _flat(batches: list[list[int]]) -> list[int]:
    return [i for b in batches for i in b]


def _tags(cluster, name: str = "t", **plan) -> list[str]:
    """What every message the plan's endpoints send is (piece_util.kind)."""
    tags = []
    with cluster.client() as client:
        info, _ = client.epoch_info(name, **plan)
        for endpoint in info.endpoints:
            node = flight.connect(endpoint.locations[0].uri.decode())
            try:
                for chunk in node.do_get(endpoint.ticket):
                    tags.append(piece_util.kind(chunk.app_metadata.to_pybytes()))
            finally:
                node.close()
    return tags


def test_consecutive_batches_travel_as_chunks(cluster):
    tags = _tags(cluster, batch_size=1024, shuffle="none", drop_last=False)
    assert tags.count("chunk") >= 2
    assert len(tags) < N // 1024 // 8  # dozens of batches a message
    # A rank's batches are every other step apart: never one run, so pieces.
    assert set(_tags(cluster, batch_size=1024, shuffle="none", world_size=2, rank=1)) == \
        {"piece"}


@pytest.mark.parametrize("shuffle", ["none", "block"])
@pytest.mark.parametrize("drop_last", [False, True])
def test_chunked_epochs_equal_unchunked_ones(cluster, shuffle, drop_last):
    plan = {"shuffle": shuffle, "seed": 7, "epoch": 2, "drop_last": drop_last,
            "block_rows": 10_000}
    with cluster.client() as client:
        # One batch per message: the reference order of the epoch.
        whole = _flat(_ids(client.iter_epoch("t", batch_size=N, **plan)))
        if shuffle == "none":
            assert whole == list(range(N))
        for batch_size in (1000, 1024, 4096, 7):
            got = _ids(client.iter_epoch("t", batch_size=batch_size, **plan))
            rows = N // batch_size * batch_size if drop_last else N
            want = whole[:rows]
            assert [len(b) for b in got] == [len(want[i:i + batch_size])
                                             for i in range(0, rows, batch_size)]
            assert _flat(got) == want
            # Resuming at a batch inside a chunk, on the caller's thread.
            first = 37
            resumed = _ids(client.iter_epoch("t", batch_size=batch_size, first_batch=first,
                                             prefetch=0, **plan))
            assert resumed == got[first:]


@pytest.mark.parametrize("world_size", [1, 2, 3])
def test_every_rank_reads_its_batches(cluster, world_size):
    plan = {"shuffle": "block", "seed": 1, "drop_last": False, "block_rows": 8192,
            "world_size": world_size}
    with cluster.client() as client:
        whole = _flat(_ids(client.iter_epoch("t", batch_size=N, shuffle="block", seed=1,
                                             block_rows=8192)))
        steps = [whole[i:i + 1024 * world_size] for i in range(0, N, 1024 * world_size)]
        for rank in range(world_size):
            got = _ids(client.iter_epoch("t", batch_size=1024, rank=rank, **plan))
            want = [s[rank * 1024:(rank + 1) * 1024] for s in steps]
            # Without drop_last the short last step is padded from position 0.
            assert got[:-1] == want[:-1]
            assert len(got) == len(want)


def test_cache_dataset_tensors_equal_per_batch_conversion(cluster):
    with cluster.client() as client:
        ref = list(client.iter_epoch("t", batch_size=1000, shuffle="none", drop_last=False))
    for columns in (["id", "x"], None):  # "maybe" has nulls in some batches only
        ds = CacheDataset(cluster.head_uri, "t", batch_size=1000, shuffle="none",
                          drop_last=False, columns=columns)
        got = list(DataLoader(ds, batch_size=None))
        assert len(got) == len(ref)
        for batch, tensors in zip(ref, got, strict=True):
            want = batch_to_tensors(batch.select(columns) if columns else batch)
            assert list(tensors) == list(want)  # "maybe_valid" exactly where there are nulls
            for name, t in want.items():
                a, b = (tensors[name], t) if not t.is_floating_point() else \
                    (tensors[name].nan_to_num(-1), t.nan_to_num(-1))
                assert torch.equal(a, b), name
    assert any("maybe_valid" in batch_to_tensors(b) for b in ref)
    assert not all("maybe_valid" in batch_to_tensors(b) for b in ref)



def test_iter_epoch_with_batch_to_tensors_converts_chunks_at_once(cluster):
    with cluster.client() as client:
        # The same table without the column that has nulls.
        client.load("u", cluster.table_location, columns=["id", "x"])
        for name, chunked in (("u", True), ("t", False)):
            ref = list(client.iter_epoch(name, batch_size=1024, shuffle="none"))
            got = list(client.iter_epoch(name, batch_size=1024, shuffle="none",
                                         transform=batch_to_tensors))
            assert len(got) == len(ref) == N // 1024
            views = 0
            for batch, tensors in zip(ref, got, strict=True):
                want = batch_to_tensors(batch)
                assert list(tensors) == list(want)
                assert torch.equal(tensors["id"], want["id"])
                assert torch.equal(tensors["x"], want["x"])
                # A view of a chunk's tensor shares its storage with the chunk's.
                views += tensors["id"].untyped_storage().nbytes() > 1024 * 8
            # Chunks with nulls in some batches are converted batch by batch,
            # so each batch has "maybe_valid" exactly when it has a null (the
            # keys above); only the few chunks without a null are views.
            assert (views > len(got) // 2) if chunked else views < len(got) // 10, \
                (name, views, len(got))


@pytest.fixture(scope="module")
def one_node(tmp_path_factory, cluster):
    """The table on a cluster of one node, where every window-shuffled batch
    is whole on the node, so its batches travel as chunks of gathered rows;
    and, on the two-node cluster, the same rows as four files ("s"), spread
    over both nodes, so every window has rows on each."""
    root = tmp_path_factory.mktemp("chunks1")
    ids = np.arange(N, dtype=np.int64)
    maybe = pa.array(ids.astype(np.float32), mask=ids % MAYBE_NULL_EVERY == 0)
    data = pa.table({"id": ids, "x": (ids * 0.5).astype(np.float32), "maybe": maybe})
    table = Warehouse(root / "wh").create("s", data.slice(0, N // 4))
    for k in range(1, 4):
        table.append(data.slice(k * N // 4, N // 4))
    with cluster.client() as client:
        client.load("s", table.metadata_location)
    with icefloe.LocalCluster(num_nodes=1, log_dir=root / "logs") as c:
        with c.client() as client:
            client.load("s", cluster.table_location)
        yield c


@pytest.mark.parametrize("nodes", [1, 2])
def test_window_epochs_are_the_same_chunked_or_split(cluster, one_node, nodes):
    c = (one_node, cluster)[nodes - 1]
    plan = {"shuffle": "window", "seed": 3, "epoch": 1, "drop_last": False}
    tags = _tags(c, "s", batch_size=1024, **plan)
    if nodes == 1:
        assert tags.count("chunk") >= 2 and len(tags) < N // 1024 // 4
    else:  # every window has rows on both nodes: a span piece per span and node
        batches = -(-N // 1024)
        spans = -(-batches // (SPAN_ROWS // 1024))
        assert "chunk" not in tags and len(tags) == 2 * spans
        assert tags.count("span") >= 2 * (spans - 1)
    with c.client() as client:
        # One batch of the whole epoch: one piece per node, no chunk.
        whole = _flat(_ids(client.iter_epoch("s", batch_size=N, **plan)))
        assert sorted(whole) == list(range(N)) and whole != list(range(N))
        with cluster.client() as other:  # the same epoch from the other cluster
            assert _flat(_ids(other.iter_epoch("t", batch_size=N, **plan))) == whole
        for batch_size in (1000, 1024, 7):
            got = _ids(client.iter_epoch("s", batch_size=batch_size, **plan))
            assert [len(b) for b in got] == [len(whole[i:i + batch_size])
                                             for i in range(0, N, batch_size)]
            assert _flat(got) == whole
            # Resuming inside a window (and inside a chunk), on the caller's thread.
            resumed = _ids(client.iter_epoch("s", batch_size=batch_size, first_batch=37,
                                             prefetch=0, **plan))
            assert resumed == got[37:]
    ds = CacheDataset(c.head_uri, "s", batch_size=1024, drop_last=False, seed=3)
    ds.set_epoch(1)
    ids = [t["id"].tolist() for t in DataLoader(ds, batch_size=None)]
    assert _flat(ids) == whole


class _Messages:
    """A reader of prepared (record batch, app_metadata) messages: an
    in-process stand-in for one node's DoGet, for the merge's own checks."""

    def __init__(self, messages: list[tuple[pa.RecordBatch, bytes]]) -> None:
        self._messages = list(messages)

    def read_chunk(self):
        if not self._messages:
            raise StopIteration
        data, metadata = self._messages.pop(0)
        return SimpleNamespace(data=data, app_metadata=pa.py_buffer(metadata))

    def cancel(self) -> None:
        pass


def _span(first: int, batch_size: int, count: int, last_size: int, ids: list[int],
          positions: list[int]) -> tuple[pa.RecordBatch, bytes]:
    """A span piece: ``ids`` go to ``positions`` of the span."""
    return (pa.record_batch({"id": pa.array(ids, pa.int64())}),
            piece_util.encode(first, batch_size, positions=positions, count=count,
                              last_size=last_size))


def _one(batch: int, batch_size: int, ids: list[int],
         positions: list[int]) -> tuple[pa.RecordBatch, bytes]:
    """A piece of one batch, one position per row."""
    return (pa.record_batch({"id": pa.array(ids, pa.int64())}),
            piece_util.encode(batch, batch_size, positions=positions))


def _merge(*nodes: list[tuple[pa.RecordBatch, bytes]], num_batches: int = 3) -> list[list[int]]:
    from icefloe._pieces import merged_batches

    readers = [lambda n=n: (_Messages(n), "node") for n in nodes]
    return _ids(merged_batches(lambda _: readers, num_batches))


def test_span_pieces_of_several_nodes_merge_into_their_batches():
    # Three batches of 4 rows, the last of 2: span positions 0..9. Node A holds
    # the even ids, node B the odd ones; span position p gets id 100 + p.
    want = [[100, 101, 102, 103], [104, 105, 106, 107], [108, 109]]
    evens = _span(0, 4, 3, 2, [108, 100, 104, 102, 106], [8, 0, 4, 2, 6])
    odds = _span(0, 4, 3, 2, [101, 103, 105, 107, 109], [1, 3, 5, 7, 9])
    assert _merge([evens], [odds]) == want
    # B cuts the span into one piece per batch (its gather would be too large).
    per_batch = [_one(0, 4, [101, 103], [1, 3]), _one(1, 4, [105, 107], [1, 3]),
                 _one(2, 2, [109], [1])]
    assert _merge([evens], per_batch) == want
    assert _merge(per_batch, [evens]) == want
    # Disagreements and gaps are the cluster changing under the epoch.
    with pytest.raises(icefloe.InvalidArgument, match="incomplete"):
        _merge([evens], per_batch[:2] + [_one(2, 2, [], [])])
    with pytest.raises(icefloe.InvalidArgument, match="disagree"):
        _merge([evens], [_span(0, 4, 3, 1, [101, 103, 105, 107], [1, 3, 5, 7])])
    with pytest.raises(icefloe.InvalidArgument, match="across"):
        _merge([evens], [_span(0, 4, 4, 2, [101], [1])], num_batches=4)
    with pytest.raises(icefloe.InvalidArgument, match="two pieces for one position"):
        _merge([evens], [_span(0, 4, 3, 2, [101, 103, 105, 107, 109], [1, 3, 5, 7, 8])])
    data, _ = _span(0, 4, 2, 4, [100], [0])
    with pytest.raises(icefloe.InvalidArgument, match="batch count and span flag disagree"):
        _merge([(data, piece_util.encode(0, 4, positions=[0], flags=piece_util.SPAN |
                                         piece_util.POSITIONS))])


def test_chunks_by_reference_are_slices_of_the_file_or_gathered():
    """The merge reads a chunk by reference as a slice of the node's file
    when its runs are long (a rank's batches in a span of the file), else
    gathers it; both are the rows the header names, batch by batch."""
    file = pa.record_batch({"id": pa.array(np.arange(2000, dtype=np.int64))})

    def chunks(batch_size: int, source: list[tuple[int, int]], copy: bool = False):
        metadata = piece_util.encode(0, batch_size, count=2, last_size=batch_size, whole=True,
                                     source=source)
        left = [piece_util.Message(file, metadata, rows=2 * batch_size)]
        return list(_pieces.merge_steps(_native.Merger(1, 0, 2, copy=copy), 1,
                                        lambda _: left.pop() if left else None))

    def ids(chunk) -> list[list[int]]:
        return [b.column("id").to_pylist() for b in chunk.split(None)]

    (span,) = chunks(300, [(1000, 300), (0, 300)])  # a span of the file, other rows between
    assert span.offsets == [1000, 0] and span.data.num_rows == 1300
    assert ids(span) == [list(range(1000, 1300)), list(range(300))]
    for short in (chunks(4, [(0, 4), (10, 4)]), chunks(300, [(1000, 300), (0, 300)], copy=True)):
        (gathered,) = short
        assert gathered.offsets is None and gathered.data.num_rows == 2 * gathered.sizes[0]
    assert ids(chunks(4, [(0, 4), (10, 4)])[0]) == [[0, 1, 2, 3], [10, 11, 12, 13]]
    with pytest.raises(icefloe.InvalidArgument, match="across two runs"):
        chunks(300, [(0, 200), (1000, 400)])


def test_a_transforms_many_turns_a_chunks_batches_at_once():
    """A transform's ``many(batch, sizes)`` gets a chunk whose batches follow
    each other (the documented two-argument form), and ``offsets`` too when
    they lie apart in a span of a node's file; either must equal the
    transform of each batch."""
    data = pa.record_batch({"id": pa.array(np.arange(10, dtype=np.int64))})
    calls = []

    def one(batch):
        return batch.column("id").to_pylist()

    def many(batch, sizes, *offsets):
        calls.append((sizes, *offsets))
        at = offsets[0] if offsets else [0, sizes[0]]
        return [one(batch.slice(o, n)) for o, n in zip(at, sizes, strict=True)]

    one.many = many
    consecutive = _pieces.Span(data.slice(0, 7), [4, 3])
    apart = _pieces.Span(data, [4, 3], offsets=[6, 0])
    assert consecutive.split(one) == [[0, 1, 2, 3], [4, 5, 6]]
    assert apart.split(one) == [[6, 7, 8, 9], [0, 1, 2]]
    assert calls == [([4, 3],), ([4, 3], [6, 0])]
    assert [b.column("id").to_pylist() for b in apart.split(None)] == [[6, 7, 8, 9], [0, 1, 2]]
