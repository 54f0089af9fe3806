"""Incremental refresh (issue 30): a newer snapshot of a cached table loads as
the difference between the two scan plans. Rows of unchanged data files are
taken from the cached copy (never read again: the tests move those files away
before refreshing), added files and files with new deletes are read, removed
files are dropped, and the new generation numbers its rows densely. Every
refresh is compared with an independent reader of the new snapshot (pyiceberg's
scan, or the delete oracle of `iceberg_deletes_util`)."""

from __future__ import annotations

import re
import shutil
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from iceberg_deletes_util import (
    commit_files,
    expected_scan,
    live_data_files,
    local_path,
    write_equality_deletes,
    write_position_deletes,
)
from iceberg_util import Warehouse, assert_same_rows

import icefloe
from icefloe._status_text import render

ROW_KEY = [("id", "ascending"), ("value", "ascending")]


def rows(n: int, start: int = 0) -> pa.Table:
    ids = np.arange(start, start + n, dtype=np.int64)
    return pa.table({
        "id": ids,
        "category": pa.array([f"cat-{i % 3}" for i in ids]),
        "value": ids * 0.5,
    })


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory) -> Warehouse:
    return Warehouse(tmp_path_factory.mktemp("refresh"))


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    # Over the wire (share_memory=False), as multi-host deployments read:
    # reused rows are views of the cached batches, not a new shared file.
    with icefloe.LocalCluster(num_nodes=2, memory_limit="256MiB", share_memory=False,
                              head_args=["--retain-s", "8"],  # replaced copies: 2 s idle
                              log_dir=tmp_path_factory.mktemp("logs")) as c:
        yield c


@pytest.fixture(scope="module")
def client(cluster):
    with cluster.client() as c:
        yield c


class MovedAway:
    """Data files moved out of the table's directory (and back on exit): a
    refresh that read them again would fail naming one."""

    def __init__(self, paths: list[str], parking: Path) -> None:
        self.moves = [(Path(local_path(p)), parking / f"{i}.parquet") for i, p in enumerate(paths)]
        parking.mkdir(parents=True, exist_ok=True)

    def __enter__(self) -> MovedAway:
        for src, dst in self.moves:
            shutil.move(src, dst)
        return self

    def __exit__(self, *exc: object) -> None:
        for src, dst in self.moves:
            shutil.move(dst, src)


def data_files(table) -> list[str]:
    return [e.path for e in live_data_files(table)]


def check_exact(client, name: str, table) -> None:
    """icefloe's copy holds exactly pyiceberg's scan of the current snapshot,
    with dense row ids."""
    table.refresh()
    theirs = table.scan().to_arrow()
    ours = client.read(name)
    assert_same_rows(ours, theirs, key=ROW_KEY)
    desc = client.describe(name)
    assert desc["snapshot_id"] == table.current_snapshot().snapshot_id
    assert desc["rows"] == theirs.num_rows
    spans = sorted((s["start"], s["stop"]) for s in desc["slices"])
    assert spans[0][0] == 0 and spans[-1][1] == desc["rows"]
    assert all(a[1] == b[0] for a, b in zip(spans, spans[1:], strict=False)), spans


def test_an_append_reads_only_the_new_file(warehouse, client, tmp_path):
    table = warehouse.create("appends", rows(5000))
    for i in range(1, 8):
        table.append(rows(5000, start=i * 5000))
    first = client.load("appends", table.metadata_location)
    assert first["rows"] == 40_000 and first["tasks"] == 8
    old_files = data_files(table)

    table.append(rows(3000, start=100_000))
    with MovedAway(old_files, tmp_path / "parked"):
        desc = client.load("appends", table.metadata_location)
    r = desc["refresh"]
    assert r["from_generation"] == first["generation"] < desc["generation"]
    assert (r["tasks_reused"], r["tasks_read"], r["tasks_dropped"]) == (8, 1, 0), r
    assert (r["rows_reused"], r["rows_read"], r["rows_dropped"]) == (40_000, 3000, 0), r
    assert (r["files_added"], r["files_removed"]) == (1, 0), r
    assert desc["scan"]["row_groups_total"] == 1  # the new file's only
    # Planning read only the new snapshot's manifest: the others were parsed
    # by the first load's plan.
    scan = desc["scan"]
    assert scan["manifests_total"] - scan["manifests_pruned"] - scan["manifests_cached"] == 1
    assert scan["manifests_cached"] >= 1, scan
    check_exact(client, "appends", table)
    # The new rows come after the old ones: old row ids are unchanged.
    ids = client.read("appends")["id"].to_numpy()
    assert (ids[:40_000] < 40_000).all() and (ids[40_000:] >= 100_000).all()
    # The old copy is kept for its readers (none here), then freed: only the
    # new generation is left on the nodes.
    wait_freed(client, "appends", first["generation"])
    nodes = client.status()["nodes"]
    held = {(d["name"], d["generation"]) for n in nodes for d in n.get("datasets", [])}
    assert all(g == desc["generation"] for name, g in held if name.startswith("appends")), held


def test_refresh_loads_the_newest_snapshot_with_the_same_arguments(warehouse, client, tmp_path):
    table = warehouse.create("pinned", rows(4000))
    table.append(rows(4000, start=4000))
    pinned = table.current_snapshot().snapshot_id
    table.append(rows(1000, start=50_000))
    old = client.load("pinned", table.metadata_location, snapshot_id=pinned,
                      columns=["id", "value"], filter="id >= 1000")
    assert old["rows"] == 7000
    with MovedAway(data_files(table)[:2], tmp_path / "parked"):
        desc = client.refresh("pinned")
    assert desc["snapshot_id"] == table.current_snapshot().snapshot_id
    assert desc["columns"] == ["id", "value"] and desc["filter"] == "id >= 1000"
    assert (desc["refresh"]["tasks_reused"], desc["refresh"]["rows_read"]) == (2, 1000)
    theirs = table.scan(row_filter="id >= 1000", selected_fields=("id", "value")).to_arrow()
    assert_same_rows(client.read("pinned"), theirs, key="id")
    # Nothing new: the same copy.
    assert client.refresh("pinned")["generation"] == desc["generation"]
    with pytest.raises(icefloe.NotFound, match="nosuch"):
        client.refresh("nosuch")


def test_deletes_read_again_only_the_files_they_touch(warehouse, client, tmp_path):
    table = warehouse.create("deletes", rows(1000))
    table.append(rows(1000, start=1000))
    table.append(rows(1000, start=2000))
    a, b, c = data_files(table)
    client.load("deletes", table.metadata_location)

    # Position deletes in A only: B and C are reused.
    commit_files(table, [write_position_deletes(table, [(a, p) for p in (0, 7, 999)],
                                                referenced_data_file=a)])
    with MovedAway([b, c], tmp_path / "parked-1"):
        desc = client.load("deletes", table.metadata_location)
    r = desc["refresh"]
    assert (r["tasks_reused"], r["tasks_read"], r["rows_dropped"]) == (2, 1, 1000), r
    expected, _ = expected_scan(table)
    assert desc["rows"] == expected.num_rows == 2997
    assert_same_rows(client.read("deletes"), expected, key=ROW_KEY)

    # An equality delete applies to every older data file: all are read.
    commit_files(table, [write_equality_deletes(table, {"category": ["cat-1"]})])
    desc = client.load("deletes", table.metadata_location)
    assert desc["refresh"]["tasks_reused"] == 0
    expected, _ = expected_scan(table)
    assert desc["rows"] == expected.num_rows
    assert_same_rows(client.read("deletes"), expected, key=ROW_KEY)


def test_a_rewrite_drops_removed_files_and_reads_their_replacements(warehouse, client,
                                                                    tmp_path):
    table = warehouse.create("rewrite", rows(2000))
    table.append(rows(2000, start=2000))
    table.append(rows(2000, start=4000))
    first, middle, last = data_files(table)
    client.load("rewrite", table.metadata_location)
    # pyiceberg's copy-on-write delete rewrites the file holding ids 2000..2099
    # and keeps the other two.
    table.delete("id >= 2000 and id < 2100")
    table.refresh()
    now = data_files(table)
    assert first in now and last in now and middle not in now
    with MovedAway([first, last], tmp_path / "parked"):
        desc = client.load("rewrite", table.metadata_location)
    r = desc["refresh"]
    assert (r["tasks_reused"], r["tasks_read"], r["tasks_dropped"]) == (2, 1, 1), r
    assert (r["files_added"], r["files_removed"], r["rows_read"]) == (1, 1, 1900), r
    check_exact(client, "rewrite", table)


def test_a_compaction_reads_the_new_file_and_drops_the_old(warehouse, client):
    table = warehouse.create("compacted", rows(1000))
    for i in range(1, 4):
        table.append(rows(1000, start=i * 1000))
    client.load("compacted", table.metadata_location)
    # The same rows rewritten into one file (what a compaction commits).
    table.overwrite(table.scan().to_arrow())
    table.refresh()
    assert len(data_files(table)) == 1
    desc = client.load("compacted", table.metadata_location)
    r = desc["refresh"]
    assert (r["tasks_reused"], r["tasks_read"], r["tasks_dropped"]) == (0, 1, 4), r
    assert (r["files_added"], r["files_removed"], r["rows_read"]) == (1, 4, 4000), r
    check_exact(client, "compacted", table)


def test_an_adopted_copy_refreshes_after_a_head_restart(warehouse, cluster, client, tmp_path):
    table = warehouse.create("adopted", rows(3000))
    table.append(rows(3000, start=3000))
    client.load("adopted", table.metadata_location)
    cluster.restart_head()
    table.append(rows(500, start=9000))
    with MovedAway(data_files(table)[:2], tmp_path / "parked"):
        desc = client.load("adopted", table.metadata_location)
    assert (desc["refresh"]["tasks_reused"], desc["refresh"]["rows_read"]) == (2, 500)
    check_exact(client, "adopted", table)


def test_an_alias_keeps_reading_its_snapshot_across_a_refresh(warehouse, client):
    table = warehouse.create("aliased", rows(2000))
    client.load("aliased", table.metadata_location)
    pinned = table.current_snapshot().snapshot_id
    client.load("aliased-pin", table.metadata_location, snapshot_id=pinned)
    table.append(rows(100, start=10_000))
    desc = client.load("aliased", table.metadata_location)
    assert desc["refresh"]["tasks_reused"] == 1 and desc["rows"] == 2100
    assert client.read("aliased-pin").num_rows == 2000
    check_exact(client, "aliased", table)


def test_a_changed_column_set_or_schema_loads_in_full(warehouse, client):
    table = warehouse.create("evolving", rows(1000))
    client.load("evolving", table.metadata_location)
    with table.update_schema() as update:
        update.rename_column("value", "amount")
    table.append(rows(10, start=5000).rename_columns(["id", "category", "amount"]))
    desc = client.load("evolving", table.metadata_location)
    # The cached batches name the column "value": nothing is reused.
    assert "refresh" not in desc
    assert client.read("evolving").column_names == ["id", "category", "amount"]
    assert desc["rows"] == 1010


# -- jobs switch at an epoch boundary ------------------------------------------

RETAIN_ARGS = ["--retain-s", "20"]  # a replaced copy is freed 5 s after its last reader


@pytest.fixture(scope="module")
def retaining(tmp_path_factory):
    with icefloe.LocalCluster(num_nodes=2, memory_limit="256MiB", head_args=RETAIN_ARGS,
                              log_dir=tmp_path_factory.mktemp("logs")) as c, c.client() as client:
        yield c, client


def epoch_ids(client, name: str, epoch: int, world_size: int = 2, **plan) -> list[np.ndarray]:
    """Each rank's ids of one epoch (batch 500, window shuffle, seed 1)."""
    return [np.concatenate([b["id"].to_numpy() for b in client.iter_epoch(
        name, batch_size=500, seed=1, epoch=epoch, world_size=world_size, rank=r,
        prefetch=0, **plan)]) for r in range(world_size)]


def wait_freed(client, name: str, generation: int, timeout_s: float = 60) -> None:
    """Until the head has freed the replaced copy and no node holds it."""
    deadline = time.monotonic() + timeout_s
    while True:
        status = client.status()
        kept = [r for r in status["retired"] if r["name"] == name]
        held = [d for n in status["nodes"] for d in n.get("datasets", [])
                if d["generation"] == generation]
        if not kept and not held:
            return
        assert time.monotonic() < deadline, (kept, held)
        time.sleep(0.2)


def test_an_epoch_finishes_on_the_generation_it_started(warehouse, retaining):
    _, client = retaining
    table = warehouse.create("moving", rows(20_000))
    for i in range(1, 4):
        table.append(rows(20_000, start=i * 20_000))
    first = client.load("moving", table.metadata_location)
    old_ids = np.arange(80_000)

    # Rank 0 starts epoch 0 and reads 10 batches; then the table grows.
    rank0 = client.iter_epoch("moving", batch_size=500, seed=1, epoch=0, world_size=2, rank=0,
                              prefetch=0)
    head = [next(rank0)["id"].to_numpy() for _ in range(10)]
    table.append(rows(5000, start=500_000))
    refreshed = client.refresh("moving")
    assert refreshed["generation"] > first["generation"] and refreshed["rows"] == 85_000
    status = client.status()
    retired = [(r["name"], r["generation"], r["replaced_by"]) for r in status["retired"]]
    assert retired == [("moving", first["generation"], refreshed["generation"])]
    text = render(status)  # icefloe status
    assert re.search(rf"^  moving\s+{first['generation']}\s+{refreshed['generation']}\s", text,
                     re.M), text

    # Rank 1 asks for epoch 0 after the refresh: the same copy as rank 0.
    rank1 = epoch_ids(client, "moving", 0)[1]
    rank0_ids = np.concatenate(head + [b["id"].to_numpy() for b in rank0])
    assert len(rank0_ids) == len(rank1) == 40_000
    assert np.array_equal(np.sort(np.concatenate([rank0_ids, rank1])), old_ids)

    # Epoch 1 reads the new generation, every rank alike.
    ids = np.concatenate(epoch_ids(client, "moving", 1))
    assert np.array_equal(np.sort(ids), np.sort(np.concatenate([old_ids,
                                                               np.arange(500_000, 505_000)])))
    # Nobody reads the old copy any more: it is freed.
    wait_freed(client, "moving", first["generation"])
    # An epoch naming it now is refused, naming both generations.
    with pytest.raises(icefloe.InvalidArgument,
                       match=f"generation {first['generation']} .*generation "
                             f"{refreshed['generation']}"):
        epoch_ids(client, "moving", 0, generation=first["generation"])


def _resume_across_refresh(client, table, name, dataset, appended):
    """Reads epoch 0 of ``dataset()`` whole; then 5 of its batches and a
    checkpoint; appends ``appended`` and refreshes ``name``; a new
    ``dataset()`` resumed from the checkpoint reads the rest of epoch 0 as
    the whole read did (the copy it was planned from). Returns the
    checkpoint, the refresh's description and the resumed dataset."""
    whole = [b["id"].numpy() for b in dataset()]
    ds = dataset()
    it = iter(ds)
    taken = [next(it)["id"].numpy() for _ in range(5)]
    state = ds.state_dict(steps=5)
    del it

    table.append(appended)
    second = client.refresh(name)
    resumed = dataset()
    resumed.load_state_dict(state)
    rest = [b["id"].numpy() for b in resumed]
    assert all(np.array_equal(a, b) for a, b in zip(taken + rest, whole, strict=True))
    return state, second, resumed


def test_a_checkpoint_resumes_on_its_generation(warehouse, retaining):
    from icefloe.torch import CacheDataset

    cluster, client = retaining
    table = warehouse.create("resumed", rows(10_000))
    table.append(rows(10_000, start=10_000))
    first = client.load("resumed", table.metadata_location)

    def dataset(**kw):
        return CacheDataset(cluster.head_uri, "resumed", batch_size=500, seed=3, **kw)

    pinned = dataset(follow="pinned")
    assert sum(len(b["id"]) for b in pinned) == 20_000
    state, second, resumed = _resume_across_refresh(client, table, "resumed", dataset,
                                                    rows(1000, start=90_000))
    assert state["generation"] == first["generation"]
    # The next epoch follows the table; a pinned dataset stays.
    resumed.set_epoch(1)
    assert sum(len(b["id"]) for b in resumed) == 21_000 // 500 * 500
    pinned.set_epoch(1)
    assert sum(len(b["id"]) for b in pinned) == 20_000

    wait_freed(client, "resumed", first["generation"])
    again = dataset()
    with pytest.raises(icefloe.InvalidArgument,
                       match=f"generation {first['generation']} .*replaced by generation "
                             f"{second['generation']}"):
        again.load_state_dict(state)


def token_rows(n: int, start: int = 0) -> pa.Table:
    """Rows with a ``tokens`` column of 1..200 tokens (keyed by id)."""
    ids = np.arange(start, start + n, dtype=np.int64)
    lengths = (ids * 7919 % 200 + 1).astype(np.int32)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    return pa.table({"id": ids, "tokens": pa.ListArray.from_arrays(
        offsets, np.zeros(int(offsets[-1]), np.int32))})


def budget_ids(batches) -> list[np.ndarray]:
    return [b["id"].to_numpy() for b in batches]


BUDGET = {"batch_tokens": 2048, "token_column": "tokens", "seed": 5, "world_size": 1,
          "rank": 0, "drop_last": False, "columns": ["id"]}


def test_a_token_budget_epoch_finishes_on_the_generation_it_was_planned_from(
        warehouse, retaining, monkeypatch):
    from icefloe import _token_batches

    monkeypatch.setattr(_token_batches, "_ROWS_PER_TAKE", 1000)  # many takes an epoch
    _, client = retaining
    table = warehouse.create("budgeted", token_rows(10_000))
    table.append(token_rows(10_000, start=10_000))
    planned = client.load("budgeted", table.metadata_location)["generation"]
    copies = [np.arange(20_000)]  # the rows of the copy an epoch is planned from

    for epoch, prefetch in ((0, 0), (1, 2)):  # each epoch binds the copy current at its start
        whole = budget_ids(client.iter_epoch("budgeted", epoch=epoch, prefetch=0, **BUDGET))
        assert np.array_equal(np.sort(np.concatenate(whole)), np.concatenate(copies))
        # Half the epoch's batches, then a refresh lands: the rest of the
        # epoch reads the planned copy's rows, exactly as without it.
        it = client.iter_epoch("budgeted", epoch=epoch, prefetch=prefetch, **BUDGET)
        head = [next(it)["id"].to_numpy() for _ in range(len(whole) // 2)]
        copies.append(np.arange(1000) + 100_000 * (prefetch + 1))
        table.append(token_rows(1000, start=int(copies[-1][0])))
        refreshed = client.refresh("budgeted")
        assert refreshed["generation"] > planned
        planned = refreshed["generation"]
        rest = budget_ids(it)
        assert all(np.array_equal(a, b) for a, b in zip(head + rest, whole, strict=True))

    # The next epoch plans from the new copy.
    ids = np.concatenate(budget_ids(client.iter_epoch("budgeted", epoch=2, prefetch=0,
                                                      **BUDGET)))
    assert np.array_equal(np.sort(ids), np.concatenate(copies))

    # A copy freed meanwhile cannot be read: the error names both generations.
    it = client.iter_epoch("budgeted", epoch=3, prefetch=0, **BUDGET)
    next(it)
    planned = client.describe("budgeted")["generation"]
    table.append(token_rows(1000, start=500_000))
    newest = client.refresh("budgeted")["generation"]
    wait_freed(client, "budgeted", planned)
    with pytest.raises(icefloe.InvalidArgument,
                       match=f"generation {planned} .*replaced by generation {newest}"):
        list(it)


def step_order(ranks: list[list[np.ndarray]]) -> list[np.ndarray]:
    """The ranks' batches in the epoch's sequence: step by step, rank by rank."""
    assert len({len(r) for r in ranks}) == 1, [len(r) for r in ranks]  # equal step counts
    return [r[step] for step in range(len(ranks[0])) for r in ranks]


def read_once(sequence: list[np.ndarray], rows: int) -> np.ndarray:
    """The sequence's ids, each row of the copy once: with drop_last=False
    the last step's missing batch is the sequence's first, read again."""
    ids = np.concatenate(sequence)
    if len(ids) > rows:
        assert np.array_equal(sequence[-1], sequence[0])
        ids = np.concatenate(sequence[:-1])
    return np.sort(ids)


def test_the_ranks_of_a_token_budget_epoch_plan_from_one_generation(warehouse, retaining):
    _, client = retaining
    table = warehouse.create("budget_ranks", token_rows(10_000))
    planned = client.load("budget_ranks", table.metadata_location)["generation"]
    plan = dict(BUDGET, world_size=2)

    # Rank 0 plans epoch 0 and reads a batch; then a refresh lands before
    # rank 1's first request.
    rank0 = client.iter_epoch("budget_ranks", epoch=0, prefetch=0, **dict(plan, rank=0))
    first = [next(rank0)["id"].to_numpy()]
    table.append(token_rows(1000, start=100_000))
    assert client.refresh("budget_ranks")["generation"] > planned
    rank1 = budget_ids(client.iter_epoch("budget_ranks", epoch=0, prefetch=0,
                                         **dict(plan, rank=1)))
    sequence = step_order([first + budget_ids(rank0), rank1])
    assert np.array_equal(read_once(sequence, 10_000), np.arange(10_000))

    # The next epoch binds the new copy, for both ranks.
    ranks = [budget_ids(client.iter_epoch("budget_ranks", epoch=1, prefetch=0,
                                          **dict(plan, rank=r))) for r in range(2)]
    assert np.array_equal(read_once(step_order(ranks), 11_000),
                          np.concatenate([np.arange(10_000), np.arange(1000) + 100_000]))


def test_a_budget_mixture_finishes_on_the_generations_it_was_planned_from(
        warehouse, retaining, monkeypatch):
    from icefloe import _mixture_budget

    monkeypatch.setattr(_mixture_budget, "_ROWS_PER_TAKE", 500)  # many takes an epoch
    _, client = retaining
    steady = warehouse.create("steady", token_rows(8000))
    moving = warehouse.create("moving_source", token_rows(6000, start=1_000_000))
    client.load("steady", steady.metadata_location)
    first = client.load("moving_source", moving.metadata_location)
    mixture = {"steady": 1, "moving_source": 1}
    kw = dict(BUDGET, varlen=True, drop_last=True)
    whole = budget_ids(client.iter_epoch(mixture, epoch=0, prefetch=0, **kw))
    assert len(whole) > 8

    it = client.iter_epoch(mixture, epoch=0, prefetch=2, **kw)
    head = [next(it)["id"].to_numpy() for _ in range(len(whole) // 2)]
    moving.append(token_rows(1000, start=2_000_000))
    assert client.refresh("moving_source")["generation"] > first["generation"]
    rest = budget_ids(it)
    assert all(np.array_equal(a, b) for a, b in zip(head + rest, whole, strict=True))
    # The next epoch plans from the new copy: its rows are read.
    later = np.concatenate(budget_ids(client.iter_epoch(mixture, epoch=1, prefetch=0, **kw)))
    assert (later >= 2_000_000).any()


def test_the_ranks_of_a_budget_mixture_epoch_plan_from_one_copy_of_each_source(
        warehouse, retaining):
    _, client = retaining
    steady = warehouse.create("steady_ranks", token_rows(8000))
    moving = warehouse.create("moving_ranks", token_rows(6000, start=1_000_000))
    client.load("steady_ranks", steady.metadata_location)
    first = client.load("moving_ranks", moving.metadata_location)
    mixture = {"steady_ranks": 1, "moving_ranks": 1}
    kw = dict(BUDGET, varlen=True, drop_last=True, world_size=2)

    # Rank 0 resolves the mixture and reads a batch; a refresh of one source
    # lands before rank 1 resolves it.
    rank0 = client.iter_epoch(mixture, epoch=0, prefetch=0, **dict(kw, rank=0))
    batches0 = [next(rank0)["id"].to_numpy()]
    moving.append(token_rows(1000, start=2_000_000))
    assert client.refresh("moving_ranks")["generation"] > first["generation"]
    batches1 = budget_ids(client.iter_epoch(mixture, epoch=0, prefetch=0, **dict(kw, rank=1)))
    batches0 += budget_ids(rank0)
    assert len(batches0) == len(batches1)  # equal step counts
    ids = np.concatenate(batches0 + batches1)
    assert not (ids >= 2_000_000).any()  # no row of the copy the refresh made


def test_a_token_budget_checkpoint_resumes_on_the_generation_it_was_planned_from(
        warehouse, retaining, monkeypatch):
    from icefloe import _token_batches
    from icefloe.torch import CacheDataset

    monkeypatch.setattr(_token_batches, "_ROWS_PER_TAKE", 1000)
    cluster, client = retaining
    table = warehouse.create("budget_resumed", token_rows(10_000))
    first = client.load("budget_resumed", table.metadata_location)

    def dataset():
        return CacheDataset(cluster.head_uri, "budget_resumed", batch_tokens=2048,
                            token_column="tokens", seed=3, columns=["id"], drop_last=False)

    state, second, resumed = _resume_across_refresh(client, table, "budget_resumed", dataset,
                                                    token_rows(1000, start=90_000))
    assert state["generation"] == first["generation"]
    # The next epoch plans from the new copy.
    resumed.set_epoch(1)
    assert sum(len(b["id"]) for b in resumed) == 11_000

    wait_freed(client, "budget_resumed", first["generation"])
    again = dataset()
    again.load_state_dict(state)
    with pytest.raises(icefloe.InvalidArgument,
                       match=f"generation {first['generation']} .*replaced by generation "
                             f"{second['generation']}"):
        next(iter(again))
