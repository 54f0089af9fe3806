"""The icefloe CLI: up, load, datasets, status, describe, evict."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys

import pyarrow as pa
from iceberg_util import Warehouse

CLI = [sys.executable, "-m", "icefloe.cli"]


def run(*args: str, env=None) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=120, env=env)


@contextlib.contextmanager
def icefloe_up(*args: str):
    """`icefloe up ARGS` in the foreground; yields the environment that points
    the CLI at its head, and stops it (SIGTERM, exit status 0) afterwards."""
    up = subprocess.Popen([*CLI, "up", *args], stdout=subprocess.PIPE, text=True,
                          start_new_session=True)
    try:
        head = None
        for line in up.stdout:
            m = re.match(r"icefloe cluster up: head (\S+)", line)
            if m:
                head = m.group(1)
                break
        assert head, "icefloe up did not report its head"
        yield {**os.environ, "ICEFLOE_HEAD": head}
    finally:
        up.send_signal(signal.SIGTERM)
        assert up.wait(timeout=30) == 0


def test_up_load_status_evict(tmp_path):
    table = Warehouse(tmp_path / "wh").create("t", pa.table({"id": list(range(1000))}))
    with icefloe_up("--nodes", "2", "--memory-limit", "256MiB") as env:
        out = run("load", "t", table.metadata_location, "--filter", "id < 100",
                  "--batch-rows", "40", env=env)
        assert out.returncode == 0, out.stderr
        assert "loaded t: 100 rows" in out.stdout
        # --batch-size, its former name, still works and says it is deprecated.
        old = run("load", "t_old", table.metadata_location, "--batch-size", "40", env=env)
        assert old.returncode == 0 and "--batch-size is deprecated" in old.stderr, old.stderr
        assert json.loads(run("describe", "t_old", env=env).stdout)["batch_rows"] == 40
        assert run("evict", "t_old", env=env).returncode == 0
        assert [d["name"] for d in json.loads(run("datasets", env=env).stdout)] == ["t"]
        status = json.loads(run("status", "--json", env=env).stdout)
        assert sum(n["state"] == "alive" for n in status["nodes"]) == 2
        # The tables (what the status page shows), redrawn by --watch.
        text = run("status", "--watch", "0.1", "--count", "2", env=env).stdout
        assert text.count("DATASETS") == 2 and text.count("NODES") == 2, text
        assert re.search(r"^  t\s+ready\s+100\s", text, re.M), text
        assert text.count(" alive ") == 4, text
        described = json.loads(run("describe", "t", env=env).stdout)
        assert (described["rows"], described["batch_rows"]) == (100, 40)
        assert run("evict", "t", env=env).returncode == 0
        missing = run("describe", "t", env=env)
        assert missing.returncode == 1
        assert "NotFound" in missing.stderr and "'t'" in missing.stderr


def test_load_with_transform_file(tmp_path):
    import icefloe

    data = pa.table({"review_id": pa.array(range(100), pa.int64()),
                     "stars": pa.array([1 + i % 5 for i in range(100)], pa.int32()),
                     "text": pa.array([f"review {i}" for i in range(100)])})
    table = Warehouse(tmp_path / "wh").create("reviews", data)
    spec = {"keep": ["review_id"], "columns": [{"name": "label", "expr": "stars - 1"}]}
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(spec))
    with icefloe.LocalCluster(num_nodes=1, log_dir=tmp_path / "logs") as cluster:
        env = {**os.environ, "ICEFLOE_HEAD": cluster.head_uri}
        out = run("load", "reviews_t", table.metadata_location, "--transform", str(path),
                  env=env)
        assert out.returncode == 0, out.stderr
        assert "loaded reviews_t: 100 rows" in out.stdout
        client = cluster.client()
        assert client.describe("reviews_t")["transform"] == spec
        got = client.read("reviews_t").sort_by("review_id")
        assert got.column_names == ["review_id", "label"]
        assert got.column("label").to_pylist() == [i % 5 for i in range(100)]


def test_load_transform_file_errors_name_the_file(tmp_path):
    # Read before any connection: no cluster needed, and none is reached.
    head = ["--head", "grpc://127.0.0.1:9"]
    missing = tmp_path / "nope.json"
    out = run(*head, "load", "t", "/tmp/t", "--transform", str(missing))
    assert out.returncode != 0
    assert f"cannot read the transform file {missing}" in out.stderr, out.stderr
    assert "Traceback" not in out.stderr

    bad = tmp_path / "bad.json"
    bad.write_text('{"columns": [{"name": "label", "expr": "stars - 1"},]}')
    out = run(*head, "load", "t", "/tmp/t", "--transform", str(bad))
    assert out.returncode != 0
    assert f"the transform file {bad} is not valid JSON" in out.stderr, out.stderr
    assert "line 1" in out.stderr and "Traceback" not in out.stderr

    listed = tmp_path / "list.json"
    listed.write_text('[{"name": "label", "expr": "stars - 1"}]')
    out = run(*head, "load", "t", "/tmp/t", "--transform", str(listed))
    assert out.returncode != 0
    assert f"the transform file {listed} must hold a JSON object" in out.stderr, out.stderr
