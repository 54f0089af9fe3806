"""A data node restarted at its old address (a Kubernetes pod under its stable
name) is reachable by the head as soon as it has registered again (issue 42,
defect 3). Before, the head kept its old connection to the address, whose
gRPC reconnect backoff had grown while the node was down: for seconds after
the node was back, loads failed ``node ... is unreachable ... Connection
refused`` and status flipped the node to dead."""

from __future__ import annotations

import time

import numpy as np
import pyarrow as pa
from iceberg_util import Warehouse

import icefloe

FILES = 4
ROWS = 10_000  # per file
# Dead after one second of silence (the default is five): bounded tests.
HEAD_ARGS = ["--heartbeat-timeout-ms", "1000"]
# How long the node stays down while the head polls it (once a second):
# long enough for a kept connection's backoff to grow past a second or two.
DOWN_S = 6.0


def part(k: int) -> pa.Table:
    ids = np.arange(k * ROWS, (k + 1) * ROWS, dtype=np.int64)
    return pa.table({"id": ids, "x": ids * 0.5})


def node_state(client, location: str) -> dict:
    return next(n for n in client.status()["nodes"] if n["location"] == location)


def test_a_node_restarted_at_its_address_takes_a_load_at_once(tmp_path):
    t = Warehouse(tmp_path / "wh").create("t", part(0))
    for k in range(1, FILES):
        t.append(part(k))
    oracle = pa.concat_tables([part(k) for k in range(FILES)])
    with icefloe.LocalCluster(num_nodes=2, head_args=HEAD_ARGS,
                              log_dir=tmp_path / "logs") as cluster, cluster.client() as client:
        victim = 1
        location = cluster.node_uris[victim]
        cluster.kill_node(victim)
        # The head polls the dead node, and fails, for DOWN_S (bounded wait).
        deadline = time.monotonic() + DOWN_S + 60.0
        while True:
            n = node_state(client, location)
            if n["state"] == "dead" and (n.get("last_heartbeat_s") or 0) >= DOWN_S:
                break
            assert time.monotonic() < deadline, f"node not seen dead: {n}"
            time.sleep(0.1)

        # Back at the same address; returns once the head has its registration.
        cluster.restart_node(victim, same_port=True)
        assert node_state(client, location)["state"] == "alive"
        # At once, a load that places work on it succeeds.
        loaded = client.load("t", t.metadata_location, batch_rows=4096)
        assert location in {node for s in loaded["slices"] for node in s["nodes"]}, loaded
        assert client.read("t").equals(oracle)
        assert node_state(client, location)["state"] == "alive"
