"""Iceberg v2 row-level deletes: position and equality delete files.

pyiceberg writes the tables and their data; the delete files, delete
manifests and snapshots are built by `iceberg_deletes_util` (pyiceberg 0.12
cannot write them). The expected rows come from that module's oracle, which
applies the spec's rules to the files itself; where only position deletes are
live, pyiceberg's own scan (which reads position deletes) is a second oracle.
Each check also compares the delete files `icefloe-head plan` attaches to each
data file with the oracle's, and the exact row count icefloe reports.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from iceberg_deletes_util import (
    commit_files,
    expected_scan,
    live_data_files,
    live_entries,
    local_path,
    write_data_file,
    write_equality_deletes,
    write_position_deletes,
)
from iceberg_util import Warehouse, assert_same_rows, plan
from pyiceberg.transforms import IdentityTransform

import icefloe

ROW_KEY = [("id", "ascending"), ("value", "ascending")]


def make_rows(n: int, start: int = 0, value_offset: float = 0.0) -> pa.Table:
    """Rows with ids [start, start + n); `tag` is null on every 4th id."""
    ids = np.arange(start, start + n, dtype=np.int64)
    return pa.table({
        "id": ids,
        "category": pa.array([f"cat-{i % 3}" for i in ids]),
        "tag": pa.array([None if i % 4 == 0 else f"t{i % 6}" for i in ids]),
        "value": ids * 0.5 + value_offset,
    })


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory) -> Warehouse:
    return Warehouse(tmp_path_factory.mktemp("iceberg-deletes"))


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with icefloe.LocalCluster(num_nodes=2, memory_limit="1GiB",
                              log_dir=tmp_path_factory.mktemp("logs")) as c:
        yield c


@pytest.fixture(scope="module")
def client(cluster):
    with cluster.client() as c:
        yield c


def data_files(table) -> list[str]:
    """The table's live data files, oldest first (one per append here)."""
    return [e.path for e in live_data_files(table)]


def check(client, name: str, table, *, snapshot_id: int | None = None, pyiceberg: bool = False,
          columns: list[str] | None = None, filter: str | None = None,  # noqa: A002
          row_filter: pc.Expression | None = None) -> pa.Table:
    """Loads the table into icefloe and checks rows, row count and the plan's
    delete attachments against the oracle; returns the expected rows."""
    expected, attached = expected_scan(table, snapshot_id)
    if pyiceberg:  # a second, independent reader of position deletes
        theirs = table.scan(snapshot_id=snapshot_id).to_arrow()
        assert_same_rows(theirs, expected, key=ROW_KEY)
    if row_filter is not None:
        expected = expected.filter(row_filter)
    if columns:
        expected = expected.select(columns)
    desc = client.load(name, table.metadata_location, snapshot_id=snapshot_id, columns=columns,
                       filter=filter)
    assert desc["state"] == "ready", desc
    assert desc["rows"] == expected.num_rows
    ours = client.read(name)
    key = [k for k in ROW_KEY if k[0] in expected.column_names] or expected.column_names[0]
    assert_same_rows(ours, expected, key=key)

    args = ["--snapshot-id", str(snapshot_id)] if snapshot_id is not None else []
    p = plan(table.metadata_location, *args)
    got = {f["path"]: {d["path"] for d in f["deletes"]} for f in p["files"]}
    assert got == attached
    assert p["delete_files"] == sum(e.content != 0 for e in live_entries(table, snapshot_id))
    return expected


def test_position_deletes_unpartitioned(warehouse, client):
    table = warehouse.create("pos", make_rows(1000),
                             properties={"write.parquet.row-group-limit": "300"})
    table.append(make_rows(1000, start=1000))
    table.append(make_rows(10, start=5000))
    a, b, small = data_files(table)
    assert pq.ParquetFile(local_path(a)).num_row_groups == 4

    # First and last rows, a row-group boundary; D2 repeats some of D1's
    # positions and one of its own. D1 names A as its referenced data file.
    d1 = write_position_deletes(table, [(a, p) for p in (0, 1, 299, 300, 999)],
                                referenced_data_file=a)
    d2 = write_position_deletes(table, [(a, 1), (a, 300), (a, 500), (a, 500)])
    s3 = commit_files(table, [d1, d2]).snapshot_id
    expected = check(client, "pos-1", table, pyiceberg=True)
    assert expected.num_rows == 2010 - 6
    assert pc.sum(pc.greater_equal(expected["id"], 1000)).as_py() == 1010  # B untouched
    p = plan(table.metadata_location)
    assert p["delete_files"] == 2
    deletes = {f["path"]: sorted(d["path"] for d in f["deletes"]) for f in p["files"]}
    # D1 only where it is referenced; D2 is partition-wide (the reader then
    # keeps only the rows naming each file).
    assert deletes == {a: sorted([d1.location, d2.location]), b: [d2.location],
                       small: [d2.location]}

    # One delete file over three data files, its rows for A and B in different
    # row groups; all of `small`'s rows go.
    d3 = write_position_deletes(
        table, [(a, 2), (a, 3), (b, 0), (b, 999)] + [(small, p) for p in range(10)],
        row_group_size=2)
    commit_files(table, [d3])
    expected = check(client, "pos-2", table, pyiceberg=True)
    assert expected.num_rows == 2010 - 6 - 4 - 10
    assert not pc.any(pc.greater_equal(expected["id"], 5000)).as_py()
    scan = client.describe("pos-2")["scan"]
    assert (scan["row_groups_total"], scan["row_groups_read"]) == (9, 8)  # not small's

    # Time travel to the first delete snapshot.
    expected = check(client, "pos-3", table, snapshot_id=s3, pyiceberg=True)
    assert expected.num_rows == 2004


def test_position_delete_does_not_reach_a_later_data_file(warehouse, client):
    table = warehouse.create("pos_seq", make_rows(100))
    (a,) = data_files(table)
    # A delete at sequence number 2 naming rows of C, a file added only later
    # (sequence number 3): those rows stay. Paths alone would match.
    c = f"{table.location()}/data/later-c.parquet"
    d = write_position_deletes(table, [(a, 10), (a, 11), (c, 0), (c, 1), (c, 2)])
    commit_files(table, [d])
    pq.write_table(make_rows(100, start=100), local_path(c))
    table.add_files([c])
    # Not pyiceberg as an oracle here: its planner leaves D off C's task, but
    # its reader then applies every planned delete file's rows by path alone.
    assert {t.file.file_path: t.delete_files for t in table.scan().plan_files()}[c] == set()
    expected = check(client, "pos-seq", table)
    assert expected.num_rows == 198
    assert pc.sum(pc.greater_equal(expected["id"], 100)).as_py() == 100
    files = {f["path"]: f for f in plan(table.metadata_location)["files"]}
    assert [x["path"] for x in files[a]["deletes"]] == [d.location]
    assert files[c]["deletes"] == []
    assert files[c]["seq"] > files[a]["deletes"][0]["seq"]


def test_deletes_in_the_same_commit_as_data(warehouse, client):
    """One commit adds a data file N and deletes (as a streaming upsert does):
    its position deletes apply to N (equal sequence numbers), its equality
    deletes do not (they need a strictly lower one) but do apply to A."""
    table = warehouse.create("same_commit", make_rows(100))
    (a,) = data_files(table)
    n = write_data_file(table, make_rows(100, start=1000))
    p = write_position_deletes(table, [(a, 5), (n.location, 0), (n.location, 1)])
    e = write_equality_deletes(table, {"id": pa.array([20, 1010], pa.int64())})
    commit_files(table, [n, p, e])
    expected = check(client, "same-commit", table)
    assert expected.num_rows == 200 - 4
    ids = set(expected["id"].to_pylist())
    assert 1010 in ids and not ids & {5, 20, 1000, 1001}
    files = {f["path"]: f for f in plan(table.metadata_location)["files"]}
    assert files[n.location]["seq"] == files[a]["seq"] + 1
    assert [d["path"] for d in files[n.location]["deletes"]] == [p.location]
    assert sorted(d["path"] for d in files[a]["deletes"]) == sorted([p.location, e.location])


@pytest.mark.parametrize("equality_ids_type", ["int", "long"])
def test_equality_deletes_single_column(warehouse, client, equality_ids_type):
    name = f"eq1_{equality_ids_type}"
    table = warehouse.create(name, make_rows(500))
    table.append(make_rows(500, start=500))
    e1 = write_equality_deletes(table, {"id": pa.array([0, 7, 499, 500, 999, 12345], pa.int64())})
    commit_files(table, [e1], equality_ids_type=equality_ids_type)
    expected = check(client, f"{name}-1", table)
    assert expected.num_rows == 1000 - 5

    # Re-inserted keys in a later append (higher sequence number) stay.
    table.append(make_rows(100, value_offset=0.25))
    expected = check(client, f"{name}-2", table)
    assert expected.num_rows == 1000 - 5 + 100
    assert expected.filter(pc.equal(expected["id"], 7)).num_rows == 1
    newest = data_files(table)[-1]
    files = {f["path"]: f for f in plan(table.metadata_location)["files"]}
    assert files[newest]["deletes"] == []
    others = [f for path, f in files.items() if path != newest]
    assert len(others) == 2
    for f in others:
        assert [(d["path"], d["content"], d["equality_ids"]) for d in f["deletes"]] == [
            (e1.location, 2, [table.schema().find_field("id").field_id])]


def test_equality_deletes_two_columns_and_nulls(warehouse, client):
    table = warehouse.create("eq2", make_rows(400))
    table.append(make_rows(200, start=400))
    # (category, tag) pairs; a null tag matches only null tags.
    e2 = write_equality_deletes(table, {
        "category": ["cat-0", "cat-1", "cat-2", "cat-1"],
        "tag": [None, "t1", "t5", None],
    })
    commit_files(table, [e2])
    expected = check(client, "eq2-1", table)
    rows = make_rows(600).to_pylist()
    gone = {(r["category"], r["tag"]) for r in rows} & {
        ("cat-0", None), ("cat-1", "t1"), ("cat-2", "t5"), ("cat-1", None)}
    assert gone  # the fixture deletes something
    assert expected.num_rows == sum(
        (r["category"], r["tag"]) not in gone for r in rows)

    # A second equality delete over another column set (tag alone, null) and a
    # position delete: all three apply to the same files.
    first = data_files(table)[0]
    e3 = write_equality_deletes(table, {"tag": pa.array([None], pa.string())})
    d = write_position_deletes(table, [(first, 2), (first, 3)])  # rows still there
    commit_files(table, [e3, d])
    expected = check(client, "eq2-2", table)
    assert expected["tag"].null_count == 0
    assert expected.num_rows == sum(
        (r["category"], r["tag"]) not in gone and r["tag"] is not None for r in rows) - 2


def test_partitioned_deletes(warehouse, client):
    table = warehouse.create("part", make_rows(600),
                             partition=[("category", IdentityTransform(), "category")])
    spec = table.spec()
    assert spec.spec_id == 1 and table.specs()[0].is_unpartitioned()
    paths = {}
    for task in table.scan().plan_files():
        paths[task.file.partition[0]] = task.file.file_path
    assert sorted(paths) == ["cat-0", "cat-1", "cat-2"]
    c0, c1, c2 = paths["cat-0"], paths["cat-1"], paths["cat-2"]

    # Position deletes are scoped to their partition: the file in cat-0 also
    # names rows of cat-2's file, which stay; so does one with the table's
    # unpartitioned spec (0) naming rows of spec-1 files.
    p2 = write_position_deletes(table, [(c2, 0), (c2, 1)], partition={"category": "cat-2"})
    p0 = write_position_deletes(table, [(c0, 5), (c2, 2), (c2, 3)],
                                partition={"category": "cat-0"})
    unpart = write_position_deletes(table, [(c1, 7), (c2, 4)], spec_id=0)
    commit_files(table, [p2, p0, unpart])
    # pyiceberg plans these the same way but then applies p0's rows for c2 too
    # (its reader matches delete rows by path alone), so only the oracle here.
    pyiceberg_plan = {t.file.file_path: {d.file_path for d in t.delete_files}
                      for t in table.scan().plan_files()}
    assert pyiceberg_plan == {c0: {p0.location}, c1: set(), c2: {p2.location}}
    expected = check(client, "part-1", table)
    assert expected.num_rows == 600 - 3

    # Equality deletes: one scoped to cat-1 (ids 60..65 name rows of all three
    # partitions; only cat-1's go), one global (unpartitioned spec).
    e_part = write_equality_deletes(table, {"id": pa.array(range(60, 66), pa.int64())},
                                    partition={"category": "cat-1"})
    e_global = write_equality_deletes(table, {"id": pa.array([30, 31, 32], pa.int64())},
                                      spec_id=0)
    commit_files(table, [e_part, e_global])
    expected = check(client, "part-2", table)
    assert expected.num_rows == 600 - 3 - 2 - 3
    ids = set(expected["id"].to_pylist())
    assert sorted(set(range(60, 66)) - ids) == [61, 64]
    assert not ids & {30, 31, 32}
    files = {f["path"]: {d["path"] for d in f["deletes"]}
             for f in plan(table.metadata_location)["files"]}
    assert files == {c0: {p0.location, e_global.location},
                     c1: {e_part.location, e_global.location},
                     c2: {p2.location, e_global.location}}

    # A partition filter prunes files; deletes still apply to those read.
    check(client, "part-3", table, filter="category = 'cat-1'",
          row_filter=pc.equal(pc.field("category"), "cat-1"))
    p = plan(table.metadata_location, "--filter", "category = 'cat-1'")
    assert p["data_files_pruned_by_partition"] == 2
    assert [sorted(d["path"] for d in f["deletes"]) for f in p["files"]] == [
        sorted([e_part.location, e_global.location])]


def test_deletes_with_filter_and_projection(warehouse, client):
    table = warehouse.create("filtered", make_rows(1000),
                             properties={"write.parquet.row-group-limit": "200"})
    (a,) = data_files(table)
    e = write_equality_deletes(table, {"id": pa.array(range(0, 1000, 9), pa.int64())})
    d = write_position_deletes(table, [(a, p) for p in range(150, 250)])
    commit_files(table, [e, d])
    # The projection leaves out `id` (the equality column) and `tag`.
    check(client, "filtered-1", table, columns=["value", "category"],
          filter="category <> 'cat-2' AND value >= 50",
          row_filter=(pc.field("category") != "cat-2") & (pc.field("value") >= 50))
    # A filter on the equality column itself, and one matching no row left.
    expected = check(client, "filtered-2", table, columns=["tag", "id"], filter="id < 300",
                     row_filter=pc.field("id") < 300)
    assert expected.num_rows == 300 - 34 - 100 + len([i for i in range(150, 250) if i % 9 == 0])
    expected = check(client, "filtered-3", table, filter="id IN (0, 9, 200)",
                     row_filter=pc.field("id").isin([0, 9, 200]))
    assert expected.num_rows == 0
