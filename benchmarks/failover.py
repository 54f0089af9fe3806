"""Failover: the reader's longest stall when a data node dies mid-epoch.

A training loop (``Client.iter_epoch``, window shuffle, a fixed 5 ms "compute"
per step) reads one epoch from two nodes holding the table twice
(replication 2). In the faulted run the node the loop streams from is
SIGKILLed after a quarter of the epoch; the loop fails over to the other
replica and goes on. Figures: the longest wait for one batch, faulted and
unfaulted, measured side by side (interleaved rounds), and that the faulted
epoch is exactly the unfaulted one.
"""

from __future__ import annotations

import time
from typing import Any

from . import common
from .common import Env

NAME = "failover"
STEP_S = 0.005


def run(env: Env) -> dict[str, Any]:
    cfg, log, table = env.cfg, env.log, env.table
    B = cfg.batch_size

    def measure(variant: str, r: int) -> dict[str, Any]:
        import icefloe

        with icefloe.LocalCluster(num_nodes=2, memory_limit=None,
                                  log_dir=env.log_dir(f"failover-{r}")) as cluster, \
                cluster.client() as client:
            client.load("f", table.metadata_location, replication=2)
            plan = {"batch_size": B, "seed": r, "epoch": 0}
            info, shape = client.epoch_info("f", **plan)
            victim = cluster.node_uris.index(info.endpoints[0].locations[0].uri.decode())
            kill_at = int(shape["worker_batches"]) // 4 if variant == "node killed" else -1
            waits, firsts = [], []
            t = time.perf_counter()
            for k, batch in enumerate(client.iter_epoch("f", **plan)):
                now = time.perf_counter()
                waits.append(now - t)
                firsts.append(batch.column(0)[0].as_py())  # the batch's first row id
                if k == kill_at:
                    cluster.kill_node(victim)
                time.sleep(STEP_S)
                t = time.perf_counter()
        steady = waits[1:]  # the first wait is the epoch's start, not a stall
        return {"max_wait_s": max(steady), "median_wait_s": common.median(steady),
                "batches": len(waits), "firsts": firsts}

    variants = ["no fault", "node killed"]
    got = common.interleaved(variants, cfg.repeats, measure, log)
    exact = all(f["firsts"] == n["firsts"]
                for f, n in zip(got["node killed"], got["no fault"], strict=True))
    for runs in got.values():
        for res in runs:
            del res["firsts"]  # compared above; too long to keep
    worst = {v: common.median(x["max_wait_s"] for x in runs) for v, runs in got.items()}
    typical = {v: common.median(x["median_wait_s"] for x in runs) for v, runs in got.items()}
    rows = [[v, f"{1000 * worst[v]:.0f} ms", f"{1000 * typical[v]:.2f} ms",
             got[v][0]["batches"]] for v in variants]
    text = common.print_table(
        f"failover: one epoch of {B}-row batches, {int(STEP_S * 1000)} ms/step, replication 2 "
        f"(median of {cfg.repeats})",
        ["run", "longest wait for a batch", "median wait", "batches"], rows)
    targets = [common.target("reader's longest stall during a failover (node SIGKILLed "
                             "mid-epoch, replication 2), ms", "report", 0,
                             1000 * worst["node killed"]),
               common.target("faulted epoch identical to the unfaulted one", ">=", 1,
                             1.0 if exact else 0.0)]
    result = {"name": NAME, "step_s": STEP_S, "batch_size": B, "runs": got,
              "median_longest_wait_s": worst, "median_wait_s": typical, "exact": exact,
              "targets": targets, "table": text}
    common.write_result(cfg, NAME, result)
    return result
