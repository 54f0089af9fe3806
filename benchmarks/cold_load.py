"""Cold load: the Iceberg table into the cache on 1, 2, 3 data nodes vs pyarrow.dataset
reading the same Parquet files (to_table with the same projection and filter), and
the time from GetFlightInfo to the first batch once loaded (warm cache).

The files are in the page cache for both (just written), so this compares decode
and placement work, not disk. Load time is the client's ``load`` call: planning
on the head, reading on the nodes, publishing.
"""

from __future__ import annotations

from typing import Any

from . import common
from .common import Env

NAME = "cold_load"
LOAD_COLUMNS = ["id", "label", *[f"f{i}" for i in range(12)]]
LABEL_BELOW = 8
FILTER = f"label < {LABEL_BELOW}"
NODES = (1, 2, 3)


def run(env: Env) -> dict[str, Any]:
    import contextlib

    import icefloe

    cfg, log, table = env.cfg, env.log, env.table
    with contextlib.ExitStack() as stack:
        clusters = {n: stack.enter_context(icefloe.LocalCluster(
            num_nodes=n, memory_limit=None, log_dir=env.log_dir(f"cold_load-{n}")))
            for n in NODES}
        clients = {n: stack.enter_context(c.client()) for n, c in clusters.items()}
        loaded: dict[str, Any] = {}

        def measure(v: str, r: int) -> dict[str, Any]:
            if v == "pyarrow.dataset":
                res = common.run_worker("pyarrow_scan", {"paths": table.files,
                                                         "columns": LOAD_COLUMNS,
                                                         "label_below": LABEL_BELOW})
                res["gbps"] = res["bytes"] / res["seconds"] / 1e9
                return res
            n = int(v.split()[1])
            client = clients[n]
            name = f"load{r}"
            with common.Timer() as t:
                desc = client.load(name, table.metadata_location, columns=LOAD_COLUMNS,
                                   filter=FILTER)
            loaded[v] = desc
            res = {"seconds": t.seconds, "rows": desc["rows"], "bytes": desc["bytes"],
                   "server_load_seconds": desc.get("load_seconds"),
                   "gbps": desc["bytes"] / t.seconds / 1e9}
            if r < cfg.repeats - 1:
                client.evict(name)
            return res

        variants = ["pyarrow.dataset"] + [f"icefloe {n} node{'s' * (n > 1)}" for n in NODES]
        got = common.interleaved(variants, cfg.repeats, measure, log)
        n_last = NODES[-1]
        rows = loaded[f"icefloe {n_last} nodes"]["rows"]
        latency = common.run_worker("first_batch", {
            "head": clusters[n_last].head_uri, "dataset": f"load{cfg.repeats - 1}",
            "rows": rows, "batch_size": cfg.batch_size, "n": 30})

    base = common.median(r["seconds"] for r in got["pyarrow.dataset"])
    base_rows = got["pyarrow.dataset"][0]["rows"]
    med_s = {v: common.median(r["seconds"] for r in runs) for v, runs in got.items()}
    out_rows = []
    for v, runs in got.items():
        out_rows.append([v, runs[0]["rows"], med_s[v], min(r["seconds"] for r in runs),
                         max(r["seconds"] for r in runs),
                         common.median(r["gbps"] for r in runs), base / med_s[v]])
    text = common.print_table(
        f"cold load: {len(table.files)} files, columns {len(LOAD_COLUMNS)} of "
        f"{len(common.COLUMNS)}, filter {FILTER!r}",
        ["variant", "rows", "seconds", "min", "max", "GB/s (Arrow)", "x pyarrow.dataset"],
        out_rows)
    lat = {k: {"median_ms": common.median(v), "p90_ms": sorted(v)[int(0.9 * (len(v) - 1))],
               "max_ms": max(v)} for k, v in latency.items()}
    lat_text = common.print_table(
        f"time to first batch after load ({n_last} nodes, {cfg.batch_size} rows, 30 tries)",
        ["path", "median ms", "p90 ms", "max ms"],
        [[{"range": "GetFlightInfo(range) -> DoGet -> first batch",
           "new_client": "same, new connections each time",
           "epoch": "iter_epoch(shuffle=sample) -> first batch"}[k],
          v["median_ms"], v["p90_ms"], v["max_ms"]] for k, v in lat.items()])
    for v, runs in got.items():
        if v != "pyarrow.dataset" and runs[0]["rows"] != base_rows:
            raise AssertionError(f"{v} loaded {runs[0]['rows']} rows, pyarrow {base_rows}")
    targets = [common.target(f"cold load throughput, icefloe {n} node{'s' * (n > 1)} / "
                             "pyarrow.dataset", ">=", 0.9,
                             base / med_s[f"icefloe {n} node{'s' * (n > 1)}"])
               for n in NODES]
    targets.append(common.target("GetFlightInfo -> first batch, warm cache, median ms", "<", 20,
                                 lat["range"]["median_ms"]))
    targets.append(common.target("GetFlightInfo -> first batch, warm cache, p90 ms", "<", 20,
                                 lat["range"]["p90_ms"]))
    labels = list(got)
    common.bar_plot(cfg, NAME, "cold load: seconds to load (median of runs, min-max; lower "
                    "is better)", labels, [med_s[k] for k in labels],
                    lows=[min(r["seconds"] for r in got[k]) for k in labels],
                    highs=[max(r["seconds"] for r in got[k]) for k in labels],
                    ylabel="seconds", lines=[(base / 0.9, "0.9x pyarrow throughput")],
                    colors=["#999999"] + ["#4477aa"] * len(NODES))
    result = {"name": NAME, "columns": LOAD_COLUMNS, "filter": FILTER, "runs": got,
              "median_seconds": med_s, "first_batch": latency, "first_batch_summary": lat,
              "targets": targets, "table": text + "\n\n" + lat_text}
    common.write_result(cfg, NAME, result)
    return result
