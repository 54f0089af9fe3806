"""Memory: data-node resident memory per Arrow byte cached.

Two data nodes (sharing their memory, as LocalCluster starts them); their
resident memory (VmRSS, with the pages of the sealed memory files that hold
their copies counted whether mapped or not: common.held_bytes) before
loading, after loading the whole table (and 2 s later), after serving a
sequential epoch and sample-shuffled batches (gRPC buffers, gathers), and
after evicting it. The ratio is (RSS now - RSS before
loading) / Arrow bytes the nodes hold (load's "bytes"), summed over the nodes.
The nodes as built (Arrow's default pool is jemalloc in icefloe-node) are
measured `repeats` times; with other default pools in their environment
(ARROW_DEFAULT_MEMORY_POOL: the wheel's usual mimalloc, glibc's malloc) once each.
"""

from __future__ import annotations

import time
from typing import Any

from . import common
from .common import Env

NAME = "memory"
NODES = 2


DEFAULT = "as built (jemalloc)"
ALLOCATORS = {
    DEFAULT: {},
    "ARROW_DEFAULT_MEMORY_POOL=mimalloc": {"ARROW_DEFAULT_MEMORY_POOL": "mimalloc"},
    "ARROW_DEFAULT_MEMORY_POOL=system": {"ARROW_DEFAULT_MEMORY_POOL": "system"},
}


def _one(env: Env, label: str, r: int) -> dict[str, Any]:
    import icefloe

    cfg, table = env.cfg, env.table
    with icefloe.LocalCluster(num_nodes=NODES, memory_limit=None, env=ALLOCATORS[label],
                              log_dir=env.log_dir(f"memory-{r}")) as cluster, \
            cluster.client() as client:
        pids = [n.popen.pid for n in cluster.nodes]

        def rss(pids: list[int] = pids) -> int:
            return sum(common.held_bytes(p) for p in pids)

        base = rss()
        desc = client.load("mem", table.metadata_location)
        cached = desc["bytes"]
        used = sum(n["memory_used_bytes"] for n in client.status()["nodes"])
        after_load = rss()
        time.sleep(2.0)
        settled = rss()
        common.run_worker("epoch", {"kind": "icefloe", "head": cluster.head_uri, "dataset": "mem",
                                    "batch_size": cfg.batch_size, "shuffle": "none"})
        after_epoch = rss()
        common.run_worker("epoch", {"kind": "icefloe", "head": cluster.head_uri, "dataset": "mem",
                                    "batch_size": cfg.batch_size, "shuffle": "sample",
                                    "max_batches": 50 if cfg.quick else 100})
        after_sample = rss()
        client.evict("mem")
        time.sleep(1.0)
        after_evict = rss()
    return {"allocator": label, "cached_bytes": cached, "memory_used_bytes": used,
            "rss_base": base, "rss_after_load": after_load, "rss_settled": settled,
            "rss_after_epoch": after_epoch, "rss_after_sample": after_sample,
            "rss_after_evict": after_evict,
            "ratio_after_load": (after_load - base) / cached,
            "ratio_settled": (settled - base) / cached,
            "ratio_after_serving": (max(after_epoch, after_sample) - base) / cached,
            "ratio_after_evict": (after_evict - base) / cached}


def run(env: Env) -> dict[str, Any]:
    cfg, log = env.cfg, env.log
    runs: dict[str, list[dict[str, Any]]] = {k: [] for k in ALLOCATORS}
    plan = [(DEFAULT, r) for r in range(cfg.repeats)]
    plan += [(k, 0) for k in ALLOCATORS if k != DEFAULT]
    for label, r in plan:
        res = _one(env, label, r)
        runs[label].append(res)
        log(f"  {label} [{r + 1}]: cached {res['cached_bytes'] / 1e9:.3f} GB; RSS growth / "
            f"cached: {res['ratio_after_load']:.2f} after load, {res['ratio_settled']:.2f} 2 s "
            f"later, {res['ratio_after_serving']:.2f} after serving, "
            f"{res['ratio_after_evict']:.2f} after evict")

    def med(label: str, key: str) -> float:
        return common.median(r[key] for r in runs[label])

    rows = [[label, len(runs[label]), med(label, "cached_bytes") / 1e9,
             med(label, "memory_used_bytes") / med(label, "cached_bytes"),
             med(label, "ratio_after_load"), med(label, "ratio_settled"),
             med(label, "ratio_after_serving"), med(label, "ratio_after_evict")]
            for label in ALLOCATORS]
    default = DEFAULT
    text = common.print_table(
        f"memory: {NODES} data nodes; (RSS - RSS before loading) / Arrow bytes cached; node "
        f"RSS before loading {med(default, 'rss_base') / 1e6:.0f} MB",
        ["allocator (env of the nodes)", "runs", "GB cached", "budget used / cached",
         "after load", "2 s later", "after serving", "after evict"], rows)
    targets = [
        common.target("data-node RSS / Arrow bytes cached, after load", "<=", 1.2,
                      med(default, "ratio_settled")),
        common.target("data-node RSS / Arrow bytes cached, after serving epochs", "<=", 1.2,
                      med(default, "ratio_after_serving")),
    ]
    best = min(ALLOCATORS, key=lambda k: med(k, "ratio_after_serving"))
    notes = [f"RSS / Arrow bytes after serving: {med(default, 'ratio_after_serving'):.2f}x as "
             f"built; lowest with {best} at {med(best, 'ratio_after_serving'):.2f}x."]
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    fig, ax = plt.subplots(figsize=(7.5, 4))
    stages = [("after load", "ratio_settled"), ("after serving", "ratio_after_serving"),
              ("after evict", "ratio_after_evict")]
    x = np.arange(len(ALLOCATORS))
    for i, (name, key) in enumerate(stages):
        vals = [med(k, key) for k in ALLOCATORS]
        ax.bar(x + (i - 1) * 0.27, vals, 0.27, label=name)
    ax.axhline(1.2, linestyle="--", color="#aa3377", linewidth=1)
    ax.set_xticks(x, [k.replace("=", "=\n") for k in ALLOCATORS], fontsize=7)
    ax.set_ylabel("node RSS growth / Arrow bytes cached")
    ax.set_title("memory: data-node RSS per cached Arrow byte (target <= 1.2)", fontsize=10)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(cfg.out / f"{NAME}.png", dpi=110)
    plt.close(fig)
    result = {"name": NAME, "runs": runs, "targets": targets, "notes": notes, "table": text}
    common.write_result(cfg, NAME, result)
    return result
