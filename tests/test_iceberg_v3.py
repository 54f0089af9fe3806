"""Iceberg v3 default values: a column added after data was written reads as
its `initial-default` in the older files (and as written in newer ones).

pyiceberg 0.12 reads v3 tables but cannot write them, so the fixture takes a
v2 table that pyiceberg wrote and writes a v3 metadata.json beside it whose
current schema adds defaulted columns. pyiceberg's scan of that metadata is
the oracle.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest
from iceberg_util import Warehouse, assert_same_rows
from pyiceberg.table import StaticTable

import icefloe

DEFAULTS = [
    {"id": 10, "name": "n", "required": False, "type": "int", "initial-default": 42},
    {"id": 11, "name": "s", "required": False, "type": "string", "initial-default": "x"},
    {"id": 12, "name": "d", "required": False, "type": "date", "initial-default": "2024-01-02"},
    {"id": 13, "name": "amount", "required": False, "type": "decimal(9,2)",
     "initial-default": "14.20"},
    {"id": 14, "name": "flag", "required": False, "type": "boolean", "initial-default": True},
    {"id": 15, "name": "none", "required": False, "type": "long"},
]


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    with icefloe.LocalCluster(num_nodes=1, memory_limit="512MiB",
                              log_dir=tmp_path_factory.mktemp("logs")) as cluster:
        with cluster.client() as c:
            yield c


def v3_with_defaults(tmp_path: Path) -> str:
    table = Warehouse(tmp_path).create("defaults", pa.table({"id": pa.array([1, 2], pa.int64())}))
    table.append(pa.table({"id": pa.array([3], pa.int64())}))
    path = Path(table.metadata_location.removeprefix("file://"))
    meta = json.loads(path.read_text())
    schema = json.loads(json.dumps(meta["schemas"][-1]))
    schema["schema-id"] = max(s["schema-id"] for s in meta["schemas"]) + 1
    schema["fields"] += DEFAULTS
    meta.update({"format-version": 3, "next-row-id": 3, "last-column-id": 15,
                 "current-schema-id": schema["schema-id"]})
    meta["schemas"].append(schema)
    out = path.with_name("00099-v3-defaults.metadata.json")
    out.write_text(json.dumps(meta))
    return str(out)


def test_columns_added_later_read_as_their_initial_default(tmp_path, client):
    location = v3_with_defaults(tmp_path)
    theirs = StaticTable.from_metadata(location).scan().to_arrow()
    assert theirs["n"].to_pylist() == [42, 42, 42]
    ours = client.read(client.load("v3", location)["name"])
    assert_same_rows(ours, theirs)
    assert ours["none"].null_count == 3
    # The default prunes and filters like a value the files hold.
    desc = client.load("v3-filtered", location, columns=["id", "s"],
                       filter="n = 42 AND amount > 14.1 AND flag = true AND d = '2024-01-02'")
    assert desc["rows"] == 3
    assert client.load("v3-none", location, filter="n != 42")["rows"] == 0
