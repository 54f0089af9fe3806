"""Kubeflow Trainer's local mode: with RUNTIME_ENV set and no LeaderWorkerSet
variables, `head` starts and uses the two local workers, localhost:50052 and
localhost:50053, as Kubeflow's local scripts start them.
"""

from __future__ import annotations

import os
import re

import pyarrow as pa
from iceberg_util import Warehouse

from icefloe._bin import bin_path
from icefloe._process import ServerProcess


def test_head_uses_the_local_workers(tmp_path):
    table = Warehouse(tmp_path / "wh").create("t", pa.table({"id": [1, 2, 3]}))
    bindir = tmp_path / "bin"
    bindir.mkdir()
    os.symlink(bin_path("icefloe-head"), bindir / "head")
    env = {k: v for k, v in os.environ.items() if not k.startswith("LWS_")}
    env.update({"RUNTIME_ENV": "local", "METADATA_LOC": table.metadata_location,
                "HEALTH_PORT": "0"})
    log = tmp_path / "head.log"
    head = ServerProcess(name="head", argv=[str(bindir / "head"), "127.0.0.1", "0"],
                         log_path=log, env=env).start()
    try:
        text = log.read_text()
    finally:
        head.stop()
    # logfmt: ... msg="kubeflow mode" ... local=true workers=a,b
    modes = [dict(re.findall(r'(\w+)=("[^"]*"|\S+)', line)) for line in text.splitlines()
             if 'msg="kubeflow mode"' in line]
    assert modes, text
    assert modes[0]["local"] == "true"
    assert modes[0]["workers"] == "grpc://localhost:50052,grpc://localhost:50053"
    assert "LWS_LEADER_ADDRESS" not in text
