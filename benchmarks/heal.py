"""Heal: time from SIGKILLing a data node to its dataset being ``ready`` again
(the head reloads only the lost scan tasks onto the other nodes), beside the
time to load the same table from scratch, both measured in this run.

Three nodes, replication 1: the killed node held about a third of the rows, so
a heal reads about a third of the table, plus the time the head takes to see
the node dead (``--heartbeat-timeout-ms``, 1 s here, and a poll). Each repeat
loads the table (timed), kills the node holding row 0, waits for ``ready``
(timed from the kill), checks the rows, and restarts the node empty.
"""

from __future__ import annotations

import time
from typing import Any

from . import common
from .common import Env

NAME = "heal"
HEARTBEAT_TIMEOUT_MS = 1000
WAIT_S = 600.0


def _wait_healed(client, name: str, lost: str) -> dict[str, Any]:
    deadline = time.monotonic() + WAIT_S
    while True:
        desc = client.describe(name)
        if desc["state"] == "ready" and all(lost not in s["nodes"] for s in desc["slices"]):
            return desc
        if time.monotonic() > deadline:
            raise TimeoutError(f"{name} not healed within {WAIT_S}s: {desc}")
        time.sleep(0.02)


def run(env: Env) -> dict[str, Any]:
    import icefloe

    cfg, log, table = env.cfg, env.log, env.table
    runs: dict[str, list[dict[str, Any]]] = {"load from scratch": [], "kill -> ready (heal)": []}
    with icefloe.LocalCluster(num_nodes=3, memory_limit=None,
                              head_args=["--heartbeat-timeout-ms", str(HEARTBEAT_TIMEOUT_MS)],
                              log_dir=env.log_dir(NAME)) as cluster, cluster.client() as client:
        for r in range(cfg.repeats):
            name = f"heal{r}"
            with common.Timer() as t:
                desc = client.load(name, table.metadata_location)
            runs["load from scratch"].append({"seconds": t.seconds, "rows": desc["rows"],
                                              "server_seconds": desc["load_seconds"]})
            lost = desc["slices"][0]["nodes"][0]
            victim = cluster.node_uris.index(lost)
            lost_rows = sum(s["stop"] - s["start"] for s in desc["slices"] if lost in s["nodes"])
            killed = time.monotonic()
            cluster.kill_node(victim)
            healed = _wait_healed(client, name, lost)
            seconds = time.monotonic() - killed
            if healed["generation"] != desc["generation"] or healed["rows"] != desc["rows"]:
                raise AssertionError(f"heal changed the copy: {desc} -> {healed}")
            runs["kill -> ready (heal)"].append({"seconds": seconds, "lost_rows": lost_rows,
                                                 "server_seconds": healed.get("heal_seconds")})
            log(f"  repeat {r}: load {t.seconds:.2f}s, kill -> ready {seconds:.2f}s "
                f"({lost_rows} of {desc['rows']} rows lost)")
            client.evict(name)
            cluster.restart_node(victim)
    med = {v: common.median(x["seconds"] for x in rs) for v, rs in runs.items()}
    ratio = med["kill -> ready (heal)"] / med["load from scratch"]
    text = common.print_table(
        f"heal: 3 nodes, replication 1, dead after {HEARTBEAT_TIMEOUT_MS} ms of silence",
        ["variant", "median s", "min", "max", "server s (median)"],
        [[v, med[v], min(x["seconds"] for x in rs), max(x["seconds"] for x in rs),
          common.median(x["server_seconds"] or 0 for x in rs)] for v, rs in runs.items()])
    targets = [common.target("kill -> ready / load from scratch", "report", 0, ratio,
                             "includes detecting the dead node")]
    result = {"name": NAME, "runs": runs, "median_seconds": med, "ratio": ratio,
              "targets": targets, "table": text}
    common.write_result(cfg, NAME, result)
    return result
