"""Iceberg tables written by pyiceberg (the independent writer and oracle).

A ``Warehouse`` is a pyiceberg SqlCatalog on a sqlite file with a local
(``file://``) or S3 warehouse. Tests write tables with it, load them into
icefloe, and compare what icefloe returns with pyiceberg's own scan.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pyarrow as pa
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.table import Table

from icefloe._bin import bin_path


class Warehouse:
    def __init__(self, root: Path, warehouse: str | None = None,
                 properties: dict[str, str] | None = None) -> None:
        root.mkdir(parents=True, exist_ok=True)
        self.root = root
        self.location = warehouse or (root / "warehouse").as_uri()
        self.catalog = SqlCatalog(
            "test",
            uri=f"sqlite:///{root / 'catalog.db'}",
            warehouse=self.location,
            **(properties or {}),
        )
        self.catalog.create_namespace_if_not_exists("db")

    def create(self, name: str, data: pa.Table, *,
               partition: list[tuple[str, Any, str]] | None = None,
               properties: dict[str, str] | None = None) -> Table:
        """Creates db.<name>, partitioned by (source column, transform, name)
        fields, and appends `data`."""
        table = self.catalog.create_table(f"db.{name}", schema=data.schema,
                                          properties=properties or {})
        if partition:
            with table.update_spec() as spec:
                for source, transform, field_name in partition:
                    spec.add_field(source, transform, field_name)
        table.append(data)
        return table

    def table(self, name: str) -> Table:
        return self.catalog.load_table(f"db.{name}")


def sorted_table(table: pa.Table, key: str = "id") -> pa.Table:
    """Rows sorted by `key`, chunks combined, schema metadata dropped (for comparisons)."""
    table = table.sort_by(key).combine_chunks()
    return table.replace_schema_metadata(None)


def assert_same_rows(ours: pa.Table, theirs: pa.Table, key: str = "id") -> None:
    """Same columns (by name, in order), same rows regardless of order."""
    assert ours.column_names == theirs.column_names
    assert ours.num_rows == theirs.num_rows, (ours.num_rows, theirs.num_rows)
    a = sorted_table(ours, key)
    b = sorted_table(theirs, key).cast(a.schema)
    if not a.equals(b):
        for name in a.column_names:
            assert a.column(name).equals(b.column(name)), name


def plan(location: str, *args: str) -> dict:
    """`icefloe-head plan LOCATION --json ARGS...`: what a load would read and prune."""
    out = subprocess.run([bin_path("icefloe-head"), "plan", location, "--json", *args],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)
