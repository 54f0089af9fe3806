"""Bounded-memory loading (issue 42): the same rows in a few large data files
(one large row group each) and in many small ones, loaded side by side onto
nodes whose memory is a fraction of one row group, with a disk tier.

The issue's scenario: 4M rows x 9 columns (about 150 MB of Arrow) in 8 files
of one row group each, on 3 nodes of 24 MiB and a 1 GiB tier, replication 2;
beside it the same rows in 32 files. Reported per layout: load seconds, the
nodes' peak resident memory during the load above their resident memory
before it (VmHWM - VmRSS, read from /proc; the kernel's high-water mark,
reset before the load through /proc/<pid>/clear_refs; after a small load has
brought in the libraries' code and the allocators' arenas), against the memory
budget, and the peak of the bytes the budget counted (the nodes' own
icefloe_node_memory_used_bytes on /metrics, sampled every 20 ms). Before
this work the 8-file layout failed with OutOfMemory.

Attribution: the same 20 ms sampler reads each node's RssAnon (heap: the
budgeted pool and everything outside it) and RssFile (mapped file pages: the
node's tier files and its code), so the peak above start is split into the
two; and the nodes' RSS before the load (after the warm-up, nothing held) is
reported as the binary's own baseline, with its anonymous part.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from . import common
from .common import Env


def scrape(health_url: str) -> dict:
    import test_metrics  # tests/ helper, on the path from _table

    return test_metrics.scrape(health_url)

NAME = "bounded_load"
NODES = 3
MEMORY = 24 << 20
LAYOUTS = {"8 files, 1 row group each": 8, "32 files": 32}


def _vm(pid: int, key: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024
    return 0


def _vms(pid: int) -> dict[str, int]:
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, rest = line.partition(":")
        if key in ("VmRSS", "RssAnon", "RssFile", "RssShmem"):
            out[key] = int(rest.split()[0]) * 1024
    return out


def _reset_peak(pid: int) -> None:
    try:
        Path(f"/proc/{pid}/clear_refs").write_text("5")  # resets VmHWM to VmRSS
    except OSError:
        pass


def _table(env: Env, rows: int, files: int):
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from iceberg_util import Warehouse  # tests/ helper

    ids = np.arange(rows, dtype=np.int64)
    columns = {"id": ids, "s": pc.cast(pa.array(ids % 100_003), pa.string())}
    for k in range(7):
        columns[f"x{k}"] = (ids * (k + 1) % 9973).astype(np.float64)
    data = pa.table(columns)
    per_file = -(-rows // files)
    wh = Warehouse(env.log_dir(f"{NAME}-{files}") / "wh")
    table = wh.catalog.create_table(
        "db.t", schema=data.schema,
        properties={"write.parquet.row-group-limit": str(per_file),
                    "write.target-file-size-bytes": str(1 << 40)})
    for start in range(0, rows, per_file):  # one append (one file) per slice
        table.append(data.slice(start, per_file))
    return table, data.nbytes


def run(env: Env) -> dict[str, Any]:
    import icefloe

    cfg, log = env.cfg, env.log
    rows = 1_000_000 if cfg.quick else 4_000_000
    got: dict[str, dict[str, float]] = {}
    arrow_bytes = 0
    warm, _ = _table(env, 20_000, 1)
    for label, files in LAYOUTS.items():
        table, arrow_bytes = _table(env, rows, files)
        with icefloe.LocalCluster(num_nodes=NODES, memory_limit=str(MEMORY), disk_limit="1GiB",
                                  share_memory=False, log_dir=env.log_dir(NAME)) as cluster, \
                cluster.client() as client:
            pids = [n.popen.pid for n in cluster.nodes]
            # A small load first: the libraries' code and the allocators'
            # arenas a first load brings in are not this load's memory.
            client.load("warm", warm.metadata_location, batch_rows=8192, replication=NODES)
            client.evict("warm")
            before = {p: _vm(p, "VmRSS") for p in pids}
            start = {p: _vms(p) for p in pids}
            # The binary's own baseline: code and libraries faulted in, no data.
            idle = max(start[p]["VmRSS"] for p in pids)
            idle_anon = max(start[p]["RssAnon"] for p in pids)
            kind_peak = {"RssAnon": 0, "RssFile": 0}
            for p in pids:
                _reset_peak(p)
            used_peak = [0]
            done = threading.Event()

            def sample(cluster=cluster, done=done, used_peak=used_peak, start=start,
                       kind_peak=kind_peak) -> None:
                from test_metrics import total  # tests/ helper, on the path from _table

                while not done.is_set():
                    for n in cluster.nodes:
                        used = total(scrape(n.health), "icefloe_node_memory_used_bytes")
                        used_peak[0] = max(used_peak[0], int(used))
                        now = _vms(n.popen.pid)
                        for key in kind_peak:
                            kind_peak[key] = max(kind_peak[key],
                                                 now[key] - start[n.popen.pid][key])
                    time.sleep(0.02)

            sampler = threading.Thread(target=sample, daemon=True)
            sampler.start()
            t0 = time.perf_counter()
            desc = client.load("t", table.metadata_location, batch_rows=8192, replication=2)
            seconds = time.perf_counter() - t0
            done.set()
            sampler.join()
            assert desc["rows"] == rows
            peak = max(_vm(p, "VmHWM") - before[p] for p in pids)
            got[label] = {"seconds": seconds, "rss_peak_above_start": peak,
                          "budget_peak": used_peak[0], "idle_rss": idle,
                          "idle_anon": idle_anon,
                          "anon_peak_above_start": kind_peak["RssAnon"],
                          "file_peak_above_start": kind_peak["RssFile"]}
            log(f"{NAME}: {label}: {seconds:.2f} s, idle RSS {idle / 2**20:.1f} MiB "
                f"(anon {idle_anon / 2**20:.1f}), "
                f"peak RSS +{peak / 2**20:.1f} MiB (sampled: anon "
                f"+{kind_peak['RssAnon'] / 2**20:.1f}, file +{kind_peak['RssFile'] / 2**20:.1f}), "
                f"budget peak {used_peak[0] / 2**20:.1f} MiB of {MEMORY / 2**20:.0f} MiB")
    big, small = got[list(LAYOUTS)[0]], got[list(LAYOUTS)[1]]
    text = common.print_table(
        f"{NAME}: {rows:,} rows ({arrow_bytes / 1e6:.0f} MB Arrow) on {NODES} nodes of "
        f"{MEMORY >> 20} MiB memory, 1 GiB tier, replication 2, batch 8192",
        ["layout", "load s", "idle RSS (MiB)", "of it anon", "peak RSS above start (MiB)",
         "of it anon (MiB)", "of it file (MiB)", "budget peak (MiB)"],
        [[k, v["seconds"], v["idle_rss"] / 2**20, v["idle_anon"] / 2**20,
          v["rss_peak_above_start"] / 2**20,
          v["anon_peak_above_start"] / 2**20, v["file_peak_above_start"] / 2**20,
          v["budget_peak"] / 2**20]
         for k, v in got.items()])
    targets = [
        common.target("large row groups: budget peak / budget", "<=", 1.0,
                      big["budget_peak"] / MEMORY),
        common.target("large row groups: peak RSS above start / budget", "report", 0,
                      big["rss_peak_above_start"] / MEMORY),
        common.target("large row groups: peak anonymous RSS above start / budget", "report", 0,
                      big["anon_peak_above_start"] / MEMORY),
        common.target("load time, 8 large files / 32 files", "report", 0,
                      big["seconds"] / small["seconds"]),
    ]
    result = {"name": NAME, "rows": rows, "arrow_bytes": arrow_bytes, "memory_per_node": MEMORY,
              "runs": got, "targets": targets, "table": text}
    common.write_result(cfg, NAME, result)
    return result
