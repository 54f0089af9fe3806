"""Parquet files without field ids (pyarrow-written, registered with pyiceberg's
`add_files`) resolve through the table's `schema.name-mapping.default`, before
and after a column rename, and are refused without a mapping, as pyiceberg
refuses them. pyiceberg's scan is the oracle.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from iceberg_util import Warehouse, assert_same_rows
from pyiceberg.types import IntegerType

import icefloe

MAPPING = "schema.name-mapping.default"


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory) -> Warehouse:
    return Warehouse(tmp_path_factory.mktemp("name-mapping"))


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    with icefloe.LocalCluster(num_nodes=2, memory_limit="1GiB",
                              log_dir=tmp_path_factory.mktemp("logs")) as cluster:
        with cluster.client() as c:
            yield c


def plain_file(warehouse: Warehouse, name: str, data: pa.Table) -> str:
    """A Parquet file as pyarrow writes it: no field ids."""
    path = warehouse.root / f"{name}.parquet"
    pq.write_table(data, path)
    assert all(f.metadata is None for f in pq.read_schema(path))
    return str(path)


def check(client, name: str, table, **load) -> pa.Table:
    desc = client.load(name, table.metadata_location, **load)
    assert desc["state"] == "ready", desc
    ours = client.read(name)
    theirs = table.scan().to_arrow()
    assert_same_rows(ours, theirs)
    return ours


def test_added_files_resolve_through_the_name_mapping_across_a_rename(warehouse, client):
    first = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "name": ["a", "b", None],
                      "score": [0.5, 1.5, 2.5]})
    table = warehouse.catalog.create_table("db.added", schema=first.schema)
    table.add_files([plain_file(warehouse, "first", first)])
    table = warehouse.table("added")
    assert MAPPING in table.properties
    check(client, "added", table)

    # A rename keeps the old name in the mapping; the old file still reads.
    with table.update_schema() as update:
        update.rename_column("name", "label")
        update.add_column("extra", IntegerType())
    table = warehouse.table("added")
    assert '"label"' in table.properties[MAPPING]
    ours = check(client, "added-renamed", table)
    assert ours.column_names == ["id", "label", "score", "extra"]
    assert sorted(ours["label"].to_pylist(), key=lambda v: (v is None, v or "")) == ["a", "b", None]
    assert ours["extra"].null_count == 3

    # A file written after the rename uses the new name.
    second = pa.table({"id": pa.array([4], pa.int64()), "label": ["d"], "score": [4.5]})
    table.add_files([plain_file(warehouse, "second", second)])
    table = warehouse.table("added")
    ours = check(client, "added-second", table)
    assert sorted(ours["id"].to_pylist()) == [1, 2, 3, 4]
    filtered = client.load("added-filtered", table.metadata_location, columns=["id", "label"],
                           filter="label IN ('a', 'd')")
    assert filtered["rows"] == 2
    assert sorted(client.read("added-filtered")["id"].to_pylist()) == [1, 4]


def test_files_without_ids_and_no_mapping_are_refused(warehouse, client):
    data = pa.table({"id": pa.array([1, 2], pa.int64())})
    table = warehouse.catalog.create_table("db.unmapped", schema=data.schema)
    table.add_files([plain_file(warehouse, "unmapped", data)])
    with warehouse.table("unmapped").transaction() as tx:
        tx.remove_properties(MAPPING)
    table = warehouse.table("unmapped")
    assert MAPPING not in table.properties
    with pytest.raises(ValueError, match="field-ids"):
        table.scan().to_arrow()  # pyiceberg refuses it too
    with pytest.raises(icefloe.InvalidArgument) as info:
        client.load("unmapped", table.metadata_location)
    assert "unmapped.parquet" in str(info.value)
    assert MAPPING in str(info.value)
