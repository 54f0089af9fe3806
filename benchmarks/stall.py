"""Data stall: a training loop with a fixed compute time per step.

Each step takes the next batch of tensors, then "computes" for a fixed time (a
calibrated sleep: an accelerator busy while the CPU is free for the input
pipeline). The data-stall share is the wall time spent waiting for the next
batch over the loop's wall time; cache (icefloe CacheDataset, block shuffle)
vs pyarrow.dataset reading the table's Parquet from S3 (moto), several step times.
"""

from __future__ import annotations

from typing import Any

from . import common
from .common import Env

NAME = "stall"


def run(env: Env) -> dict[str, Any]:
    import icefloe

    cfg, log, table = env.cfg, env.log, env.table
    s3 = env.s3
    B = cfg.batch_size
    step_times = [0.002, 0.005, 0.02]
    steps = 100 if cfg.quick else 500
    steps = min(steps, table.rows // B)
    with icefloe.LocalCluster(num_nodes=2, memory_limit=None,
                              log_dir=env.log_dir("stall")) as cluster, cluster.client() as client:
        client.load("stall", table.metadata_location)
        sources = {
            "icefloe": {"kind": "icefloe", "head": cluster.head_uri, "dataset": "stall",
                        "shuffle": "block"},
            "Parquet S3": {"kind": "parquet-s3", "paths": s3.keys, "endpoint": s3.endpoint,
                           "columns": common.COLUMNS},
        }
        variants = [f"{src} @ {int(st * 1000)} ms" for st in step_times for src in sources]

        def measure(v: str, r: int) -> dict[str, Any]:
            src, ms = v.split(" @ ")
            step_s = int(ms.split()[0]) / 1000
            res = common.run_worker("stall", {**sources[src], "batch_size": B, "epoch": r,
                                              "step_s": step_s, "max_steps": steps})
            return res

        log(f"stall: {steps} steps of {B} rows per run")
        got = common.interleaved(variants, cfg.repeats, measure, log)

    share = {v: common.median(r["stall_share"] for r in runs) for v, runs in got.items()}
    steady = {v: common.median(r["steady_stall_share"] for r in runs) for v, runs in got.items()}
    first = {v: common.median(r["first_wait_s"] for r in runs) for v, runs in got.items()}
    rows = []
    for st in step_times:
        ms = f"{int(st * 1000)} ms"
        c, p = f"icefloe @ {ms}", f"Parquet S3 @ {ms}"
        rows.append([ms, f"{100 * share[c]:.2f} %", f"{100 * steady[c]:.2f} %",
                     f"{1000 * first[c]:.0f} ms", f"{100 * share[p]:.1f} %",
                     f"{100 * steady[p]:.1f} %", f"{1000 * first[p]:.0f} ms",
                     B * common.ROW_BYTES / st / 1e9])
    text = common.print_table(
        f"stall: share of wall time waiting for data ({steps} steps x {B} rows, median of "
        f"{cfg.repeats}); 'after 1st': excluding the wait for the first batch",
        ["step time", "icefloe", "after 1st", "1st batch", "Parquet S3 (moto)", "after 1st",
         "1st batch", "GB/s the loop needs"], rows)
    worst_cache = max(share[f"icefloe @ {int(st * 1000)} ms"] for st in step_times)
    targets = [common.target("data-stall share, cache (worst of step times "
                             f"{', '.join(str(int(st * 1000)) for st in step_times)} ms), %",
                             "<", 5, 100 * worst_cache)]
    for st in step_times:
        targets.append(common.target(
            f"data-stall share, Parquet from S3 (moto) at {int(st * 1000)} ms/step, %",
            "report", 0, 100 * share[f"Parquet S3 @ {int(st * 1000)} ms"]))
    _plot(cfg, step_times, share)
    result = {"name": NAME, "steps": steps, "batch_size": B, "step_times_s": step_times,
              "runs": got, "median_stall_share": share, "median_steady_stall_share": steady,
              "median_first_wait_s": first, "targets": targets, "table": text}
    common.write_result(cfg, NAME, result)
    return result


def _plot(cfg: common.Config, step_times: list[float], share: dict[str, float]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    fig, ax = plt.subplots(figsize=(6, 4))
    x = np.arange(len(step_times))
    for i, (src, color) in enumerate([("icefloe", "#4477aa"), ("Parquet S3", "#999999")]):
        vals = [100 * share[f"{src} @ {int(st * 1000)} ms"] for st in step_times]
        ax.bar(x + (i - 0.5) * 0.38, vals, 0.38, label=src, color=color)
        for xi, v in zip(x, vals, strict=True):
            ax.annotate(f"{v:.1f}", (xi + (i - 0.5) * 0.38, v), ha="center", va="bottom",
                        fontsize=8)
    ax.axhline(5, linestyle="--", color="#aa3377", linewidth=1)
    ax.annotate("5 % target", (len(step_times) - 0.5, 5), ha="right", va="bottom", fontsize=8,
                color="#aa3377")
    ax.set_xticks(x, [f"{int(st * 1000)} ms/step" for st in step_times])
    ax.set_ylabel("% of wall time waiting for data")
    ax.set_title("data stall of a training loop (median of runs)", fontsize=10)
    ax.legend()
    fig.tight_layout()
    fig.savefig(cfg.out / f"{NAME}.png", dpi=110)
    plt.close(fig)
