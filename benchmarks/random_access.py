"""Random access: taking 1, 64 and 4096 uniformly random rows (any order,
duplicates allowed) by row number, median milliseconds over many calls.

- icefloe: ``Client.take`` against a 2-node cluster holding the table (a
  connected client; whatever path take uses at run time is what is measured);
- the in-process limit: ``pyarrow.Table.take`` on the same rows held in one
  contiguous table in the measuring process;
- Lance (pylance, in the peers' own venv): ``dataset.take`` on the table written
  as a Lance dataset on local disk (the epoch benchmark's copy, files in the page
  cache); skipped, with the reason, when the peers cannot be installed.

Each reader runs in a fresh interpreter per round, the readers interleaved
round-robin (common.interleaved); a round is many calls per size, and the figure
is the median over every call of every round. Ratios are paired per round.
"""

from __future__ import annotations

from typing import Any

from . import common, epoch, peers
from .common import Env

NAME = "random_access"
NODES = 2
SIZES = [1, 64, 4096]


def _calls(quick: bool, reader: str) -> list[int]:
    """Calls per size in one round: fewer of the slow ones."""
    if reader == "Lance":
        return [100, 30, 5] if quick else [200, 60, 10]
    return [200, 100, 20] if quick else [500, 200, 50]


def run(env: Env) -> dict[str, Any]:
    import icefloe

    cfg, log, table = env.cfg, env.log, env.table
    skipped: dict[str, str] = {}
    peer, peer_variants = epoch._peer_variants(env, skipped)
    skipped.pop("Ray Data", None)  # not a random-access reader here
    lance_uri = next((a["uri"] for k, a in peer_variants.values() if k == "lance"), None)
    if lance_uri is None:
        skipped.setdefault("Lance", "no Lance dataset")
    readers = ["icefloe Client.take", "icefloe Client.take, TCP", "in-process Table.take"]
    readers += ["Lance dataset.take"] if lance_uri else []
    with icefloe.LocalCluster(num_nodes=NODES, memory_limit=None,
                              log_dir=env.log_dir(NAME)) as cluster, cluster.client() as client:
        desc = client.load("ra", table.metadata_location)
        rows = desc["rows"]

        def measure(reader: str, r: int) -> dict[str, Any]:
            args = {"rows": rows, "sizes": SIZES, "seed": 1000 + r}
            if reader.startswith("Lance"):
                res = peers.run(peer, "lance_take", {**args, "uri": lance_uri,
                                                     "calls": _calls(cfg.quick, "Lance")})
            elif reader.startswith("icefloe"):
                res = common.run_worker("take_latency", {
                    **args, "kind": "icefloe", "head": cluster.head_uri, "dataset": "ra",
                    "calls": _calls(cfg.quick, reader), "share_memory": "TCP" not in reader})
            else:
                res = common.run_worker("take_latency", {
                    **args, "kind": "inprocess", "paths": table.files,
                    "calls": _calls(cfg.quick, reader)})
            return {str(n): common.median(res[str(n)]) for n in SIZES} | {"calls": res}

        log(f"random access: {rows:,} rows on {NODES} nodes; take of {SIZES} random rows")
        got = common.interleaved(readers, cfg.repeats, measure, log)
    return _report(cfg, rows, readers, got, skipped, peer)


def _report(cfg: common.Config, rows: int, readers: list[str], got: dict[str, Any],
            skipped: dict[str, str], peer: peers.Peers | None) -> dict[str, Any]:
    med = {v: {str(n): common.median(t for rnd in got[v] for t in rnd["calls"][str(n)])
               for n in SIZES} for v in readers}

    def ratio(a: str, b: str, n: int) -> float:
        return common.median(x[str(n)] / y[str(n)] for x, y in zip(got[a], got[b], strict=True))

    ice, mem, lan = "icefloe Client.take", "in-process Table.take", "Lance dataset.take"
    table_rows = []
    for v in readers:
        table_rows.append([v, *(med[v][str(n)] for n in SIZES),
                           *(ratio(v, mem, n) for n in SIZES)])
    for k, reason in skipped.items():
        table_rows.append([k, "skipped", reason[:100], "", "", "", ""])
    text = common.print_table(
        f"random access: median ms of a take of n uniformly random rows ({rows:,} rows); "
        f"x in-process: paired per round",
        ["reader", *(f"{n} rows ms" for n in SIZES), *(f"{n} x in-process" for n in SIZES)],
        table_rows)
    targets = [
        common.target("random access: one-row take, icefloe, median ms (loopback)", "<=", 0.5,
                      med[ice]["1"]),
        common.target("random access: 4096-row take, icefloe / in-process Table.take", "<=", 3,
                      ratio(ice, mem, 4096)),
        common.target("random access: one-row take, icefloe over loopback TCP, median ms",
                      "<=", 0.5, med[f"{ice}, TCP"]["1"]),
        common.target("random access: 4096-row take, icefloe over loopback TCP / in-process "
                      "Table.take", "<=", 3, ratio(f"{ice}, TCP", mem, 4096)),
        common.target("random access: 64-row take, icefloe, median ms", "report", 0,
                      med[ice]["64"]),
        common.target("random access: 4096-row take, icefloe, median ms", "report", 0,
                      med[ice]["4096"]),
    ]
    if lan in med:
        targets.append(common.target("random access: 4096-row take, Lance / icefloe", "report",
                                     0, ratio(lan, ice, 4096)))
    labels = [f"{v.split()[0]} {n}" for n in SIZES for v in readers]
    common.bar_plot(cfg, NAME, "random access: median ms per take (log scale)", labels,
                    [med[v][str(n)] for n in SIZES for v in readers], ylabel="ms",
                    log_scale=True)
    notes = [f"Median over every call of every round (calls per round and size: icefloe and "
             f"in-process {_calls(cfg.quick, 'icefloe')}, Lance {_calls(cfg.quick, 'Lance')} "
             f"for {SIZES} rows). In ms: " + "; ".join(
                 f"{v} " + " / ".join(f"{med[v][str(n)]:.3g}" for n in SIZES) for v in readers)]
    notes += [f"{k} skipped: {reason}" for k, reason in skipped.items()]
    result = {"name": NAME, "rows": rows, "sizes": SIZES, "runs": got, "median_ms": med,
              "skipped": skipped, "peers": peer.versions if peer else None,
              "targets": targets, "notes": notes, "table": text}
    common.write_result(cfg, NAME, result)
    return result
