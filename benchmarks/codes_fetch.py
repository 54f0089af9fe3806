"""A host's consumers of a token-budget epoch, side by side (issue 46, item 3):
the lengths fetched and each consumer's time to its first batch.

8 consumers (processes: 8 ranks, as a host's ranks or DataLoader workers)
start at once and read their first batch of the same token-budget epoch of a
``list<int32>`` table through a LocalCluster (two nodes):

- ``host's codes``: the host's codes directory on (a fresh one each round):
  the first consumer fetches and codes the row lengths, the others map its
  file (docs/epochs.md section 7, "Codes");
- ``each fetches``: ``ICEFLOE_CODES_DIR=""``: every consumer fetches and codes
  the lengths itself, as every consumer did before;
- with ``--before-python DIR``, ``before``: the consumers import icefloe from
  ``DIR`` (the ``python/`` of a checkout of the code before), codes
  directory on.

Figures: the bytes the nodes served on lengths tickets (their
``icefloe_node_served_bytes_total{ticket="range"}``, which nothing else in the
run moves), the slowest and the median consumer's seconds from the start
to its first batch, and the CPU seconds of all consumers. Variants
interleaved, the median of ``--repeats`` rounds.

    .venv/bin/python benchmarks/codes_fetch.py [--rows 10000000] [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import numpy as np

if __package__ in (None, ""):  # run as a script: make `benchmarks` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

NAME = "codes_fetch"
BUDGET = 16384
SEED = 0
_RANGE_BYTES = re.compile(
    r'^icefloe_node_served_bytes_total\{[^}]*ticket="range"[^}]*\} (\S+)$', re.M)


def consumer(args: dict[str, Any]) -> None:
    """One consumer: connects, says ready, waits for "go" on stdin, then reads
    its first batch; prints its figures as JSON."""
    import icefloe

    with icefloe.Client(args["head"]) as client:
        client.datasets()  # connected before the start
        print("ready", flush=True)
        sys.stdin.readline()
        t, cpu = time.perf_counter(), time.process_time()
        batch = next(iter(client.iter_epoch(
            "sft", batch_tokens=BUDGET, token_column="input_ids", seed=SEED, epoch=0,
            world_size=args["world_size"], rank=args["rank"])))
        out = {"first_batch_s": time.perf_counter() - t, "cpu_s": time.process_time() - cpu,
               "rows": batch.num_rows}
    print(json.dumps(out), flush=True)


def _lengths_table(n: int) -> Any:
    """``n`` rows of short log-normal token lists (1..256 tokens, median 7):
    the lengths fetched depend on the rows, not on their tokens."""
    import pyarrow as pa

    lengths = np.clip(np.random.default_rng(SEED).lognormal(2.0, 1.0, n), 1, 256).astype(
        np.int64)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    tokens = pa.ListArray.from_arrays(pa.array(offsets),
                                      pa.array(np.ones(int(offsets[-1]), np.int32)))
    return pa.table({"id": np.arange(n, dtype=np.int64), "input_ids": tokens})


def _range_bytes(cluster: Any) -> float:
    total = 0.0
    for node in cluster.nodes:
        with urllib.request.urlopen(node.health + "/metrics", timeout=30) as r:
            total += sum(float(v) for v in _RANGE_BYTES.findall(r.read().decode()))
    return total


def _round(cluster: Any, consumers: int, env: dict[str, str]) -> dict[str, Any]:
    """Every consumer started, connected, then let go at once."""
    argv = [sys.executable, str(Path(__file__).resolve()), "--consumer"]
    procs = [subprocess.Popen([*argv, json.dumps({"head": cluster.head_uri, "rank": r,
                                                   "world_size": consumers})],
                              env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True)
             for r in range(consumers)]
    try:
        for p in procs:
            line = p.stdout.readline().strip()
            if line != "ready":
                raise RuntimeError(f"a consumer failed to start: {line!r}")
        before = _range_bytes(cluster)
        for p in procs:
            p.stdin.write("go\n")
            p.stdin.flush()
        got = [json.loads(p.communicate(timeout=900)[0].strip().splitlines()[-1])
               for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    if any(p.returncode != 0 for p in procs):
        raise RuntimeError(f"consumer exit codes {[p.returncode for p in procs]}")
    first = [g["first_batch_s"] for g in got]
    return {"lengths_bytes": _range_bytes(cluster) - before, "first_batch_s_max": max(first),
            "first_batch_s_median": float(np.median(first)),
            "cpu_s": sum(g["cpu_s"] for g in got)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--consumer", help=argparse.SUPPRESS)
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--consumers", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="1M rows, 2 rounds")
    ap.add_argument("--before-python", type=Path, default=None,
                    help="a checkout's python/ whose icefloe the 'before' consumers import")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    if args.consumer:
        consumer(json.loads(args.consumer))
        return 0
    from pyiceberg.catalog.sql import SqlCatalog

    import icefloe
    from benchmarks import common

    rows, repeats = (1_000_000, 2) if args.quick else (args.rows, args.repeats)
    result: dict[str, Any] = {"name": NAME, "machine": common.machine(), "rows": rows,
                              "consumers": args.consumers, "batch_tokens": BUDGET}
    with tempfile.TemporaryDirectory(prefix="icefloe-codes-bench-") as tmp:
        work = Path(tmp)
        data = _lengths_table(rows)
        catalog = SqlCatalog("bench", uri=f"sqlite:///{work / 'catalog.db'}",
                             warehouse=(work / "warehouse").as_uri())
        catalog.create_namespace_if_not_exists("db")
        table = catalog.create_table("db.sft", schema=data.schema)
        table.append(data)
        del data
        here = str(Path(icefloe.__file__).resolve().parent.parent)
        variants = {"host's codes": {}, "each fetches": {"ICEFLOE_CODES_DIR": ""}}
        if args.before_python is not None:
            variants["before"] = {"PYTHONPATH": str(args.before_python.resolve())}
        got: dict[str, list[dict[str, Any]]] = {v: [] for v in variants}
        with icefloe.LocalCluster(num_nodes=2, memory_limit=None, log_dir=work / "logs") as c:
            with c.client() as client:
                client.load("sft", table.metadata_location)
            for r in range(repeats):
                for name, extra in variants.items():
                    codes_dir = work / f"codes-{r}-{len(got[name])}-{name[:4]}"
                    env = {**os.environ, "OMP_NUM_THREADS": "1",
                           "ICEFLOE_CODES_DIR": str(codes_dir),
                           "PYTHONPATH": os.pathsep.join(
                               [extra.get("PYTHONPATH", here), here])}
                    env.update({k: v for k, v in extra.items() if k != "PYTHONPATH"})
                    got[name].append(_round(c, args.consumers, env))
    result["variants"] = {name: {k: float(np.median([g[k] for g in runs])) for k in runs[0]}
                          for name, runs in got.items()}
    result["runs"] = got
    rows_ = [[name, f"{v['lengths_bytes'] / 1e6:.1f}", f"{v['first_batch_s_max']:.2f}",
              f"{v['first_batch_s_median']:.2f}", f"{v['cpu_s']:.2f}"]
             for name, v in result["variants"].items()]
    result["table"] = common.print_table(
        f"{args.consumers} consumers of one host, first token-budget batch (T = {BUDGET}), "
        f"{rows:,} rows; median of {repeats}",
        ["variant", "lengths fetched, MB", "first batch, s (slowest)", "(median)",
         "consumers' CPU s"], rows_)
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / f"{NAME}.json").write_text(json.dumps(result, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
