"""A data node's allocator gives freed pages back to the OS at once (issue 42).

Arrow's jemalloc keeps freed pages resident for a second; during a bounded
load that was more than the node's whole memory budget, which counts none of
it (benchmarks/bounded_load.py measures the RSS). jemalloc reads its options
before main, so the node starts itself again with them: checked here on the
running process's environment, where the allocator reads them.
"""

from __future__ import annotations

from pathlib import Path

import icefloe

CONF = "dirty_decay_ms:0,muzzy_decay_ms:0"


def _environ(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return dict(kv.decode().split("=", 1) for kv in raw if b"=" in kv)


def test_node_runs_with_freed_pages_returned_at_once(tmp_path, monkeypatch):
    monkeypatch.delenv("JE_ARROW_MALLOC_CONF", raising=False)
    with icefloe.LocalCluster(num_nodes=1, memory_limit="64MiB", share_memory=False,
                              log_dir=tmp_path) as cluster, cluster.client() as client:
        node = cluster.nodes[0]
        assert _environ(node.popen.pid).get("JE_ARROW_MALLOC_CONF") == CONF
        assert client.status()["nodes"], "the restarted node registered"


def test_an_explicit_allocator_setting_wins(tmp_path):
    with icefloe.LocalCluster(num_nodes=1, memory_limit="64MiB", share_memory=False,
                              log_dir=tmp_path,
                              env={"JE_ARROW_MALLOC_CONF": "dirty_decay_ms:500"}) as cluster:
        assert _environ(cluster.nodes[0].popen.pid)["JE_ARROW_MALLOC_CONF"] == "dirty_decay_ms:500"
