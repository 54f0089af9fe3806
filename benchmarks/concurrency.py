"""Concurrency: 1, 2 and 4 training jobs reading one cached dataset at once.

Each job is its own process with its own world size (1, 2, 4, 3 for jobs 1-4),
emulated by reading every rank's plan of one epoch (block shuffle, a seed per
job) into tensors. Jobs start together at a wall-clock time; aggregate
throughput is all bytes over (last end - first start), per-job throughput each
job's own bytes over its own time. One copy of the data serves every job.
"""

from __future__ import annotations

import time
from typing import Any

from . import common
from .common import Env

NAME = "concurrency"
WORLD_SIZES = [1, 2, 4, 3]
JOB_COUNTS = (1, 2, 4)


def run(env: Env) -> dict[str, Any]:
    import icefloe

    cfg, log, table = env.cfg, env.log, env.table
    with icefloe.LocalCluster(num_nodes=2, memory_limit=None,
                              log_dir=env.log_dir(NAME)) as cluster, cluster.client() as client:
        desc = client.load("shared", table.metadata_location)

        def measure(v: str, r: int) -> dict[str, Any]:
            jobs = int(v.split()[0])
            start_at = time.time() + 4.0 + jobs  # every job has imported torch and connected
            procs = [common.start_worker("job", {
                "head": cluster.head_uri, "dataset": "shared", "world_size": WORLD_SIZES[j],
                "batch_size": cfg.batch_size, "shuffle": "block", "seed": 10 * r + j,
                "start_at": start_at}) for j in range(jobs)]
            res = [common.finish_worker(p, "job") for p in procs]
            t0, t1 = min(x["start"] for x in res), max(x["end"] for x in res)
            total = sum(x["bytes"] for x in res)
            return {"jobs": jobs, "gbps": total / (t1 - t0) / 1e9, "seconds": t1 - t0,
                    "per_job_gbps": [x["gbps"] for x in res],
                    "late_start_s": max(x["start"] for x in res) - start_at,
                    "rows": [x["rows"] for x in res]}

        variants = [f"{n} job{'s' * (n > 1)}" for n in JOB_COUNTS]
        log(f"concurrency: {desc['rows']:,} rows, {desc['bytes'] / 1e9:.2f} GB on 2 nodes")
        got = common.interleaved(variants, cfg.repeats, measure, log)

    med = {k: common.median(x["gbps"] for x in v) for k, v in got.items()}
    rows = []
    for k, v in got.items():
        per_job = [common.median(x["per_job_gbps"][j] for x in v) for j in range(v[0]["jobs"])]
        rows.append([k, ", ".join(str(w) for w in WORLD_SIZES[:v[0]["jobs"]]), med[k],
                     med[k] / med["1 job"], ", ".join(f"{g:.2f}" for g in per_job),
                     min(per_job) / max(per_job)])
    text = common.print_table(
        f"concurrency: jobs reading one cached copy ({desc['bytes'] / 1e9:.2f} GB) at once",
        ["jobs", "world sizes", "aggregate GB/s", "x 1 job", "per-job GB/s", "slowest/fastest"],
        rows)
    targets = [common.target(f"aggregate throughput, {n} concurrent jobs / 1 job", "report", 0,
                             med[f"{n} jobs"] / med["1 job"]) for n in JOB_COUNTS[1:]]
    labels = list(got)
    common.bar_plot(cfg, NAME, "concurrency: aggregate GB/s of concurrent jobs (median, "
                    "min-max)", labels, [med[k] for k in labels],
                    lows=[min(x["gbps"] for x in got[k]) for k in labels],
                    highs=[max(x["gbps"] for x in got[k]) for k in labels])
    result = {"name": NAME, "world_sizes": WORLD_SIZES, "runs": got, "median_gbps": med,
              "targets": targets, "table": text}
    common.write_result(cfg, NAME, result)
    return result
