"""Writes a small Iceberg table with pyiceberg, for metadata_test.

Usage: make_pyiceberg_table.py WAREHOUSE_DIR

Creates a SqlCatalog (sqlite) with a file:// warehouse in WAREHOUSE_DIR, makes
table `db.events` (partitioned by identity(category); other transforms
need the optional pyiceberg-core package), appends twice, adds a column
`note` (string), appends once more, and prints one JSON line: the metadata
location and the snapshot ids, for the test to check against.
"""

import datetime as dt
import json
import sys
from pathlib import Path

import pyarrow as pa
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import IdentityTransform
from pyiceberg.types import LongType, NestedField, StringType, TimestampType


def main() -> None:
    warehouse = Path(sys.argv[1]).resolve()
    warehouse.mkdir(parents=True, exist_ok=True)
    catalog = SqlCatalog(
        "test",
        uri=f"sqlite:///{warehouse / 'catalog.db'}",
        warehouse=f"file://{warehouse}",
    )
    catalog.create_namespace("db")
    schema = Schema(
        NestedField(1, "id", LongType(), required=True),
        NestedField(2, "ts", TimestampType(), required=False),
        NestedField(3, "category", StringType(), required=False),
        identifier_field_ids=[1],
    )
    spec = PartitionSpec(
        PartitionField(source_id=3, field_id=1000, transform=IdentityTransform(), name="category")
    )
    table = catalog.create_table("db.events", schema=schema, partition_spec=spec)

    arrow_schema = pa.schema(
        [
            pa.field("id", pa.int64(), nullable=False),
            pa.field("ts", pa.timestamp("us")),
            pa.field("category", pa.string()),
        ]
    )
    day = dt.datetime(2024, 1, 1)
    for batch in range(2):
        ids = [batch * 10 + i for i in range(3)]
        ts = [day + dt.timedelta(days=batch, hours=i) for i in range(3)]
        categories = ["a", "b", "a"]
        table.append(pa.table({"id": ids, "ts": ts, "category": categories}, schema=arrow_schema))

    with table.update_schema() as update:
        update.add_column("note", StringType())
    table = catalog.load_table("db.events")
    with_note = arrow_schema.append(pa.field("note", pa.string()))
    row = {"id": [100], "ts": [day], "category": ["c"], "note": ["hello"]}
    table.append(pa.table(row, schema=with_note))
    table = catalog.load_table("db.events")

    print(
        json.dumps(
            {
                "metadata_location": table.metadata_location,
                "snapshot_ids": [s.snapshot_id for s in table.metadata.snapshots],
                "current_snapshot_id": table.metadata.current_snapshot_id,
                "current_schema_id": table.metadata.current_schema_id,
            }
        )
    )


if __name__ == "__main__":
    main()
