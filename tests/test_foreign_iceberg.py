"""Every table that another engine wrote (../shared/testdata/foreign-iceberg) reads
exactly as an oracle says.

For each table: the current snapshot in full, every older snapshot (time
travel), and a projection plus a filter on a partition column (or, for
unpartitioned tables, a column the table's deletes or evolution make
interesting), read through one real LocalCluster. The oracle is pyiceberg's
scan, pyiceberg's file reading with equality deletes applied per the spec
where pyiceberg refuses equality deletes (foreign_iceberg_util), or the rows
the upstream projects expect where pyiceberg cannot parse the metadata. See
the directory's README for where each table comes from and how its paths
resolve; the module skips when the directory is absent.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from datetime import date, datetime, timezone
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from foreign_iceberg_util import (
    ROOT,
    ForeignTables,
    metadata_file,
    oracle_rows,
    rows_of,
    sorted_rows,
    table_dirs,
    written_root,
)

import icefloe

pytestmark = pytest.mark.skipif(not ROOT.is_dir(), reason=f"{ROOT} is absent")

UTC = timezone.utc
Row = dict[str, Any]

# Per table: the projection, the filter (icefloe's syntax) and the same filter
# as a predicate on the oracle's full rows.
QUERIES: dict[str, tuple[list[str], str, Callable[[Row], bool]]] = {
    "duckdb-iceberg/equality_deletes_mytable":
        (["bir", "name"], "bir >= '2025-01-05'", lambda r: r["bir"] >= date(2025, 1, 5)),
    "duckdb-iceberg/hive_partitioned_table":
        (["event_date", "event_type"], "event_type = 'purchase'",
         lambda r: r["event_type"] == "purchase"),
    "duckdb-iceberg/large_partitioned_table":
        (["id", "joined"], "joined >= '1985-01-01'",
         lambda r: r["joined"] >= datetime(1985, 1, 1, tzinfo=UTC)),
    "duckdb-iceberg/legacy_v1":
        (["id", "category"], "category = 'alpha'", lambda r: r["category"] == "alpha"),
    "duckdb-iceberg/multi_blob_deletion_vectors":
        (["id"], "source = 'second'", lambda r: r["source"] == "second"),
    "duckdb-iceberg/partition_bucket_test":
        (["id", "partition_col"], "partition_col = 'partition_3'",
         lambda r: r["partition_col"] == "partition_3"),
    "duckdb-iceberg/partition_decimal_hugeint":
        (["partition_col", "event_type"], "partition_col > 0",
         lambda r: r["partition_col"] is not None and r["partition_col"] > 0),
    "duckdb-iceberg/spark_generated_spec2":
        (["l_orderkey_bool", "l_partkey_int", "l_extendedprice_dec38_10",
          "schema_evol_added_col_1"], "l_partkey_int <= 1000",
         lambda r: r["l_partkey_int"] is not None and r["l_partkey_int"] <= 1000),
    "duckdb-iceberg/struct_filter_issue":
        (["value"], "redpanda.timestamp >= '2025-06-26 19:00:00'",
         lambda r: r["redpanda"]["timestamp"] >= datetime(2025, 6, 26, 19)),
    "duckdb-iceberg/uuid":
        (["uuid"], "uuid >= '80000000-0000-0000-0000-000000000000'",
         lambda r: r["uuid"] >= bytes([0x80]) + bytes(15)),
    "impala/iceberg_alltypes_part":
        (["i", "p_date", "p_float", "p_decimal"],
         "p_bool = true AND p_int = 1 AND p_bigint = 11 AND p_double > 2.2 AND "
         "p_decimal = 123.321 AND p_date = '2022-02-22' AND p_string = 'impala' AND i > 1",
         lambda r: r["i"] > 1),
    "impala/iceberg_legacy_partition_schema_evolution":
        (["i", "p_int_long", "p_float_double", "p_dec_dec"], "p_dec_dec > 3 AND p_int_long = 1",
         lambda r: r["p_dec_dec"] > 3 and r["p_int_long"] == 1),
    "impala/iceberg_lineitem_multiblock":
        (["l_orderkey", "l_quantity"], "l_orderkey < 100 AND l_quantity > 10",
         lambda r: r["l_orderkey"] < 100 and r["l_quantity"] > 10),
    "impala/iceberg_partitioned":
        (["id", "action"], "action = 'click' AND event_time < '2020-01-01 10:00:00+00:00'",
         lambda r: r["action"] == "click"
         and r["event_time"] < datetime(2020, 1, 1, 10, tzinfo=UTC)),
    "impala/iceberg_spark_compaction_with_dangling_delete":
        (["id"], "j >= 20", lambda r: r["j"] >= 20),
    "impala/iceberg_v2_delete_equality_nulls":
        (["s"], "i IS NULL", lambda r: r["i"] is None),
    "impala/iceberg_v2_delete_equality_partition_evolution":
        (["i", "d"], "i = 2 AND d = '2023-12-24'",
         lambda r: r["i"] == 2 and r["d"] == date(2023, 12, 24)),
    "impala/iceberg_v2_delete_equality_partitioned":
        (["i", "s"], "d = '2023-12-25'", lambda r: r["d"] == date(2023, 12, 25)),
    "impala/iceberg_v2_delete_pos_and_multi_eq_ids":
        (["i", "d"], "d > '2024-01-01'", lambda r: r["d"] > date(2024, 1, 1)),
    "impala/iceberg_v2_equality_delete_schema_evolution":
        (["i", "str", "j"], "d = '2024-03-21'", lambda r: r["d"] == date(2024, 3, 21)),
    "impala/iceberg_v2_partitioned_position_deletes":
        (["id", "user"], "action = 'view'", lambda r: r["action"] == "view"),
    "impala/iceberg_v2_positional_not_all_data_files_have_delete_files":
        (["s"], "i > 2", lambda r: r["i"] > 2),
}

# Tables whose current snapshot pyiceberg cannot read right, and their rows.
EXPECTED: dict[str, list[Row]] = {
    # pyiceberg cannot parse v1 snapshots that list `manifests` inline; the rows
    # of duckdb-iceberg's iceberg_v1_deprecated_metadata.test.
    "duckdb-iceberg/legacy_v1": [
        {"id": 1, "category": "alpha", "amount": 10},
        {"id": 2, "category": "beta", "amount": 20},
        {"id": 3, "category": "alpha", "amount": None},
    ],
    # pyiceberg 0.12 gives the double partition value 2.222 (an Avro double in
    # the manifest, the directory says p_double=2.222) as float32's
    # 2.2219998836517334; the values are the manifest's.
    "impala/iceberg_alltypes_part": [
        {"i": i, "p_bool": True, "p_int": 1, "p_bigint": 11, "p_float": 1.100000023841858,
         "p_double": 2.222, "p_decimal": Decimal("123.321"), "p_date": date(2022, 2, 22),
         "p_string": "impala"} for i in (1, 2)
    ],
    # pyiceberg 0.12 rebuilds lists without their validity, turning the null
    # `headers` list that the Parquet file holds into []; the file's row.
    "duckdb-iceberg/struct_filter_issue": [
        {"redpanda": {"partition": 0, "offset": 0,
                      "timestamp": datetime(2025, 6, 26, 19, 45, 32, 478000), "headers": None,
                      "key": None},
         "value": b"hello world"},
    ],
}
# Tables whose rows are pinned as their upstream tests expect them, besides
# the oracle: the deletion vectors delete id 2 of the first file and ids 4 and
# 6 of the second (duckdb-iceberg multiple_deletion_vectors_in_puffin.test);
# the partition values of Hive-migrated files are real values, not nulls.
PINNED: dict[str, list[Row]] = {
    "duckdb-iceberg/multi_blob_deletion_vectors": [
        {"id": 1, "source": "first"}, {"id": 3, "source": "first"},
        {"id": 5, "source": "second"},
    ],
    "impala/iceberg_legacy_partition_schema_evolution": [
        {"p_int_long": 1, "p_float_double": 1.100000023841858, "p_dec_dec": Decimal("2.718"),
         "i": 2},
        {"p_int_long": 1, "p_float_double": 1.100000023841858, "p_dec_dec": Decimal("3.141"),
         "i": 1},
    ],
}
# Tables icefloe refuses, and the words the error must contain.
REFUSED: dict[str, list[str]] = {
    "impala/trino_variant": ["'v'", "variant"],
}

TABLES = {str(p.relative_to(ROOT)): p for p in table_dirs()}


def test_every_table_has_a_query():
    """A new table in the directory must come with its query (or refusal)."""
    assert set(TABLES) == set(QUERIES) | set(REFUSED)


@pytest.fixture(scope="module")
def foreign():
    tables = ForeignTables()
    old_cwd = os.getcwd()
    os.chdir(tables.cwd)
    try:
        yield tables
    finally:
        os.chdir(old_cwd)
        tables.close()


@pytest.fixture(scope="module")
def client(foreign, tmp_path_factory):
    # Started inside the scratch cwd: the servers resolve relative paths there.
    with icefloe.LocalCluster(num_nodes=2, memory_limit="1GiB",
                              log_dir=tmp_path_factory.mktemp("logs")) as cluster:
        with cluster.client() as c:
            yield c


def _table(name: str, foreign: ForeignTables) -> Path:
    table_dir = TABLES[name]
    why = foreign.resolvable(table_dir)
    if why:
        pytest.skip(why)
    return metadata_file(table_dir)


def _older_snapshots(metadata: Path) -> tuple[list[int], list[tuple[int, str]]]:
    """The ids of the snapshots before the current one, and those among them
    whose manifest list the copied table lacks (with its file name)."""
    meta = json.loads(metadata.read_text())
    current = meta.get("current-snapshot-id")
    older, missing = [], []
    for s in meta.get("snapshots", []):
        if s["snapshot-id"] == current:
            continue
        name = Path(s.get("manifest-list") or "").name
        if name and not (metadata.parent / name).exists():
            missing.append((s["snapshot-id"], name))
        else:
            older.append(s["snapshot-id"])
    return older, missing


def _expected(name: str, metadata: Path, snapshot_id: int | None) -> list[Row]:
    if name in EXPECTED and snapshot_id is None:
        return sorted_rows(EXPECTED[name])
    rows = oracle_rows(metadata, snapshot_id)
    if name in PINNED and snapshot_id is None:
        assert rows == sorted_rows(PINNED[name]), "the oracle disagrees with upstream"
    return rows


def _read(client, label: str, metadata: Path, **load: Any) -> list[Row]:
    desc = client.load(label, str(metadata), **load)
    assert desc["state"] == "ready", desc
    try:
        rows = rows_of(client.read(label))
        assert desc["rows"] == len(rows)
        return rows
    finally:
        client.evict(label)


@pytest.mark.parametrize("name", sorted(QUERIES))
def test_full_scan_and_time_travel(name, foreign, client):
    metadata = _table(name, foreign)
    label = "t-" + name.replace("/", "-")
    assert _read(client, label, metadata) == _expected(name, metadata, None)
    older, missing = _older_snapshots(metadata)
    for snapshot_id in older:
        ours = _read(client, f"{label}-{snapshot_id}", metadata, snapshot_id=snapshot_id)
        assert ours == _expected(name, metadata, snapshot_id), f"snapshot {snapshot_id}"
    # A snapshot whose manifest list is gone is a storage error naming it.
    for snapshot_id, manifest_list in missing:
        with pytest.raises(icefloe.StorageError, match=manifest_list):
            client.load(f"{label}-{snapshot_id}", str(metadata), snapshot_id=snapshot_id)


@pytest.mark.parametrize("name", sorted(QUERIES))
def test_projection_and_filter(name, foreign, client):
    metadata = _table(name, foreign)
    columns, text, predicate = QUERIES[name]
    full = _expected(name, metadata, None)
    expected = sorted_rows([{c: r[c] for c in columns} for r in full if predicate(r)])
    assert expected, "the filter should keep some rows"
    assert len(expected) < len(full) or len(full) == 1, "the filter should drop some rows"
    label = "q-" + name.replace("/", "-")
    assert _read(client, label, metadata, columns=columns, filter=text) == expected


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_unsupported_types_are_refused_by_name(name, foreign, client):
    metadata = _table(name, foreign)
    with pytest.raises(icefloe.Error) as info:
        client.load("r-" + name.replace("/", "-"), str(metadata))
    for words in REFUSED[name]:
        assert words in str(info.value)


DV_TABLE = "duckdb-iceberg/multi_blob_deletion_vectors"
PUFFIN = "multiple-deletion-vectors.puffin"


@pytest.mark.skipif(DV_TABLE not in TABLES, reason="no deletion-vector table")
def test_a_refresh_applies_deletion_vectors_to_the_files_they_touch(foreign, client):
    """duckdb-iceberg's table: snapshot 1 appends a file, snapshot 2 another,
    snapshot 3 adds deletion vectors to both. Each load of the next snapshot
    under the same name refreshes the cached copy (issue 30)."""
    metadata = _table(DV_TABLE, foreign)
    snapshots = [s["snapshot-id"] for s in json.loads(metadata.read_text())["snapshots"]]
    assert len(snapshots) == 3
    name = "refresh-dv"
    try:
        client.load(name, str(metadata), snapshot_id=snapshots[0])
        # The second file is read, the first kept.
        desc = client.load(name, str(metadata), snapshot_id=snapshots[1])
        r = desc["refresh"]
        assert (r["tasks_reused"], r["tasks_read"], r["files_added"]) == (1, 1, 1), r
        assert rows_of(client.read(name)) == oracle_rows(metadata, snapshots[1])
        # Both files gain a deletion vector: both are read again with it.
        desc = client.load(name, str(metadata), snapshot_id=snapshots[2])
        r = desc["refresh"]
        assert (r["tasks_reused"], r["tasks_read"], r["files_removed"]) == (0, 2, 0), r
        assert rows_of(client.read(name)) == sorted_rows(PINNED[DV_TABLE])
    finally:
        client.evict(name)


def _corrupted_copy(cwd: Path, table_dir: Path, puffin: bytes) -> None:
    """The DV table at its relative path under `cwd`, every file a symlink to
    the original except the Puffin file, which holds `puffin`."""
    root = cwd / written_root(table_dir)
    for src in table_dir.rglob("*"):
        if src.is_dir():
            continue
        dst = root / src.relative_to(table_dir)
        dst.parent.mkdir(parents=True, exist_ok=True)
        if src.name == PUFFIN:
            dst.write_bytes(puffin)
        else:
            dst.symlink_to(src)


@pytest.mark.skipif(DV_TABLE not in TABLES, reason="no deletion-vector table")
def test_corrupt_puffin_files_are_errors_naming_them(tmp_path):
    table_dir = TABLES[DV_TABLE]
    metadata = metadata_file(table_dir)
    good = next(table_dir.rglob(PUFFIN)).read_bytes()
    # Footer intact, second blob's bitmap flipped: the node's CRC check.
    flipped = bytearray(good)
    flipped[46 + 20] ^= 0xFF
    cases = {
        "truncated": (good[:60], "corrupt"),
        "flipped": (bytes(flipped), "CRC-32"),
    }
    old_cwd = os.getcwd()
    try:
        for case, (puffin, words) in cases.items():
            cwd = tmp_path / case
            _corrupted_copy(cwd, table_dir, puffin)
            os.chdir(cwd)
            with icefloe.LocalCluster(num_nodes=1, memory_limit="256MiB",
                                      log_dir=tmp_path / f"logs-{case}") as cluster, \
                    cluster.client() as c:
                with pytest.raises(icefloe.InvalidArgument) as info:
                    c.load(case, str(metadata))
                assert PUFFIN in str(info.value) and words in str(info.value), info.value
                # The cluster keeps serving: the snapshot before the deletes loads.
                before = _older_snapshots(metadata)[0][-1]
                assert c.load(f"{case}-before", str(metadata), snapshot_id=before)["rows"] == 6
    finally:
        os.chdir(old_cwd)
