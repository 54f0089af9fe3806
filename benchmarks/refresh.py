"""Incremental refresh (issue 30): a table in the loopback S3 server (moto)
grows by appended files; loading its new snapshot under the same name reads
only the new files and shares the cached rows of the others.

Two shapes, each on a cluster of two data nodes that read the table from S3:
8 files + 1 appended, and 100 files + 10 appended (the same total rows). For
each: the first load of the table, the refresh after the append, and a full
load of the new snapshot under a fresh name (what a refresh cost before),
side by side; and the nodes' peak memory during the refresh (their budgets'
used bytes, sampled every 20 ms from the head's status) against the memory
of the old copy. Both on nodes that keep copies over the wire (no shared
memory), as every multi-host deployment does, and on shared-memory nodes
(LocalCluster's default), whose refreshed copy names the old copy's segments
for the tasks it reuses and lays out only the rows it read (docs/protocol.md,
"Shared memory"): their refresh / first load is held to 1.2x the TCP nodes'
ratio, and their peak memory to the same 1.2x of the old copy. The two kinds
of nodes are measured in interleaved rounds (--repeats, 3; 2 with --quick):
each ratio is the median of the rounds', each round's listed beside it, and
the memory figure the highest round's.
"""

from __future__ import annotations

import os
import shutil
import statistics
import threading
from typing import Any

from . import common
from .common import Env

NAME = "refresh"
SHAPES = ((8, 1), (100, 10))  # (files in the table, files appended)


def _warehouse(env_s3: dict[str, str], endpoint: str, work: Any, tag: str) -> Any:
    from pyiceberg.catalog.sql import SqlCatalog

    work.mkdir(parents=True, exist_ok=True)
    catalog = SqlCatalog(
        f"refresh-{tag}", uri=f"sqlite:///{work / f'catalog-{tag}.db'}",
        warehouse=f"s3://warehouse/refresh-{tag}", **{
            "s3.endpoint": endpoint, "s3.access-key-id": env_s3["AWS_ACCESS_KEY_ID"],
            "s3.secret-access-key": env_s3["AWS_SECRET_ACCESS_KEY"],
            "s3.region": env_s3["AWS_REGION"]})
    catalog.create_namespace_if_not_exists("db")
    return catalog


def _memory_used(client: Any) -> int:
    return sum(int(n.get("memory_used_bytes", 0)) for n in client.status()["nodes"])


class PeakSampler:
    """The nodes' summed used bytes, sampled every 20 ms on a thread."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.peak = max(self.peak, _memory_used(self.client))
            except Exception:  # noqa: BLE001 - a sample lost is a sample lost
                pass
            self._stop.wait(0.02)

    def __enter__(self) -> PeakSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


def _nodes_cpu_s(cluster: Any) -> float:
    """The data nodes' CPU seconds so far (user + system, /proc/<pid>/stat):
    what a load costs the nodes, far less moved by the machine's other load
    than wall time."""
    ticks = 0
    for node in cluster.nodes:
        with open(f"/proc/{node.popen.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        ticks += int(fields[11]) + int(fields[12])  # utime, stime (fields 14, 15)
    return ticks / os.sysconf("SC_CLK_TCK")


def _measure(env: Env, s3: Any, share_memory: bool, rows_total: int, out_rows: list[Any],
             shapes: dict[str, Any], round_: int) -> None:
    import icefloe

    cfg, log = env.cfg, env.log
    nodes = "shared-memory nodes" if share_memory else "nodes over TCP"
    with icefloe.LocalCluster(
            num_nodes=2, memory_limit=None, env=s3.env, share_memory=share_memory,
            log_dir=env.log_dir(f"refresh-{int(share_memory)}-{round_}")) as cluster, \
            cluster.client() as client:
        for files, appended in SHAPES:
            tag = f"{files}-{int(share_memory)}-{round_}"
            catalog = _warehouse(s3.env, s3.endpoint, cfg.work / "refresh", tag)
            per_file = max(1, rows_total // files)
            table = None
            for k in range(files):
                chunk = common.make_rows(k * per_file, per_file, seed=k)
                if table is None:
                    table = catalog.create_table("db.t", schema=chunk.schema)
                table.append(chunk)
            assert table is not None
            log(f"refresh: {files} files of {per_file:,} rows in S3 ({nodes}, round {round_})")
            cpu = _nodes_cpu_s(cluster)
            with common.Timer() as first:
                old = client.load("t", table.metadata_location)
            first_cpu = _nodes_cpu_s(cluster) - cpu
            old_bytes = _memory_used(client)
            for k in range(files, files + appended):
                table.append(common.make_rows(k * per_file, per_file, seed=k))
            cpu = _nodes_cpu_s(cluster)
            with PeakSampler(client) as peak, common.Timer() as refresh:
                desc = client.load("t", table.metadata_location)
            refresh_cpu = _nodes_cpu_s(cluster) - cpu
            after = _memory_used(client)
            assert desc["refresh"]["files_added"] == appended, desc["refresh"]
            assert desc["rows"] == (files + appended) * per_file
            client.evict("t")  # else the full load would share the refreshed copy
            with common.Timer() as full:
                whole = client.load("t-full", table.metadata_location)
            assert whole["rows"] == desc["rows"] and "refresh" not in whole
            client.evict("t-full")
            added = after - old_bytes
            shape = {"files": files, "appended": appended, "rows": desc["rows"],
                     "first_load_s": first.seconds, "refresh_s": refresh.seconds,
                     "full_reload_s": full.seconds,
                     "refresh_over_first": refresh.seconds / first.seconds,
                     "refresh_over_full": refresh.seconds / full.seconds,
                     "first_load_node_cpu_s": first_cpu, "refresh_node_cpu_s": refresh_cpu,
                     "refresh_over_first_cpu": refresh_cpu / max(first_cpu, 1e-9),
                     "old_bytes": old_bytes, "peak_bytes": peak.peak, "after_bytes": after,
                     # The target: peak <= 1.2 x old copy + the added bytes.
                     "peak_less_added_over_old": (peak.peak - added) / max(1, old_bytes),
                     "refresh": desc["refresh"], "old_rows": old["rows"],
                     "refresh_load_seconds": desc["load_seconds"],
                     "refresh_planning_ms": desc["scan"]["planning_ms"]}
            shapes.setdefault(f"{files}+{appended} {nodes}", []).append(shape)
            out_rows.append([f"{files}+{appended} files, {nodes}, round {round_}", desc["rows"],
                             first.seconds, refresh.seconds, full.seconds,
                             shape["refresh_over_first"], first_cpu, refresh_cpu,
                             shape["refresh_over_first_cpu"], old_bytes / 2**20,
                             peak.peak / 2**20, added / 2**20,
                             shape["peak_less_added_over_old"]])


SOAK_EPOCHS = 8       # at least; more while the refreshes are still landing
SOAK_MAX_EPOCHS = 60
SOAK_REFRESHES = 4


def _epochs_while_refreshing(env: Env, s3: Any) -> dict[str, Any]:
    """Two ranks read SOAK_EPOCHS epochs (window shuffle) while another thread
    appends a file and refreshes SOAK_REFRESHES times: every epoch must read
    exactly the rows of one generation, each once."""
    import numpy as np

    import icefloe

    cfg, log = env.cfg, env.log
    per_file = 50_000
    catalog = _warehouse(s3.env, s3.endpoint, cfg.work / "refresh", "soak")
    table = catalog.create_table("db.t", schema=common.make_rows(0, 1, 0).schema)
    for k in range(4):
        table.append(common.make_rows(k * per_file, per_file, seed=k))
    failed, inexact, generations = 0, 0, set()
    with icefloe.LocalCluster(num_nodes=2, memory_limit=None, env=s3.env,
                              log_dir=env.log_dir("refresh-soak")) as cluster, \
            cluster.client() as client, cluster.client() as refresher:
        client.load("t", table.metadata_location)
        done = threading.Event()
        refreshed: list[int] = []

        def refresh_loop() -> None:
            for k in range(4, 4 + SOAK_REFRESHES):
                if done.wait(0.7):
                    return
                table.append(common.make_rows(k * per_file, per_file, seed=k))
                refreshed.append(refresher.refresh("t")["generation"])

        thread = threading.Thread(target=refresh_loop, daemon=True)
        thread.start()
        epochs = 0
        while epochs < SOAK_EPOCHS or (thread.is_alive() and epochs < SOAK_MAX_EPOCHS):
            epoch, epochs = epochs, epochs + 1
            try:
                seen, shapes = [], []
                for rank in range(2):
                    seen += [b["id"].to_numpy() for b in client.iter_epoch(
                        "t", batch_size=1000, seed=7, epoch=epoch, world_size=2, rank=rank,
                        on_shape=shapes.append)]
                ids = np.concatenate(seen)
                generations.add(shapes[0]["generation"])
                rows = int(shapes[0]["num_rows"])  # ids are 0..rows-1 in every generation
                # Both ranks on one copy; each row at most once; only the
                # tail that does not fill a step (drop_last) left out.
                exact = (shapes[0]["generation"] == shapes[1]["generation"]
                         and len(np.unique(ids)) == len(ids) == rows // 2000 * 2000
                         and int(ids.max()) < rows)
                inexact += 0 if exact else 1
            except icefloe.Error as exc:
                log(f"refresh soak: epoch {epoch} failed: {exc}")
                failed += 1
        done.set()
        thread.join(timeout=60)
    log(f"refresh soak: {epochs} epochs, {len(refreshed)} refreshes, generations read "
        f"{len(generations)}, failed {failed}, inexact {inexact}")
    return {"epochs": epochs, "refreshes": len(refreshed), "generations_read":
            len(generations), "failed": failed, "inexact": inexact}


def run(env: Env) -> dict[str, Any]:
    cfg = env.cfg
    # The table in S3 (moto holds it in memory): large enough that the first
    # load takes many seconds in a full run.
    rows_total = cfg.rows // (4 if cfg.quick else 2)
    shutil.rmtree(cfg.work / "refresh", ignore_errors=True)  # catalogs of a past run's S3
    s3 = common.start_moto()
    out_rows: list[Any] = []
    shapes: dict[str, list[dict[str, Any]]] = {}  # per shape and nodes: each round's figures
    try:
        # Rounds interleave the two kinds of nodes, so that the load of a
        # shared machine weighs on both alike; each figure is the median of
        # the rounds' (each round's ratio is listed beside it).
        for round_ in range(cfg.repeats):
            for share_memory in (False, True):
                _measure(env, s3, share_memory, rows_total, out_rows, shapes, round_)
        soak = _epochs_while_refreshing(env, s3)
    finally:
        s3.stop()
    text = common.print_table(
        f"refresh after appending files, table in loopback S3 ({rows_total:,} rows before)",
        ["shape", "rows", "first load s", "refresh s", "full reload s", "refresh / first",
         "nodes' CPU-s, first load", "refresh", "refresh / first (CPU)", "old MiB",
         "peak MiB", "added MiB", "(peak - added) / old"], out_rows)
    def rounds(values: list[float]) -> str:
        return "rounds " + ", ".join(f"{v:.3g}" for v in values)

    targets = []
    for key, runs in shapes.items():
        if "TCP" not in key:
            tcp_runs = shapes[key.replace("shared-memory nodes", "nodes over TCP")]
            ratios = [s["refresh_over_first"] / max(t["refresh_over_first"], 1e-9)
                      for s, t in zip(runs, tcp_runs, strict=True)]
            targets.append(common.target(
                f"(refresh / first load) over TCP nodes' ratio, {key}", "<=", 1.2,
                statistics.median(ratios), note=rounds(ratios)))
            cpu = [s["refresh_over_first_cpu"] / max(t["refresh_over_first_cpu"], 1e-9)
                   for s, t in zip(runs, tcp_runs, strict=True)]
            targets.append(common.target(
                f"(refresh / first load) over TCP nodes' ratio in the nodes' CPU seconds, {key}",
                "report", 0.0, statistics.median(cpu), note=rounds(cpu)))
        else:
            ratios = [s["refresh_over_first"] for s in runs]
            targets.append(common.target(f"refresh / first load, {key}", "<=", 0.2,
                                         statistics.median(ratios), note=rounds(ratios)))
        peaks = [s["peak_less_added_over_old"] for s in runs]
        targets.append(common.target(f"(peak node memory during refresh - added) / old copy, "
                                     f"{key}", "<=", 1.2, max(peaks),
                                     note=f"the highest; {rounds(peaks)}"))
    targets.append(common.target("epochs failed or inexact while refreshes land", "<=", 0,
                                 soak["failed"] + soak["inexact"],
                                 note=f"{soak['epochs']} epochs, {soak['refreshes']} refreshes, "
                                      f"{soak['generations_read']} generations read"))
    result = {"name": NAME, "rows": rows_total, "rounds": cfg.repeats, "shapes": shapes,
              "soak": soak,
              "targets": targets, "table": text}
    common.write_result(cfg, NAME, result)
    return result
