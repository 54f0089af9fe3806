"""Following a table (issue 30): a head started with ``--follow 1`` reloads a
dataset loaded from a table directory when pyiceberg commits a new snapshot,
leaves pinned loads and fixed metadata files alone, and keeps serving the
cached copy (with the error in status and metrics) when the table's metadata
is gone.
"""

from __future__ import annotations

import re
import shutil
import time
import urllib.parse
from pathlib import Path

import numpy as np
import pytest
from iceberg_util import Warehouse, assert_same_rows
from test_cli import icefloe_up, run
from test_cluster import rows
from test_metrics import scrape, total

import icefloe

PERIOD_S = 1
WAIT_S = 60  # every wait below is bounded by this


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory):
    return Warehouse(tmp_path_factory.mktemp("wh"))


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with icefloe.LocalCluster(num_nodes=2, head_args=["--follow", str(PERIOD_S)],
                              log_dir=tmp_path_factory.mktemp("logs")) as c:
        yield c


def followed(client: icefloe.Client, name: str) -> dict:
    for record in client.status()["follow"]["datasets"]:
        if record["name"] == name:
            return record
    return {}


def wait_for(what: str, check) -> None:
    """Polls `check` until it returns true, at most WAIT_S."""
    deadline = time.monotonic() + WAIT_S
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {WAIT_S}s waiting for {what}")
        time.sleep(0.1)


def wait_checks(client: icefloe.Client, name: str, more: int) -> None:
    """Waits until the follower has read `name`'s table `more` more times."""
    start = followed(client, name).get("checks", 0)
    wait_for(f"{more} more checks of {name}",
             lambda: followed(client, name).get("checks", 0) >= start + more)


def test_follows_appends_to_the_newest_snapshot(cluster, warehouse):
    table = warehouse.create("grow", rows(1000))
    first = table.current_snapshot().snapshot_id
    with cluster.client() as c:
        loaded = c.load("grow", table.location())  # the table directory: it can move
        assert loaded["snapshot_id"] == first
        wait_checks(c, "grow", 1)
        assert followed(c, "grow")["refreshes"] == 0  # nothing new: nothing reloaded

        committed_ms = int(time.time() * 1000)
        table.append(rows(500, start=1000))
        table = warehouse.table("grow")
        new = table.current_snapshot().snapshot_id
        assert new != first
        assert table.current_snapshot().timestamp_ms >= committed_ms - 1000
        wait_for("the new snapshot in describe",
                 lambda: c.describe("grow")["snapshot_id"] == new)
        desc = c.describe("grow")
        assert desc["rows"] == 1500
        assert desc["generation"] != loaded["generation"]
        # A refresh: the first file's rows are reused, only the appended one is read.
        assert desc["refresh"]["from_snapshot_id"] == first
        assert (desc["refresh"]["rows_reused"], desc["refresh"]["rows_read"]) == (1000, 500)
        assert_same_rows(c.read("grow"), table.scan(snapshot_id=new).to_arrow())

        wait_for("the refresh in status", lambda: followed(c, "grow").get("refreshes") == 1)
        record = followed(c, "grow")
        assert record["followed"] and record["state"] == "following"
        assert record["snapshot_id"] == new and record["refreshed_to"] == new
        assert record["lag_s"] >= 0
        assert record["last_refresh_s_ago"] >= 0 and record["last_error"] == ""
        metrics = scrape(cluster.head.health)
        assert total(metrics, "icefloe_head_follow_refreshes_total", dataset="grow") == 1
        assert total(metrics, "icefloe_head_follow_errors_total", dataset="grow") == 0
        lag = total(metrics, "icefloe_head_follow_lag_seconds", dataset="grow")
        assert lag == pytest.approx(record["lag_s"])
        assert lag >= 0
        assert total(metrics, "icefloe_head_follow_last_refresh_timestamp_seconds",
                     dataset="grow") >= committed_ms / 1000 - 1
        assert total(metrics, "icefloe_head_follow_last_check_timestamp_seconds",
                     dataset="grow") > 0

        # Later checks find the cached snapshot current: no second reload.
        wait_checks(c, "grow", 2)
        assert followed(c, "grow")["refreshes"] == 1
        assert c.describe("grow")["generation"] == desc["generation"]
        assert total(scrape(cluster.head.health), "icefloe_head_follow_refreshes_total",
                     dataset="grow") == 1


def test_pinned_loads_and_loose_metadata_files_are_not_followed(cluster, warehouse, tmp_path):
    table = warehouse.create("pinned", rows(300))
    first = table.current_snapshot().snapshot_id
    # A metadata file outside its table's metadata/ directory names one state.
    loose = tmp_path / "loose.metadata.json"
    shutil.copy(urllib.parse.urlparse(table.metadata_location).path, loose)
    with cluster.client() as c:
        c.load("by_id", table.location(), snapshot_id=first)
        c.load("by_file", str(loose))
        c.load("marker", table.location())  # followed: its checks show time passing
        # A metadata file in the table's metadata/ directory follows the table.
        first_file = table.metadata_location
        c.load("by_table_file", first_file)
        wait_for("the metadata file judged",
                 lambda: followed(c, "by_file").get("followed") is False)
        table.append(rows(100, start=300))
        new = warehouse.table("pinned").current_snapshot().snapshot_id
        wait_for("the followed copy refreshed",
                 lambda: c.describe("marker")["snapshot_id"] == new)
        wait_for("the table's metadata file followed",
                 lambda: c.describe("by_table_file")["snapshot_id"] == new)
        # Its source moved to the table's newest metadata file.
        assert c.describe("by_table_file")["source"] == table.metadata_location != first_file
        wait_checks(c, "marker", 2)
        for name in ("by_id", "by_file"):
            assert c.describe(name)["snapshot_id"] == first, name
            record = followed(c, name)
            assert record["followed"] is False and record["state"] == "not followed"
            assert record["refreshes"] == 0
        assert "pins snapshot" in followed(c, "by_id")["why_not"]
        assert followed(c, "by_id")["checks"] == 0  # never read
        assert "outside a table's metadata/ directory" in followed(c, "by_file")["why_not"]
        assert followed(c, "by_file")["checks"] == 1  # read once, then left alone
        assert c.read("by_id").num_rows == 300
        metrics = scrape(cluster.head.health)
        names = {dict(labels).get("dataset") for (n, labels) in metrics
                 if n == "icefloe_head_follow_refreshes_total"}
        assert "marker" in names and "by_id" not in names and "by_file" not in names


def test_deleted_metadata_is_an_error_in_status_and_the_copy_keeps_serving(cluster, warehouse):
    table = warehouse.create("gone", rows(400))
    expected = table.scan().to_arrow()
    directory = Path(urllib.parse.urlparse(table.location()).path)
    with cluster.client() as c:
        c.load("gone", table.location())
        wait_checks(c, "gone", 1)
        shutil.rmtree(directory / "metadata")
        wait_for("the error in status", lambda: followed(c, "gone").get("errors", 0) >= 2)
        record = followed(c, "gone")
        assert "metadata" in record["last_error"], record
        assert record["state"] == "following" and record["refreshes"] == 0
        assert total(scrape(cluster.head.health), "icefloe_head_follow_errors_total",
                     dataset="gone") >= 2
        # One check per period, not a retry loop: errors grow with time, slowly.
        errors, started = record["errors"], time.monotonic()
        wait_for("one more check", lambda: followed(c, "gone")["errors"] > errors)
        assert followed(c, "gone")["errors"] <= errors + 1 + (time.monotonic() - started) / \
            PERIOD_S
        assert c.describe("gone")["state"] == "ready"
        assert_same_rows(c.read("gone"), expected)
        text = icefloe_status_text(c)
        assert "FOLLOWING" in text and "gone" in text and "errors, last" in text


def test_a_refresh_failing_every_period_is_logged_once(cluster, warehouse):
    """Issue 42, defect 7: a new snapshot whose data file is gone fails its
    refresh every period; the head says so once, not once a period."""
    table = warehouse.create("lost", rows(400))
    data = Path(urllib.parse.urlparse(table.location()).path) / "data"
    before = set(data.rglob("*.parquet"))
    with cluster.client() as c:
        c.load("lost", table.location())
        table.append(rows(100, start=400))
        added = set(data.rglob("*.parquet")) - before
        assert len(added) == 1
        added.pop().unlink()
        wait_for("three failed refreshes", lambda: followed(c, "lost").get("errors", 0) >= 3)
        record = followed(c, "lost")
        assert "parquet" in record["last_error"].lower(), record
        log = (cluster.log_dir / "head.log").read_text()
        failed = [line for line in log.splitlines()
                  if 'msg="load failed"' in line and "dataset=lost" in line]
        # Once per distinct error (the node that failed is part of it).
        errors = [line.split(" error=", 1)[1] for line in failed]
        assert failed and len(errors) == len(set(errors)), "\n".join(failed)
        assert c.describe("lost")["state"] == "ready"  # the cached copy keeps serving


def test_a_branch_is_followed_and_a_tag_is_not(cluster, warehouse):
    table = warehouse.create("branched", rows(200))
    first = table.current_snapshot().snapshot_id
    table.manage_snapshots().create_branch(snapshot_id=first, branch_name="dev") \
        .create_tag(snapshot_id=first, tag_name="v1").commit()
    with cluster.client() as c:
        c.load("dev", table.location(), ref="dev")
        c.load("v1", table.location(), ref="v1")
        c.load("main", table.location())
        wait_for("the tag judged", lambda: followed(c, "v1").get("followed") is False)
        assert "tag 'v1'" in followed(c, "v1")["why_not"]
        warehouse.table("branched").append(rows(50, start=200), branch="dev")
        table = warehouse.table("branched")
        dev = table.metadata.refs["dev"].snapshot_id
        assert table.current_snapshot().snapshot_id == first  # main did not move
        wait_for("the branch's snapshot in describe",
                 lambda: c.describe("dev")["snapshot_id"] == dev)
        assert_same_rows(c.read("dev"), table.scan(snapshot_id=dev).to_arrow())
        wait_checks(c, "main", 2)
        assert c.describe("main")["snapshot_id"] == first
        assert c.describe("v1")["snapshot_id"] == first
        assert followed(c, "main")["refreshes"] == 0 and followed(c, "v1")["refreshes"] == 0
        wait_for("the refresh in status", lambda: followed(c, "dev").get("refreshes") == 1)


def icefloe_status_text(client: icefloe.Client) -> str:
    from icefloe._status_text import render

    return render(client.status())


def test_a_kubeflow_head_follows_with_icefloe_follow_s(tmp_path, monkeypatch):
    # As the cache image runs it: `head` with METADATA_LOC the table's current
    # metadata file (Kubeflow's contract); the table moves on past it.
    from test_kubeflow import KubeflowStyleDataset, kubeflow_cluster

    wh = Warehouse(tmp_path / "wh")
    table = wh.create("t", rows(600))
    monkeypatch.setenv("ICEFLOE_FOLLOW_S", "1")
    with kubeflow_cluster(tmp_path, table) as (head, _), icefloe.Client(head.location) as c:
        name = c.status()["default_dataset"]
        assert c.status()["follow"]["period_s"] == 1
        table.append(rows(300, start=600))
        new = wh.table("t").current_snapshot().snapshot_id
        wait_for("the new snapshot in describe", lambda: c.describe(name)["snapshot_id"] == new)
        # Kubeflow's shards read the followed copy.
        for world_size in (1, 2):
            seen: list[int] = []
            for rank in range(world_size):
                ds = KubeflowStyleDataset(head.location, world_size, rank, 1, 0)
                seen += np.concatenate([chunk["id"] for chunk in ds]).tolist()
            assert sorted(seen) == list(range(900)), world_size


def test_icefloe_up_follow_and_status(tmp_path):
    # `icefloe up --follow 1` reaches the head; `icefloe status` shows the table.
    table = Warehouse(tmp_path / "wh").create("t", rows(100))
    with icefloe_up("--nodes", "1", "--follow", "1") as env:
        assert run("load", "t", table.location(), env=env).returncode == 0
        with icefloe.Client(env["ICEFLOE_HEAD"]) as c:
            wait_checks(c, "t", 1)
        text = run("status", env=env).stdout
        assert "FOLLOWING (every 1s)" in text, text
        assert re.search(r"^  t\s+following\s+\d+\s+\d+\s+\d", text, re.M), text


def test_follow_period_from_the_environment(tmp_path):
    # Kubeflow mode sets ICEFLOE_FOLLOW_S on the head; any head reads it.
    with icefloe.LocalCluster(num_nodes=1, env={"ICEFLOE_FOLLOW_S": "7"},
                              log_dir=tmp_path) as cluster, cluster.client() as c:
        assert c.status()["follow"]["period_s"] == 7
    with icefloe.LocalCluster(num_nodes=1, log_dir=tmp_path / "off") as cluster, \
            cluster.client() as c:
        assert c.status()["follow"] == {"period_s": 0, "datasets": []}
