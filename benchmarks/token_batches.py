"""Token-budget batches (issue 46) against fixed-size batches, side by side.

- pad share: padding over padded tokens (``rows x longest`` per batch), token
  budget vs fixed-size batches of the same mean tokens (the same mean rows per
  batch, from the epoch's shuffled order);
- per-step spread of trained tokens (``(most - least) / most``) across 8
  simulated ranks, both ways;
- epoch throughput through a LocalCluster (one consumer): token-budget batches
  (planned from the nodes' row lengths, read with ``take``) vs fixed-size
  window-shuffle batches of the same mean rows, in rows/s and tokens/s;
- planning time and memory for 100M synthetic lengths (the planner alone,
  numpy; memory is tracemalloc's peak of numpy allocations beyond the lengths).

    .venv/bin/python benchmarks/token_batches.py [--quick]
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

import numpy as np

if __package__ in (None, ""):  # run as a script: make `benchmarks` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import common  # noqa: E402

NAME = "token_batches"
BUDGET = 16384
RANKS = 8
SEED = 0


def synthetic_lengths(n: int, seed: int = SEED, longest: int = BUDGET // 4) -> np.ndarray:
    """Skewed lengths (log-normal, median ~150 tokens, a tail to ``longest``),
    as the nodes would send them (uint16)."""
    rng = np.random.default_rng(seed)
    out = np.empty(n, np.uint16)
    step = 1 << 24  # a chunk at a time: the float64 draw would be 8 bytes a row
    for i in range(0, n, step):
        k = min(step, n - i)
        out[i:i + k] = np.clip(rng.lognormal(5.0, 1.0, k), 1, longest)
    return out


def _spread(per_rank: np.ndarray) -> dict[str, float]:
    """Stats of (most - least) / most per step; ``per_rank``: [ranks, steps]."""
    s = (per_rank.max(0) - per_rank.min(0)) / np.maximum(per_rank.max(0), 1)
    return {"median": float(np.median(s)), "p99": float(np.quantile(s, 0.99)),
            "max": float(s.max()), "steps_over_10pct": int((s > 0.10).sum()), "steps": len(s)}


def balance_and_padding(lengths: np.ndarray) -> dict[str, Any]:
    from icefloe import _token_batches as tb

    plan = tb.plan_epoch(lengths, tb.TokenBudget(BUDGET, "input_ids"), seed=SEED, epoch=0)
    ranks = np.stack([plan.rank_batches(RANKS, r, 0, True) for r in range(RANKS)])
    rows, counts = plan.rows_of(ranks.T.ravel())
    longest = np.maximum.reduceat(lengths[rows].astype(np.int64),
                                  np.concatenate([[0], np.cumsum(counts)[:-1]]))
    padded = float((counts * longest).sum())
    budget_pad = 1 - float(lengths[rows].astype(np.int64).sum()) / padded
    mean_rows = len(rows) / len(counts)
    # Fixed-size batches of the same mean rows (so the same mean tokens) from a shuffled order.
    b = max(1, round(mean_rows))
    order = np.random.default_rng(SEED).permutation(len(lengths))
    steps = len(order) // (b * RANKS)
    fixed = lengths[order[:steps * b * RANKS]].astype(np.int64).reshape(steps, RANKS, b)
    fixed_pad = 1 - fixed.sum() / float(fixed.max(2).sum() * b)
    return {
        "rows": len(lengths), "batch_tokens": BUDGET, "mean_rows_per_batch": mean_rows,
        "pad_share": {"token budget": budget_pad, f"fixed {b} rows": float(fixed_pad)},
        "spread_8_ranks": {"token budget": _spread(plan.tokens[ranks].astype(np.float64)),
                           f"fixed {b} rows": _spread(fixed.sum(2).T.astype(np.float64))},
        "windowed_steps": plan.num_windowed // RANKS,
        "fixed_rows": b}


def planning(n: int, repeats: int) -> dict[str, Any]:
    from icefloe import _token_batches as tb

    lengths = synthetic_lengths(n)
    budget = tb.TokenBudget(BUDGET, "input_ids")
    times = []
    for r in range(repeats):
        gc.collect()
        t = time.perf_counter()
        plan = tb.plan_epoch(lengths, budget, seed=SEED, epoch=r)
        times.append(time.perf_counter() - t)
        del plan
    gc.collect()
    tracemalloc.start()
    plan = tb.plan_epoch(lengths, budget, seed=SEED, epoch=0)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return {"rows": n, "lengths_bytes": lengths.nbytes, "plan_s": times,
            "plan_s_median": float(np.median(times)), "peak_bytes": peak,
            "batches": plan.num_batches}


def throughput(n: int, repeats: int, work: Path) -> dict[str, Any]:
    import pyarrow as pa
    from pyiceberg.catalog.sql import SqlCatalog

    import icefloe

    lengths = synthetic_lengths(n, longest=BUDGET // 4).astype(np.int64)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    tokens = pa.ListArray.from_arrays(pa.array(offsets),
                                      pa.array(np.ones(int(offsets[-1]), np.int32)))
    data = pa.table({"id": np.arange(n, dtype=np.int64), "input_ids": tokens})
    work.mkdir(parents=True, exist_ok=True)
    catalog = SqlCatalog("bench", uri=f"sqlite:///{work / 'catalog.db'}",
                         warehouse=(work / "warehouse").as_uri())
    catalog.create_namespace_if_not_exists("db")
    table = catalog.create_table("db.sft", schema=data.schema)
    table.append(data)
    got: dict[str, list[float]] = {"token budget": [], "fixed rows": []}
    with icefloe.LocalCluster(num_nodes=2, memory_limit=None, log_dir=work / "logs") as c, \
            c.client() as client:
        client.load("sft", table.metadata_location)
        t = time.perf_counter()
        client.row_lengths("sft", "input_ids")
        lengths_s = time.perf_counter() - t
        mean_rows = balance_and_padding(lengths.astype(np.uint16))["mean_rows_per_batch"]
        b = max(1, round(mean_rows))
        for r in range(repeats):
            for name in got:
                kw = ({"batch_tokens": BUDGET, "token_column": "input_ids"}
                      if name == "token budget" else {"batch_size": b})
                t = time.perf_counter()
                rows = sum(x.num_rows for x in client.iter_epoch("sft", epoch=r, seed=SEED, **kw))
                got[name].append(rows / (time.perf_counter() - t))
    rows_s = {k: float(np.median(v)) for k, v in got.items()}
    mean = float(lengths.mean())
    return {"rows": n, "fixed_rows": b, "row_lengths_s": lengths_s, "rows_per_s": rows_s,
            "tokens_per_s": {k: v * mean for k, v in rows_s.items()},
            "ratio": rows_s["token budget"] / rows_s["fixed rows"]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--plan-rows", type=int, default=100_000_000)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    repeats = 2 if args.quick else 3
    result: dict[str, Any] = {"name": NAME, "machine": common.machine()}
    result["balance"] = balance_and_padding(synthetic_lengths(1_000_000 if args.quick
                                                              else 4_000_000))
    result["planning"] = planning(args.plan_rows, repeats)
    with tempfile.TemporaryDirectory(prefix="icefloe-token-bench-") as tmp:
        result["throughput"] = throughput(100_000 if args.quick else 400_000, repeats, Path(tmp))
    bal, plan, thr = result["balance"], result["planning"], result["throughput"]
    fixed = f"fixed {bal['fixed_rows']} rows"
    rows = [
        ["pad share", f"{100 * bal['pad_share']['token budget']:.2f} %",
         f"{100 * bal['pad_share'][fixed]:.1f} %"],
        ["per-step token spread, 8 ranks: median / p99 / max",
         "{median:.3f} / {p99:.3f} / {max:.3f}".format(**bal["spread_8_ranks"]["token budget"]),
         "{median:.3f} / {p99:.3f} / {max:.3f}".format(**bal["spread_8_ranks"][fixed])],
        ["steps over 10 % spread", "{steps_over_10pct} of {steps}".format(
            **bal["spread_8_ranks"]["token budget"]), "{steps_over_10pct} of {steps}".format(
            **bal["spread_8_ranks"][fixed])],
        [f"epoch, rows/s ({thr['rows']} rows)", f"{thr['rows_per_s']['token budget']:.0f}",
         f"{thr['rows_per_s']['fixed rows']:.0f}"],
        [f"planning {plan['rows']:,} rows: s / peak MB",
         f"{plan['plan_s_median']:.2f} / {plan['peak_bytes'] / 1e6:.0f}", "-"],
    ]
    result["table"] = common.print_table(
        f"token-budget batches (T = {BUDGET}) vs fixed-size batches of the same mean rows",
        ["figure", "token budget", fixed], rows)
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / f"{NAME}.json").write_text(json.dumps(result, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
