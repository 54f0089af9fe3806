"""Reading Iceberg tables that pyiceberg wrote, compared with pyiceberg's own scans.

Each case writes a table with pyiceberg, loads it into a running icefloe
cluster and checks that ``Client.read`` returns exactly the rows of
``table.scan(...).to_arrow()``; pruning cases also check the planner's counts.
"""

from __future__ import annotations

import json
from datetime import date, datetime, timedelta

import numpy as np
import pyarrow as pa
import pytest
from iceberg_util import Warehouse, assert_same_rows, plan
from pyiceberg.expressions import GreaterThanOrEqual
from pyiceberg.transforms import (
    BucketTransform,
    DayTransform,
    IdentityTransform,
    MonthTransform,
    TruncateTransform,
)
from pyiceberg.types import DoubleType, LongType

import icefloe


def make_rows(n: int, start: int = 0, seed: int = 0) -> pa.Table:
    rng = np.random.default_rng(seed)
    ids = np.arange(start, start + n, dtype=np.int64)
    base = datetime(2024, 1, 1)
    return pa.table(
        {
            "id": ids,
            "category": pa.array([f"cat-{i % 5}" for i in ids]),
            "value": rng.standard_normal(n),
            "count": rng.integers(0, 1000, n, dtype=np.int32),
            "day": pa.array([(base + timedelta(days=int(i) % 90)).date() for i in ids]),
            "ts": pa.array([base + timedelta(hours=int(i)) for i in ids], pa.timestamp("us")),
        }
    )


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory) -> Warehouse:
    return Warehouse(tmp_path_factory.mktemp("iceberg"))


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with icefloe.LocalCluster(num_nodes=2, memory_limit="2GiB",
                              log_dir=tmp_path_factory.mktemp("logs")) as c:
        yield c


@pytest.fixture(scope="module")
def client(cluster):
    with cluster.client() as c:
        yield c


def check(client, name: str, table, *, scan_kwargs=None, **load_kwargs) -> dict:
    desc = client.load(name, table.metadata_location, **load_kwargs)
    assert desc["state"] == "ready", desc
    ours = client.read(name)
    theirs = table.scan(**(scan_kwargs or {})).to_arrow()
    assert_same_rows(ours, theirs)
    assert desc["rows"] == theirs.num_rows
    return desc


def test_unpartitioned_appends_and_overwrite(warehouse, client):
    table = warehouse.create("plain", make_rows(3000))
    table.append(make_rows(2000, start=3000, seed=1))
    first = table.current_snapshot().snapshot_id
    check(client, "plain", table)
    table.overwrite(make_rows(500, start=10_000, seed=2))
    check(client, "plain-overwritten", table)
    # Time travel by snapshot id: the earlier snapshot's rows.
    desc = client.load("plain-v2", table.metadata_location, snapshot_id=first)
    assert desc["snapshot_id"] == first
    assert_same_rows(client.read("plain-v2"), table.scan(snapshot_id=first).to_arrow())


def test_time_travel_by_ref_and_timestamp(warehouse, client):
    table = warehouse.create("travel", make_rows(100))
    s1 = table.current_snapshot()
    table.append(make_rows(100, start=100))
    table.manage_snapshots().create_tag(s1.snapshot_id, "v1").commit()
    assert client.load("travel-tag", table.metadata_location, ref="v1")["rows"] == 100
    assert client.load("travel-main", table.metadata_location, ref="main")["rows"] == 200
    assert client.load("travel-asof", table.metadata_location,
                       as_of=s1.timestamp_ms)["rows"] == 100
    with pytest.raises(icefloe.NotFound, match="nope"):
        client.load("travel-bad", table.metadata_location, ref="nope")


@pytest.mark.parametrize(
    "name, source, transform",
    [
        ("identity", "category", IdentityTransform()),
        ("bucket", "id", BucketTransform(8)),
        ("day", "day", DayTransform()),
        ("month", "ts", MonthTransform()),
        ("truncate", "category", TruncateTransform(4)),
    ],
)
def test_partitioned_tables(warehouse, client, name, source, transform):
    table = warehouse.create(f"part_{name}", make_rows(4000),
                             partition=[(source, transform, f"{source}_{name}")])
    assert not table.spec().is_unpartitioned()
    check(client, f"part-{name}", table)
    check(client, f"part-{name}-filtered", table, filter="id < 1000 AND count >= 100",
          scan_kwargs={"row_filter": "id < 1000 and count >= 100"})


def test_partition_pruning_counts(warehouse, client):
    table = warehouse.create("pruned", make_rows(5000),
                             partition=[("category", IdentityTransform(), "category")])
    p = plan(table.metadata_location, "--filter", "category = 'cat-3'")
    assert p["data_files_total"] == 5
    assert p["data_files_pruned_by_partition"] == 4
    assert len(p["files"]) == 1
    check(client, "pruned", table, filter="category = 'cat-3'",
          scan_kwargs={"row_filter": "category == 'cat-3'"})
    # Day partitions: a date range keeps only the matching days' files.
    by_day = warehouse.create("pruned_day", make_rows(900),
                              partition=[("day", DayTransform(), "day_day")])
    p = plan(by_day.metadata_location, "--filter", "day >= DATE '2024-03-25'")
    assert p["data_files_total"] == 90
    assert len(p["files"]) == 6  # 2024-03-25 .. 2024-03-30, the last day written
    check(client, "pruned-day", by_day, filter="day >= DATE '2024-03-25'",
          scan_kwargs={"row_filter": "day >= '2024-03-25'"})


def test_bounds_pruning_and_row_groups(warehouse, client):
    table = warehouse.catalog.create_table(
        "db.bounds", schema=make_rows(1).schema,
        properties={"write.parquet.row-group-limit": "1000"})
    for k in range(4):  # four files with disjoint id ranges
        table.append(make_rows(3000, start=k * 3000, seed=k))
    p = plan(table.metadata_location, "--filter", "id >= 7500")
    assert p["data_files_total"] == 4
    assert p["data_files_pruned_by_bounds"] == 2
    desc = check(client, "bounds", table, filter="id >= 7500",
                 scan_kwargs={"row_filter": GreaterThanOrEqual("id", 7500)})
    assert desc["rows"] == 4500
    assert desc["scan"]["row_groups_total"] == 6
    assert desc["scan"]["row_groups_read"] == 5  # [6000, 7000) is skipped by its stats


def test_projection_and_filter(warehouse, client):
    table = warehouse.create("projected", make_rows(2000))
    desc = client.load("projected", table.metadata_location, columns=["value", "id"],
                       filter="count < 500 AND category IN ('cat-1', 'cat-2')")
    theirs = table.scan(selected_fields=("value", "id"),
                        row_filter="count < 500 and category in ('cat-1', 'cat-2')").to_arrow()
    ours = client.read("projected")
    assert ours.column_names == ["value", "id"]
    assert_same_rows(ours, theirs.select(["value", "id"]))
    assert desc["schema"].names == ["value", "id"]


def test_schema_evolution(warehouse, client):
    data = make_rows(1000).cast(pa.schema([
        ("id", pa.int64()), ("category", pa.string()), ("value", pa.float32()),
        ("count", pa.int32()), ("day", pa.date32()), ("ts", pa.timestamp("us"))]))
    table = warehouse.create("evolve", data)
    with table.update_schema() as update:
        update.add_column("extra", LongType())
        update.rename_column("category", "kind")
        update.delete_column("day")
        update.update_column("count", field_type=LongType())
        update.update_column("value", field_type=DoubleType())
    newer = table.schema().as_arrow()
    more = make_rows(500, start=1000).drop_columns(["day"]).rename_columns(
        ["id", "kind", "value", "count", "ts"]).append_column(
        "extra", pa.array(np.arange(500), pa.int64()))
    table.append(more.select(newer.names).cast(newer))
    desc = check(client, "evolved", table)
    assert desc["schema"].names == ["id", "kind", "value", "count", "ts", "extra"]
    assert desc["schema"].field("count").type == pa.int64()
    ours = client.read("evolved").sort_by("id")
    assert ours.column("extra").null_count == 1000  # added later: null in old files
    assert ours.column("kind")[0].as_py() == "cat-0"  # renamed: keeps its data


def test_s3_table(tmp_path, s3_server, cluster_s3):
    wh = Warehouse(tmp_path / "s3", warehouse="s3://warehouse/wh", properties={
        "s3.endpoint": s3_server["endpoint"], "s3.access-key-id": "testing",
        "s3.secret-access-key": "testing", "s3.region": "us-east-1"})
    table = wh.create("remote", make_rows(3000))
    table.append(make_rows(1000, start=3000))
    with cluster_s3.client() as client:
        location = table.metadata_location
        assert location.startswith("s3://")
        check(client, "remote", table)
        # s3a:// names the same objects.
        desc = client.load("remote-s3a", "s3a://" + location[len("s3://"):])
        assert desc["rows"] == 4000


@pytest.fixture(scope="module")
def cluster_s3(tmp_path_factory, s3_server):
    with icefloe.LocalCluster(num_nodes=2, env=s3_server["env"],
                              log_dir=tmp_path_factory.mktemp("logs-s3")) as c:
        yield c


def test_bad_input_is_a_clear_error(warehouse, client, tmp_path):
    with pytest.raises(icefloe.StorageError, match="missing.metadata.json"):
        client.load("bad1", str(tmp_path / "missing.metadata.json"))
    (tmp_path / "broken.metadata.json").write_text("{not json")
    with pytest.raises(icefloe.InvalidArgument, match="broken.metadata.json"):
        client.load("bad2", str(tmp_path / "broken.metadata.json"))
    (tmp_path / "v9.metadata.json").write_text(json.dumps({"format-version": 9}))
    with pytest.raises(icefloe.Error, match="format-version 9"):
        client.load("bad3", str(tmp_path / "v9.metadata.json"))
    table = warehouse.create("for-errors", make_rows(10))
    with pytest.raises(icefloe.InvalidArgument, match="unknown column 'nope'"):
        client.load("bad4", table.metadata_location, filter="nope > 1")
    with pytest.raises(icefloe.InvalidArgument, match="position"):
        client.load("bad5", table.metadata_location, filter="id > AND")
    # A missing data file fails the load with its path; the cluster serves on.
    files = [t.file.file_path for t in table.scan().plan_files()]
    import os
    from urllib.parse import urlparse

    os.remove(urlparse(files[0]).path)
    with pytest.raises(icefloe.Error, match=os.path.basename(files[0])):
        client.load("bad6", table.metadata_location)
    assert client.read("plain").num_rows > 0


def test_dates_and_timestamps_filter(warehouse, client):
    table = warehouse.create("temporal", make_rows(1000))
    check(client, "temporal", table, filter="day >= DATE '2024-02-01'",
          scan_kwargs={"row_filter": f"day >= '{date(2024, 2, 1).isoformat()}'"})
