"""Epoch to tensors: one training process reads a whole epoch into torch tensors.

icefloe's CacheDataset (shuffle none / block / window, the default / sample,
DataLoader with num_workers=0) against what a user would run instead, each
turning batches into tensors with icefloe.torch.batch_to_tensors. Beside
throughput, each shuffle's quality: how close batches of 1024 rows come to
the whole table's histogram of a 10-class label sorted by write order (the
total-variation distance; a uniform sample averages ~0.037). Baselines:

- pyarrow.dataset over the table's Parquet files in S3 (moto on loopback);
- the same over local disk (files in the page cache: the best case of the
  "copy to local SSD" recipe);
- a plain Python pyarrow.flight server holding the table in memory (one stream);
- Kubeflow-style serving: the head's PATH [0, 1] descriptor, 1024-row cached
  batches, one stream per endpoint, read sequentially (icefloe.torch.DataCacheDataset).
"""

from __future__ import annotations

import time
from typing import Any

from . import common
from .common import Env

NAME = "epoch"
CACHE_NODES = 2


def run(env: Env) -> dict[str, Any]:
    import icefloe

    cfg, log, table = env.cfg, env.log, env.table
    s3 = env.s3
    B = cfg.batch_size
    with icefloe.LocalCluster(num_nodes=CACHE_NODES, memory_limit=None,
                              head_args=["--default-dataset", "kf"],
                              node_args=[["--default-dataset", "kf"]] * CACHE_NODES,
                              log_dir=env.log_dir("epoch")) as cluster, cluster.client() as client:
        desc = client.load("epoch", table.metadata_location)
        client.load("kf", table.metadata_location, batch_size=1024)
        head = cluster.head_uri
        pyflight = common.start_pyflight(table.files, B, env.log_dir("epoch") / "pyflight.log")
        try:
            variants: dict[str, tuple[str, dict[str, Any]]] = {
                "icefloe none": ("icefloe", {"shuffle": "none"}),
                "icefloe block": ("icefloe", {"shuffle": "block"}),
                "icefloe window (default)": ("icefloe", {"shuffle": "window"}),
                "icefloe sample": ("icefloe", {"shuffle": "sample"}),
                "Parquet S3 (moto)": ("parquet-s3", {"paths": s3.keys,
                                                     "endpoint": s3.endpoint}),
                "Parquet local disk": ("parquet-local", {"paths": table.files}),
                "pyarrow.flight server": ("pyflight", {"location": pyflight.location}),
                "Kubeflow-style (1024-row, 1 stream)": ("kubeflow", {}),
            }
            base = {"head": head, "dataset": "epoch", "batch_size": B, "columns": common.COLUMNS}

            servers = [n.popen.pid for n in cluster.nodes] + [cluster.head.popen.pid]

            def server_cpu(kind: str) -> float:
                """CPU seconds so far of what serves this variant (moto runs in this
                process; local Parquet has no server)."""
                if kind in ("icefloe", "kubeflow"):
                    return sum(common.cpu_seconds(p) for p in servers)
                if kind == "pyflight":
                    return common.cpu_seconds(pyflight.popen.pid)
                if kind == "parquet-s3":
                    return time.process_time()
                return 0.0

            def measure(v: str, r: int) -> dict[str, Any]:
                kind, args = variants[v]
                cpu0 = server_cpu(kind)
                res = common.run_worker("epoch", {"kind": kind, **base, "epoch": r, **args})
                res["server_cpu_s_per_gb"] = (server_cpu(kind) - cpu0) / (res["bytes"] / 1e9)
                return res

            log(f"epoch: {desc['rows']:,} rows, {desc['bytes'] / 1e9:.2f} GB on "
                f"{CACHE_NODES} nodes; batch {B} rows")
            got = common.interleaved(list(variants), cfg.repeats, measure, log)
            quality = {}
            for v, (kind, args) in variants.items():
                if kind == "icefloe":
                    quality[v] = common.run_worker("shuffle_quality", {
                        "head": head, "dataset": "epoch", "shuffle": args["shuffle"],
                        "rows": desc["rows"]})
                    log(f"  {v}: label distance {quality[v]['mean_distance']:.3f} at batch "
                        f"{quality[v]['batch_size']}")
        finally:
            pyflight.stop()
    limits = common.run_worker("memory_path", {"rows": desc["rows"] // CACHE_NODES,
                                               "batch_size": B})

    med = {k: common.median(r["gbps"] for r in v) for k, v in got.items()}
    rps = {k: common.median(r["rows_per_s"] for r in v) for k, v in got.items()}
    s3_gbps, local_gbps = med["Parquet S3 (moto)"], med["Parquet local disk"]
    cpu_client = {k: common.median(r["cpu_s_per_gb"] for r in v) for k, v in got.items()}
    cpu_server = {k: common.median(r["server_cpu_s_per_gb"] for r in v) for k, v in got.items()}
    def ratio(a: str, b: str) -> float:
        return common.paired_ratio(got, a, b)

    rows_out = []
    for k, v in got.items():
        q = quality[k]["mean_distance"] if k in quality else "-"
        x_seq = ratio(k, "icefloe none") if k in quality else "-"
        rows_out.append([k, rps[k], med[k], min(r["gbps"] for r in v), max(r["gbps"] for r in v),
                         x_seq, q, med[k] / s3_gbps, med[k] / local_gbps, cpu_client[k],
                         cpu_server[k]])
    for name, key in [("limit: copy sequential batches (numpy, 1 core)", "sequential_gbps"),
                      ("limit: gather random rows (numpy, 1 core)", "random_gbps")]:
        g = limits[key]
        rows_out.append([name, g * 1e9 / common.ROW_BYTES, g, g, g, "-", "-", g / s3_gbps,
                         g / local_gbps, 1 / g, "-"])
    text = common.print_table(
        f"epoch -> torch tensors, 1 process, batch {B} rows "
        f"({desc['bytes'] / 1e9:.2f} GB, {desc['rows']:,} rows); x sequential: paired with "
        f"'icefloe none'; label distance: batches of 1024, 10-class label sorted by write "
        f"order (uniform sample ~0.037); limits: the same columns held in one process "
        f"({desc['rows'] // CACHE_NODES:,} rows, a node's share)",
        ["variant", "rows/s", "GB/s", "min", "max", "x sequential", "label distance",
         "x S3 Parquet", "x local Parquet", "client CPU s/GB", "server CPU s/GB"], rows_out)

    targets = [
        common.target("epoch to tensors, icefloe (block shuffle) / Parquet from S3 (moto)",
                      ">=", 8, ratio("icefloe block", "Parquet S3 (moto)")),
        common.target("epoch to tensors, icefloe (block shuffle) / local-disk Parquet",
                      ">=", 2, ratio("icefloe block", "Parquet local disk")),
        common.target("default (window) shuffled epoch / sequential epoch (icefloe)", ">=", 0.5,
                      ratio("icefloe window (default)", "icefloe none")),
        common.target("default (window) shuffle: mean label distance of 1024-row batches to "
                      "the table's (10-class label sorted by write order)", "<=", 0.05,
                      quality["icefloe window (default)"]["mean_distance"]),
        common.target("sample-shuffled epoch / sequential epoch (icefloe)", "report", 0,
                      ratio("icefloe sample", "icefloe none")),
    ]
    ceiling = 2 / (cpu_client["icefloe block"] + cpu_server["icefloe block"])
    labels = list(got)
    common.bar_plot(cfg, NAME, f"epoch -> torch tensors, 1 process (GB/s, batch {B})", labels,
                    [med[k] for k in labels],
                    lows=[min(r["gbps"] for r in got[k]) for k in labels],
                    highs=[max(r["gbps"] for r in got[k]) for k in labels],
                    colors=["#4477aa" if k.startswith("icefloe") else "#999999"
                            for k in labels])
    result = {"name": NAME, "rows": desc["rows"], "bytes": desc["bytes"], "batch_size": B,
              "runs": got, "median_gbps": med, "median_rows_per_s": rps, "limits": limits,
              "median_client_cpu_s_per_gb": cpu_client, "median_server_cpu_s_per_gb": cpu_server,
              "shuffle_quality": quality, "targets": targets,
              "notes": ["Local Parquet is read from the page cache (files just written): the "
                        "best case for local disk.",
                        "The Parquet baselines read in file order; icefloe's figures against "
                        "them use block shuffle (zero-copy, consecutive rows per batch); "
                        "CacheDataset's default is the window shuffle.",
                        f"Sample shuffle gathers every row from a random place: "
                        f"{common.FEATURES + 2} columns mean {common.FEATURES + 2} cache misses "
                        f"per {common.ROW_BYTES}-byte row. One core gathers random rows at "
                        f"{limits['random_gbps']:.2f} GB/s in numpy "
                        f"({limits['random_ns_per_row']:.0f} ns/row) vs "
                        f"{limits['sequential_gbps']:.1f} GB/s sequentially; the nodes and the "
                        "training process share 2 cores.",
                        f"CPU per GB delivered, icefloe block: training process "
                        f"{cpu_client['icefloe block']:.2f} s, nodes "
                        f"{cpu_server['icefloe block']:.2f} s; two free cores allow at most "
                        f"{ceiling:.2f} GB/s = {ceiling / s3_gbps:.1f}x the S3 baseline on "
                        "this machine."],
              "table": text}
    common.write_result(cfg, NAME, result)
    return result
