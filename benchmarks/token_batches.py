"""Token-budget batches (issue 46) against fixed-size batches, side by side.

- pad share: padding over padded tokens (``rows x longest`` per batch), token
  budget vs fixed-size batches of the same mean tokens (the same mean rows per
  batch, from the epoch's shuffled order);
- per-step spread of trained tokens (``(most - least) / most``) across 8
  simulated ranks, both ways;
- the balance guarantee (docs/epochs.md section 7, "Steps") on four length
  shapes (log-normal, uniform 1..T/4, bimodal short/long, Alpaca-like with
  rows crowding near T/2 and T/3) at 2, 4, 8, 16 and 64 ranks, in true
  tokens, from exact lengths and from codes: steps over 10% (the most
  spread of all steps, and of steps of band batches, which the guarantee
  covers), the tail's share, the batches no other is within 10% of (no
  step can balance them); ``balance="sq"`` in true sums of squared
  lengths;
- epoch throughput through a LocalCluster (one consumer): token-budget batches
  (planned from the nodes' row lengths, read with ``take``) vs fixed-size
  window-shuffle batches of the same mean rows, in rows/s and tokens/s;
- planning time and memory for 10M and 100M synthetic lengths (the planner
  alone, numpy), side by side: from exact lengths (2 bytes a row, as the
  nodes send them) and from the lengths coded in a byte a row
  (``encode_lengths``, what ``iter_epoch`` plans from; its coding, once per
  generation and budget, timed apart). Memory is tracemalloc's peak of numpy
  allocations beyond the input, and what a consumer keeps (input + plan).

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
SHAPES = ("lognormal", "uniform", "bimodal", "sft")
WORLD_SIZES = (2, 4, 8, 16, 64)


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


def shape_lengths(shape: str, n: int, seed: int = SEED) -> np.ndarray:
    """Lengths of one of ``SHAPES`` (as tests/test_token_batches.py's, at T
    = BUDGET), uint16."""
    if shape == "lognormal":
        return synthetic_lengths(n, seed)
    rng = np.random.default_rng([seed, SHAPES.index(shape)])
    if shape == "uniform":
        out = rng.integers(1, BUDGET // 4 + 1, n)
    elif shape == "bimodal":
        long = rng.random(n) < 0.1
        out = np.where(long, rng.normal(BUDGET / 5, BUDGET / 40, n),
                       rng.lognormal(4.0, 0.6, n)).clip(1, BUDGET // 4)
    else:  # "sft": near no divisor, T/2 or T/3
        near = rng.choice([0, 2, 3], n, p=[0.8, 0.1, 0.1])
        at = BUDGET / np.maximum(near, 1) * rng.uniform(0.96, 1.04, n)
        out = np.where(near > 0, at, rng.lognormal(5.0, 0.9, n)).clip(1, BUDGET)
    return out.astype(np.uint16)


def _per_batch(plan: Any, lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each batch's true tokens and sum of squared lengths."""
    rows, counts = plan.rows_of(np.arange(plan.num_batches))
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    row_lengths = lengths[rows].astype(np.int64)
    return (np.add.reduceat(row_lengths, starts),
            np.add.reduceat(row_lengths * row_lengths, starts))


def _alone(plan: Any, full: np.ndarray) -> int:
    """Full batches no other is within 10% of (planned tokens): a step that
    holds one cannot be balanced."""
    v = np.sort(plan.tokens[full].astype(np.float64))
    return int(((np.concatenate([[0.0], v[:-1]]) < 0.9 * v)
                & (0.9 * np.append(v[1:], np.inf) > v)).sum())


def _steps(plan: Any, measure: np.ndarray, world_size: int,
           drop_last: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Each step's spread of ``measure`` and whether all its batches are of
    the band, a job of ``world_size`` ranks reading from the start."""
    ids = np.stack([plan.rank_batches(world_size, r, 0, drop_last) for r in range(world_size)])
    at = measure[ids].astype(np.float64)
    return (at.max(0) - at.min(0)) / np.maximum(at.max(0), 1), ~plan.low[ids].any(0)


def guarantee(n: int, other_n: int) -> dict[str, Any]:
    """Steps over 10% on each shape, world size and source (true tokens)."""
    from icefloe import _token_batches as tb

    out: dict[str, Any] = {}
    budget = tb.TokenBudget(BUDGET, "input_ids")
    for shape in SHAPES:
        lengths = shape_lengths(shape, n if shape == "lognormal" else other_n)
        for source in ("exact", "codes"):
            plan = tb.plan_epoch(lengths if source == "exact" else tb.encode_lengths(
                lengths, BUDGET), budget, seed=SEED, epoch=0)
            tokens, _ = _per_batch(plan, lengths)
            full = plan.order[:plan.num_full]
            fig: dict[str, Any] = {
                "rows": len(lengths), "batches": plan.num_batches,
                "tail_share": float(plan.low[full].mean()),
                "alone_batches": _alone(plan, full),
                "partial_batches": int(plan.num_batches - plan.num_full)}
            for w in WORLD_SIZES:
                spread, band = _steps(plan, tokens, w)
                loose, _ = _steps(plan, tokens, w, drop_last=False)
                fig[f"w{w}"] = {"steps": len(spread), "over": int((spread > 0.1).sum()),
                                "max": float(spread.max()),
                                "band_max": float(spread[band].max()) if band.any() else 0.0,
                                "band_steps": int(band.sum()),
                                "over_without_drop_last": int((loose > 0.1).sum())}
            out[f"{shape}, {source}"] = fig
    lengths = synthetic_lengths(n)
    for window in (256, 1024):
        plan = tb.plan_epoch(lengths, tb.TokenBudget(BUDGET, "input_ids", balance="sq",
                                                     window_batches=window),
                             seed=SEED, epoch=0)
        _, squares = _per_batch(plan, lengths)
        fig = {}
        for w in WORLD_SIZES:
            spread, _ = _steps(plan, squares, w)
            fig[f"w{w}"] = {"steps": len(spread), "over": int((spread > 0.1).sum()),
                            "median": float(np.median(spread)),
                            "p95": float(np.quantile(spread, 0.95)),
                            "max": float(spread.max())}
        out[f"sq, window {window}"] = fig
    return out


def _spread(per_rank: np.ndarray) -> dict[str, float]:
    """Stats of (most - least) / most per step; ``per_rank``: [ranks, steps]."""
    s = (per_rank.max(0) - per_rank.min(0)) / np.maximum(per_rank.max(0), 1)
    return {"median": float(np.median(s)), "p99": float(np.quantile(s, 0.99)),
            "max": float(s.max()), "steps_over_10pct": int((s > 0.10).sum()), "steps": len(s)}


def _batch_figures(plan: Any, lengths: np.ndarray) -> dict[str, Any]:
    """Pad share and the 8 ranks' per-step spread of true tokens."""
    ranks = np.stack([plan.rank_batches(RANKS, r, 0, True) for r in range(RANKS)])
    rows, counts = plan.rows_of(ranks.T.ravel())
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    row_lengths = lengths[rows].astype(np.int64)
    longest = np.maximum.reduceat(row_lengths, starts)
    tokens = np.add.reduceat(row_lengths, starts).reshape(-1, RANKS).T
    return {"pad_share": 1 - float(row_lengths.sum()) / float((counts * longest).sum()),
            "spread": _spread(tokens.astype(np.float64)), "batches": plan.num_batches,
            "mean_rows": len(rows) / len(counts),
            "tail_share": float(plan.low[plan.order[:plan.num_full]].mean())}


def balance_and_padding(lengths: np.ndarray) -> dict[str, Any]:
    from icefloe import _token_batches as tb

    budget = tb.TokenBudget(BUDGET, "input_ids")
    exact = _batch_figures(tb.plan_epoch(lengths, budget, seed=SEED, epoch=0), lengths)
    coded = _batch_figures(tb.plan_epoch(tb.encode_lengths(lengths, BUDGET), budget, seed=SEED,
                                         epoch=0), lengths)
    # Fixed-size batches of the same mean rows (so the same mean tokens) from a shuffled order.
    b = max(1, round(exact["mean_rows"]))
    order = np.random.default_rng(SEED).permutation(len(lengths))
    steps = len(order) // (b * RANKS)
    fixed = lengths[order[:steps * b * RANKS]].astype(np.int64).reshape(steps, RANKS, b)
    fixed_pad = 1 - fixed.sum() / float(fixed.max(2).sum() * b)
    return {
        "rows": len(lengths), "batch_tokens": BUDGET, "mean_rows_per_batch": exact["mean_rows"],
        "pad_share": {"token budget": exact["pad_share"], "token budget, codes":
                      coded["pad_share"], f"fixed {b} rows": float(fixed_pad)},
        "spread_8_ranks": {"token budget": exact["spread"], "token budget, codes":
                           coded["spread"],
                           f"fixed {b} rows": _spread(fixed.sum(2).T.astype(np.float64))},
        "batches": {"token budget": exact["batches"], "token budget, codes": coded["batches"]},
        "tail_share": {"token budget": exact["tail_share"],
                       "token budget, codes": coded["tail_share"]},
        "fixed_rows": b}


def _plan_bytes(plan: Any) -> int:
    """What a plan keeps beside its input: its per-batch and per-block arrays."""
    return sum(a.nbytes for k, a in vars(plan).items()
               if isinstance(a, np.ndarray) and k != "lengths")


def _timed(make: Any, repeats: int) -> tuple[list[tuple[float, float]], int, Any]:
    """Seconds of ``make(epoch)`` per repeat (wall, CPU: on a shared machine
    the CPU seconds vary less), then tracemalloc's peak of one more."""
    times = []
    for r in range(repeats):
        gc.collect()
        t, cpu = time.perf_counter(), time.process_time()
        made = make(r)
        times.append((time.perf_counter() - t, time.process_time() - cpu))
        del made
    gc.collect()
    tracemalloc.start()
    made = make(0)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return times, peak, made


def planning(n: int, repeats: int) -> dict[str, Any]:
    from icefloe import _token_batches as tb

    lengths = synthetic_lengths(n)
    budget = tb.TokenBudget(BUDGET, "input_ids")
    out: dict[str, Any] = {"rows": n}
    code_s, code_peak, codes = _timed(lambda r: tb.encode_lengths(lengths, BUDGET), 1)
    out["coding"] = {"s": code_s[0][0], "cpu_s": code_s[0][1], "peak_bytes": code_peak,
                     "codes": len(codes.upper),
                     "exact": codes.exact}
    for name, source in (("exact lengths", lengths), ("codes", codes)):
        times, peak, plan = _timed(
            lambda r, s=source: tb.plan_epoch(s, budget, seed=SEED, epoch=r), repeats)
        held = (codes.codes.nbytes if name == "codes" else lengths.nbytes) + _plan_bytes(plan)
        out[name] = {"plan_s": [w for w, _ in times], "plan_cpu_s": [c for _, c in times],
                     "plan_s_median": float(np.median([w for w, _ in times])),
                     "plan_cpu_s_median": float(np.median([c for _, c in times])),
                     "peak_bytes": peak, "held_bytes": held, "batches": plan.num_batches}
        out["first_take" if name == "codes" else "first_take_exact"] = _first_take(plan)
        del plan
    return out


def _first_take(plan: Any) -> dict[str, Any]:
    """Reading, not planning: the row ids of one consumer's takes (rank 0 of
    8, worker 0 of 4): a take of about 64Ki rows alone (``rows_of``; its
    first such, past the ramp of smaller takes), and its first pass of
    takes as iter_token_epoch groups them (``RowPasses``, each bucket's
    codes read once for up to 2Mi rows)."""
    from icefloe import _token_batches as tb

    mine = tb.consumer_batches(plan, RANKS, 0, 4, 0, 0, True)
    groups = tb.take_groups(plan, mine)
    t = time.perf_counter()
    rows, _ = plan.rows_of(_groups_before(plan, mine)[0])
    one = {"s": time.perf_counter() - t, "rows": len(rows)}
    passes_ = tb.RowPasses(plan, groups)
    first = np.flatnonzero(passes_.pass_of == 0)
    t = time.perf_counter()
    pass_rows = sum(len(passes_.rows(int(i))[0]) for i in first)
    return {**one, "pass_s": time.perf_counter() - t, "pass_rows": pass_rows}


def throughput(n: int, repeats: int, work: Path) -> dict[str, Any]:
    import icefloe

    lengths = synthetic_lengths(n, longest=BUDGET // 4).astype(np.int64)
    table = _sft_table(n, work)
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


def _groups_before(plan: Any, batches: np.ndarray) -> list[np.ndarray]:
    """``take_groups`` before the ramp (groups of ~64Ki rows from the first),
    kept here to measure the first batch against it in the same run."""
    from icefloe import _token_batches as tb

    if not len(batches):
        return []
    ends = np.cumsum(plan.count[batches].astype(np.int64))
    cuts = np.unique(np.searchsorted(ends, np.arange(1, ends[-1] // tb._ROWS_PER_TAKE + 1)
                                     * tb._ROWS_PER_TAKE))
    return [g for g in np.split(batches, cuts + 1) if len(g)]


def first_batch(n: int, repeats: int, work: Path) -> dict[str, Any]:
    """Seconds from ``iter_epoch`` to its first token-budget batch, and to
    its 8th, one consumer of a LocalCluster of ``n`` rows, prefetch 2:
    takes ramped up from one batch (now) against ~64Ki-row takes from the
    first (before), alternated, each repeat a new epoch (planned afresh, the
    codes fetched once before)."""
    import itertools

    import icefloe
    from icefloe import _token_batches as tb

    table = _sft_table(n, work)
    ramped = tb.take_groups
    got: dict[str, dict[str, list[float]]] = {k: {"first": [], "eighth": []}
                                              for k in ("before", "now")}
    with icefloe.LocalCluster(num_nodes=2, memory_limit=None, log_dir=work / "logs") as c, \
            c.client() as client:
        client.load("sft", table.metadata_location)
        client.row_length_codes("sft", "input_ids", BUDGET)
        for r, name in itertools.product(range(repeats), ("before", "now")):
            tb.take_groups = _groups_before if name == "before" else ramped
            try:
                t = time.perf_counter()
                it = client.iter_epoch("sft", epoch=1000 + 2 * r + (name == "now"), seed=SEED,
                                       batch_tokens=BUDGET, token_column="input_ids",
                                       prefetch=2)
                next(it)
                got[name]["first"].append(time.perf_counter() - t)
                for _ in range(7):
                    next(it)
                got[name]["eighth"].append(time.perf_counter() - t)
                it.close()
            finally:
                tb.take_groups = ramped
    return {"rows": n, "repeats": repeats,
            **{f"{k}_{w}_s": float(np.median(v[w])) for k, v in got.items() for w in v}}


def _sft_table(n: int, work: Path) -> Any:
    """An Iceberg table of ``n`` rows: ``id``, ``input_ids`` of synthetic lengths."""
    import pyarrow as pa
    from pyiceberg.catalog.sql import SqlCatalog

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
    return table


def _guarantee_table(figures: dict[str, Any]) -> None:
    rows = []
    for name, fig in figures.items():
        if name.startswith("sq"):
            cells = ["{over} of {steps}, p95 {p95:.3f}, max {max:.3f}".format(**fig[f"w{w}"])
                     for w in WORLD_SIZES]
            rows.append([f"{name} (true sum of squares)", "-"] + cells)
            continue
        cells = ["{over} of {steps}, max {max:.3f} (band {band_max:.3f})".format(**fig[f"w{w}"])
                 for w in WORLD_SIZES]
        rows.append([f"{name} ({fig['rows']:,} rows)",
                     f"{100 * fig['tail_share']:.1f} %, {fig['alone_batches']} alone"] + cells)
    common.print_table(f"steps over 10% of true tokens, drop_last, from the start (T = {BUDGET})",
                       ["shape, source", "tail"] + [f"W = {w}" for w in WORLD_SIZES], rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--plan-rows", type=int, nargs="+", default=[10_000_000, 100_000_000])
    ap.add_argument("--planning-only", action="store_true",
                    help="the planner figures alone (no cluster, no throughput)")
    ap.add_argument("--first-batch", type=int, default=0, metavar="ROWS",
                    help="only the time to the first batch, ramped takes against "
                         "~64Ki-row ones, on a LocalCluster of ROWS rows")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    if args.first_batch:
        with tempfile.TemporaryDirectory(prefix="icefloe-token-bench-") as tmp:
            fb = first_batch(args.first_batch, 2 if args.quick else 5, Path(tmp))
        common.print_table(
            f"time to a token-budget epoch's batches (T = {BUDGET}, {fb['rows']:,} rows, "
            f"prefetch 2, median of {fb['repeats']})",
            ["seconds", "before: ~64Ki-row takes", "now: ramped from one batch"],
            [[w, f"{fb[f'before_{w}_s']:.3f}", f"{fb[f'now_{w}_s']:.3f}"]
             for w in ("first", "eighth")])
        if args.out is not None:
            args.out.mkdir(parents=True, exist_ok=True)
            (args.out / f"{NAME}_first_batch.json").write_text(json.dumps(fb, indent=1))
        return 0
    repeats = 2 if args.quick else 3
    result: dict[str, Any] = {"name": NAME, "machine": common.machine()}
    result["balance"] = balance_and_padding(synthetic_lengths(1_000_000 if args.quick
                                                              else 4_000_000))
    result["guarantee"] = guarantee(1_000_000 if args.quick else 4_000_000,
                                    500_000 if args.quick else 1_000_000)
    _guarantee_table(result["guarantee"])
    result["planning"] = [planning(n, repeats) for n in args.plan_rows]
    if args.planning_only:
        result["throughput"] = {"rows": 0, "rows_per_s": {"token budget": 0, "fixed rows": 0}}
    else:
        with tempfile.TemporaryDirectory(prefix="icefloe-token-bench-") as tmp:
            result["throughput"] = throughput(100_000 if args.quick else 400_000, repeats,
                                              Path(tmp))
    bal, thr = result["balance"], result["throughput"]
    fixed = f"fixed {bal['fixed_rows']} rows"

    def spread(s: dict[str, Any]) -> str:
        return "{median:.3f} / {p99:.3f} / {max:.3f}, {steps_over_10pct} of {steps}".format(**s)

    rows = [
        ["pad share", f"{100 * bal['pad_share']['token budget']:.2f} %",
         f"{100 * bal['pad_share']['token budget, codes']:.2f} %",
         f"{100 * bal['pad_share'][fixed]:.1f} %"],
        ["per-step token spread, 8 ranks: median / p99 / max, steps over 10 %",
         spread(bal["spread_8_ranks"]["token budget"]),
         spread(bal["spread_8_ranks"]["token budget, codes"]),
         spread(bal["spread_8_ranks"][fixed])],
        [f"batches ({bal['rows']:,} rows)", str(bal["batches"]["token budget"]),
         str(bal["batches"]["token budget, codes"]), "-"],
        [f"epoch, rows/s ({thr['rows']} rows)", f"{thr['rows_per_s']['token budget']:.0f}", "-",
         f"{thr['rows_per_s']['fixed rows']:.0f}"],
    ]
    for p in result["planning"]:
        def fig(k: str, p: dict[str, Any] = p) -> str:
            return (f"{p[k]['plan_s_median']:.2f} s ({p[k]['plan_cpu_s_median']:.2f} CPU), "
                    f"peak {p[k]['peak_bytes'] / 1e6:.0f} MB, "
                    f"kept {p[k]['held_bytes'] / 1e6:.0f} MB")
        rows.append([f"planning {p['rows']:,} rows (2-byte lengths)",
                     fig("exact lengths"), "", "-"])
        rows.append([f"planning {p['rows']:,} rows from codes (coded once: "
                     f"{p['coding']['cpu_s']:.2f} CPU s, peak "
                     f"{p['coding']['peak_bytes'] / 1e6:.0f} MB)",
                     "", fig("codes"), "-"])
        take = p["first_take"]
        exact = p["first_take_exact"]
        rows.append([f"reading {p['rows']:,} rows: a consumer's row ids, rows/s",
                     f"a take: {exact['rows'] / exact['s']:,.0f}",
                     f"a take: {take['rows'] / take['s']:,.0f}; a pass of "
                     f"{take['pass_rows']:,}: {take['pass_rows'] / take['pass_s']:,.0f}", "-"])
    result["table"] = common.print_table(
        f"token-budget batches (T = {BUDGET}) vs fixed-size batches of the same mean rows",
        ["figure", "token budget", "token budget, codes", fixed], rows)
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / f"{NAME}.json").write_text(json.dumps(result, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
