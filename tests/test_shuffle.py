"""Shuffle quality and PyTorch's epoch semantics, on a table sorted by label.

The table has 10,000 rows whose 10-class label follows the row order (data
written by class), the case where a shuffle that keeps neighbours together
gives single-class batches.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pyarrow as pa
import pytest
from ddp_util import as_rank
from iceberg_util import Warehouse
from torch.utils.data import DataLoader, DistributedSampler

import icefloe
from icefloe.torch import CacheDataset

N = 10_000
CLASSES = 10


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    root = tmp_path_factory.mktemp("shuffle")
    wh = Warehouse(root / "wh")
    ids = np.arange(N, dtype=np.int64)
    table = wh.create("sorted", pa.table({"id": ids,
                                          "label": (ids * CLASSES // N).astype(np.int32)}))
    with icefloe.LocalCluster(num_nodes=2, log_dir=root / "logs") as c:
        with c.client() as client:
            # Cached batches of 700 rows: slices on both nodes, blocks that
            # straddle cached batches.
            client.load("sorted", table.metadata_location, batch_rows=700)
        yield c


def epoch(cluster, shuffle: str, epoch: int = 0, batch_size: int = 1024, **kw) -> list:
    ds = CacheDataset(cluster.head_uri, "sorted", batch_size=batch_size, shuffle=shuffle,
                      seed=kw.pop("seed", 0), **kw)
    ds.set_epoch(epoch)
    return list(DataLoader(ds, batch_size=None))


def label_distance(batches: list) -> float:
    """Mean total-variation distance between each batch's label histogram
    and the whole table's (uniform over the 10 classes here)."""
    distances = []
    for b in batches:
        hist = np.bincount(b["label"].numpy(), minlength=CLASSES) / len(b["label"])
        distances.append(0.5 * np.abs(hist - 1 / CLASSES).sum())
    return float(np.mean(distances))


def test_window_shuffle_mixes_a_sorted_table_like_sample(cluster):
    # The figure at batch 1024: <= 0.05 (a uniform sample averages
    # ~0.037 there); block shuffle keeps neighbours together.
    for shuffle in ("window", "sample"):
        for e in range(3):
            batches = epoch(cluster, shuffle, e)
            assert len(batches) == N // 1024
            assert label_distance(batches) <= 0.05, (shuffle, e)
    assert label_distance(epoch(cluster, "block")) >= 0.3
    assert label_distance(epoch(cluster, "none")) >= 0.8


def test_window_is_the_default_and_every_epoch_reads_every_row(cluster):
    batches = epoch(cluster, "window", 4, batch_size=1000)
    ids = [i for b in batches for i in b["id"].tolist()]
    assert sorted(ids) == list(range(N))
    ds = CacheDataset(cluster.head_uri, "sorted", batch_size=1000)
    assert ds.shuffle == "window"
    default = [i for b in DataLoader(ds, batch_size=None) for i in b["id"].tolist()]
    assert sorted(default) == list(range(N)) and default != list(range(N))


@pytest.mark.parametrize("shuffle", ["window", "block", "sample"])
def test_two_epochs_of_a_small_table_differ(cluster, shuffle):
    first = [i for b in epoch(cluster, shuffle, 0) for i in b["id"].tolist()]
    second = [i for b in epoch(cluster, shuffle, 1) for i in b["id"].tolist()]
    assert first != second
    assert first[:1024] != second[:1024], "the first batch must differ already"
    again = [i for b in epoch(cluster, shuffle, 0) for i in b["id"].tolist()]
    assert again == first, "the same (seed, epoch) reproduces"


@pytest.mark.parametrize("world_size, batch_size", [(1, 64), (2, 100), (3, 64), (3, 1024)])
def test_drop_last_false_matches_distributed_sampler(cluster, world_size, batch_size):
    """Per rank: the batch lengths PyTorch's DistributedSampler(drop_last=False)
    + DataLoader(drop_last=False) give; over all ranks: the same rows (every
    row, the first W - 1 of the epoch's order again), for the unshuffled order
    where both orders are the identity."""
    ours: dict[int, list[list[int]]] = {}
    theirs: dict[int, list[list[int]]] = {}
    for rank in range(world_size):
        with as_rank(rank, world_size):
            batches = epoch(cluster, "none", batch_size=batch_size, drop_last=False)
            ours[rank] = [b["id"].tolist() for b in batches]
        sampler = DistributedSampler(range(N), num_replicas=world_size, rank=rank,
                                     shuffle=False, drop_last=False)
        loader = DataLoader(range(N), batch_size=batch_size, sampler=sampler, drop_last=False)
        theirs[rank] = [b.tolist() for b in loader]
    for rank in range(world_size):
        assert [len(b) for b in ours[rank]] == [len(b) for b in theirs[rank]], rank
    assert len({len(b) for b in ours.values()}) == 1, "equal step counts"
    ours_rows = Counter(i for batches in ours.values() for b in batches for i in b)
    theirs_rows = Counter(i for batches in theirs.values() for b in batches for i in b)
    assert ours_rows == theirs_rows
    assert sum(ours_rows.values()) == world_size * -(-N // world_size)
    assert sum(c - 1 for c in ours_rows.values()) <= world_size - 1


@pytest.mark.parametrize("shuffle", ["window", "sample", "block"])
def test_shuffled_evaluation_epoch_reads_each_row_once(cluster, shuffle):
    # One process: exactly once; three ranks: every row, at most 2 twice.
    batches = epoch(cluster, shuffle, 2, batch_size=512, drop_last=False)
    assert [len(b["id"]) for b in batches] == [512] * 19 + [N - 19 * 512]
    assert sorted(i for b in batches for i in b["id"].tolist()) == list(range(N))
    rows: Counter = Counter()
    steps = set()
    for rank in range(3):
        with as_rank(rank, 3):
            batches = epoch(cluster, shuffle, 2, batch_size=512, drop_last=False)
        steps.add(len(batches))
        rows.update(i for b in batches for i in b["id"].tolist())
    assert len(steps) == 1
    assert set(rows) == set(range(N))
    assert sum(rows.values()) - N == 2  # 3 * ceil(10000 / 3) - 10000
