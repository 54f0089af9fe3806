"""The icefloe CLI: up, load, datasets, status, describe, evict."""

from __future__ import annotations

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


def test_up_load_status_evict(tmp_path):
    table = Warehouse(tmp_path / "wh").create("t", pa.table({"id": list(range(1000))}))
    up = subprocess.Popen([*CLI, "up", "--nodes", "2", "--memory-limit", "256MiB"],
                          stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        head = None
        for line in up.stdout:
            m = re.match(r"icefloe cluster up: head (\S+)", line)
            if m:
                head = m.group(1)
                break
        assert head, "icefloe up did not report its head"
        env = {**os.environ, "ICEFLOE_HEAD": head}
        out = run("load", "t", table.metadata_location, "--filter", "id < 100", env=env)
        assert out.returncode == 0, out.stderr
        assert "loaded t: 100 rows" in out.stdout
        assert [d["name"] for d in json.loads(run("datasets", env=env).stdout)] == ["t"]
        status = json.loads(run("status", "--json", env=env).stdout)
        assert sum(n["state"] == "alive" for n in status["nodes"]) == 2
        # The tables (what the status page shows), redrawn by --watch.
        text = run("status", "--watch", "0.1", "--count", "2", env=env).stdout
        assert text.count("DATASETS") == 2 and text.count("NODES") == 2, text
        assert re.search(r"^  t\s+ready\s+100\s", text, re.M), text
        assert text.count(" alive ") == 4, text
        assert json.loads(run("describe", "t", env=env).stdout)["rows"] == 100
        assert run("evict", "t", env=env).returncode == 0
        missing = run("describe", "t", env=env)
        assert missing.returncode == 1
        assert "NotFound" in missing.stderr and "'t'" in missing.stderr
    finally:
        up.send_signal(signal.SIGTERM)
        assert up.wait(timeout=30) == 0
