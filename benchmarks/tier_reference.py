"""Same-host reads by reference against over loopback TCP, side by side
(issue 42, item 2's last gaps): a `window` epoch over a copy with rows on the
disk tier, and `Client.read` (range reads) from memory and from the tier.

One cluster of two nodes sharing their memory (`--share-memory`, as
LocalCluster starts them) with a disk tier, the table 4x the nodes' memory (so
most rows are tier units, each a segment of its own), read by two clients in
this process: one that maps the nodes' files (the default on the same host)
and one that does not (`share_memory=False`, every row over TCP). A second
cluster holds the same table all in memory (its rows in memfd segments) for
the range reads from memory. Every figure is rows/s, the mapped and TCP
variants measured round-robin (`common.interleaved`) on a warm tier (its pages
in the page cache after the load: what is compared is how the rows reach the
reader, not the disk). Each figure also has the CPU it took: the reader's
(this process) and the nodes' (their /proc stat), whose sum mapped / over
TCP says what a reader by reference saves whatever the machine's load."""

from __future__ import annotations

import os
import resource
import time
from typing import Any

from . import common
from .common import Env
from .disk_tier import _table

NAME = "tier_reference"
NODES = 2
BATCH = 4096


def _window(client: Any, seed: int, rank: int = 0, world: int = 1) -> int:
    rows = 0
    for batch in client.iter_epoch("t", batch_size=BATCH, shuffle="window", seed=seed,
                                   rank=rank, world_size=world):
        rows += batch.num_rows
    return rows


def _cpu_s(pids: list[int]) -> tuple[float, float]:
    """CPU seconds so far of this process and of the processes `pids`."""
    me = resource.getrusage(resource.RUSAGE_SELF)
    tick = os.sysconf("SC_CLK_TCK")
    nodes = 0.0
    for pid in pids:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        nodes += (int(fields[11]) + int(fields[12])) / tick  # utime, stime
    return me.ru_utime + me.ru_stime, nodes


def _timed(call: Any, pids: list[int]) -> dict[str, float]:
    cpu0, t0 = _cpu_s(pids), time.perf_counter()
    rows = call()
    seconds = time.perf_counter() - t0
    cpu1 = _cpu_s(pids)
    reader, nodes = cpu1[0] - cpu0[0], cpu1[1] - cpu0[1]
    return {"rows_per_s": rows / seconds, "seconds": seconds, "rows": float(rows),
            "reader_cpu_s": reader, "nodes_cpu_s": nodes,
            "rows_per_cpu_s": rows / max(reader + nodes, 1e-9)}


def run(env: Env) -> dict[str, Any]:
    import sys
    from pathlib import Path

    import icefloe

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    cfg, log = env.cfg, env.log
    arrow_bytes = (128 if cfg.quick else 512) << 20
    memory = arrow_bytes // 4 // NODES
    table, rows = _table(env, arrow_bytes)
    got: dict[str, list[dict[str, float]]] = {}
    placed: dict[str, str] = {}
    for cluster_name, kwargs in (
            ("tier", {"memory_limit": str(memory), "disk_limit": str(2 * arrow_bytes)}),
            ("memory", {"memory_limit": str(4 * arrow_bytes)})):
        with icefloe.LocalCluster(num_nodes=NODES, log_dir=env.log_dir(NAME),
                                  **kwargs) as cluster, \
                cluster.client() as mapped, cluster.client(share_memory=False) as tcp:
            mapped.load("t", table.metadata_location, batch_rows=BATCH)
            status = mapped.status()["nodes"]
            placed[cluster_name] = (
                f"{sum(n['memory_used_bytes'] for n in status) / 1e6:.0f} MB in memory, "
                f"{sum(n['disk_used_bytes'] for n in status) / 1e6:.0f} MB on the tier")
            log(f"{NAME}: {cluster_name}: {placed[cluster_name]}")
            clients = {"mapped": mapped, "TCP": tcp}
            variants = [f"window from {cluster_name}, {how}" for how in clients] + \
                [f"read from {cluster_name}, {how}" for how in clients]
            if cluster_name == "tier":
                variants += [f"window from tier, 2 ranks, {how}" for how in clients]

            pids = [n.popen.pid for n in cluster.nodes]

            def measure(variant: str, r: int, clients=clients, pids=pids) -> dict[str, float]:
                client = clients[variant.rsplit(", ", 1)[1]]
                if variant.startswith("window") and "2 ranks" in variant:
                    return _timed(lambda: _window(client, r, 0, 2) + _window(client, r, 1, 2),
                                  pids)
                if variant.startswith("window"):
                    return _timed(lambda: _window(client, r), pids)
                return _timed(lambda: client.read("t").num_rows, pids)

            for variant in variants:  # a warm-up of each (maps, connections, page cache)
                measure(variant, 0)
            got.update(common.interleaved(variants, cfg.repeats, measure, log))
    med = {k: common.median(x["rows_per_s"] for x in v) for k, v in got.items()}
    cpu = {k: (common.median(x["reader_cpu_s"] for x in v),
               common.median(x["nodes_cpu_s"] for x in v)) for k, v in got.items()}
    text = common.print_table(
        f"{NAME}: {rows:,} rows ({arrow_bytes / 1e6:.0f} MB Arrow) on {NODES} nodes; tier "
        f"cluster: {placed.get('tier')}; memory cluster: {placed.get('memory')}; batch {BATCH}",
        ["variant", "rows/s (median)", "reader CPU-s", "nodes CPU-s", "runs"],
        [[k, med[k], f"{cpu[k][0]:.3f}", f"{cpu[k][1]:.3f}", len(v)] for k, v in got.items()])
    targets = []
    for figure in ("window from tier", "window from tier, 2 ranks", "window from memory",
                   "read from tier", "read from memory"):
        a, b = f"{figure}, mapped", f"{figure}, TCP"
        if a in got and b in got:
            targets.append(common.target(f"{figure}: mapped / over TCP (rows/s)", "report", 0,
                                         common.paired_ratio(got, a, b, key="rows_per_s"),
                                         f"{med[a]:,.0f} against {med[b]:,.0f} rows/s"))
            targets.append(common.target(
                f"{figure}: mapped / over TCP (rows per CPU-s, reader + nodes)", "report", 0,
                common.paired_ratio(got, a, b, key="rows_per_cpu_s"),
                f"{sum(cpu[a]):.3f} against {sum(cpu[b]):.3f} CPU-s"))
    result = {"name": NAME, "rows": rows, "arrow_bytes": arrow_bytes, "memory_per_node": memory,
              "placed": placed, "runs": got, "median_rows_per_s": med, "targets": targets,
              "table": text}
    common.write_result(cfg, NAME, result)
    return result
