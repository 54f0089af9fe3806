"""Weighted mixtures (issue 46): how closely each window of 100 batches keeps
the weights, in rows and in tokens, and an epoch's throughput against one
dataset, side by side in one run.

Three tokenized sources whose rows differ in length (web ~60 tokens, code
~200, math ~30, lognormal), weights 0.6 / 0.3 / 0.1, read by
``Client.iter_epoch`` with ``mix_by="rows"`` and ``mix_by="tokens"``, each
batch mixed or (``per_batch``) one source's; the
single-dataset baseline reads web alone with the same batch size and number
of batches. The token-budget variants (``batch_tokens``, docs/epochs.md
section 7, "Over a mixture") read the same sources with mixed batches
(``varlen``: each source its share of the budget) and ``per_batch`` (one
source a step, padded within the budget), against web alone with the same
budget; their pad share is 1 - tokens / (rows x longest row), summed over
the batches. Variants alternate over the repeats; medians are reported.
For the token-budget variants also the time to the first batch: of the
repeat's epoch 0 (a seed of its own: every source epoch planned afresh;
the row lengths are fetched in the first repeat only) and, right after it, of
epoch 1 (the same seed: what a process that reads epoch after epoch with
``iter_epoch`` waits at each epoch's start).

    .venv/bin/python benchmarks/mixture.py [--quick] [--out results/mixture.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

import icefloe

WEIGHTS = {"web": 0.6, "code": 0.3, "math": 0.1}
MEAN_TOKENS = {"web": 60, "code": 200, "math": 30}
WINDOW = 100  # batches
BATCH_TOKENS = 16384  # the token-budget variants' T (code's share, ~4900, is 3x its longest row)


def _source(code: int, rows: int, mean: int, rng: np.random.Generator) -> pa.Table:
    lengths = np.clip(rng.lognormal(np.log(mean), 0.6, rows), 1, 8 * mean).astype(np.int32)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    values = rng.integers(0, 32000, int(offsets[-1]), dtype=np.int32)
    return pa.table({"src": pa.array(np.full(rows, code, np.int8)),
                     "x": rng.standard_normal(rows).astype(np.float32),
                     "tok": pa.ListArray.from_arrays(pa.array(offsets), pa.array(values))})


def _tables(root: Path, rows: dict[str, int]) -> dict[str, str]:
    from pyiceberg.catalog.sql import SqlCatalog

    catalog = SqlCatalog("bench", uri=f"sqlite:///{root}/catalog.db",
                         warehouse=f"file://{root}/wh")
    catalog.create_namespace("db")
    rng = np.random.default_rng(0)
    out = {}
    for code, name in enumerate(WEIGHTS):
        data = _source(code, rows[name], MEAN_TOKENS[name], rng)
        table = catalog.create_table(f"db.{name}", schema=data.schema)
        table.append(data)
        out[name] = table.metadata_location
    return out


def _read(client: icefloe.Client, source, batch_size: int | None, steps: int,
          **kw) -> tuple[float, np.ndarray, np.ndarray, float]:
    """Seconds for ``steps`` batches, per batch the rows and tokens of each
    source (batches x sources), and the batches' padded tokens (rows x
    longest row, summed)."""
    rows = np.zeros((steps, len(WEIGHTS)))
    tokens = np.zeros((steps, len(WEIGHTS)))
    padded = 0.0
    i = -1
    t0 = time.perf_counter()
    for i, batch in enumerate(client.iter_epoch(source, batch_size=batch_size, **kw)):
        if i == steps:
            i -= 1
            break
        src = batch["src"].to_numpy()
        lengths = pc.list_value_length(batch["tok"]).to_numpy()
        rows[i] = np.bincount(src, minlength=len(WEIGHTS))
        tokens[i] = np.bincount(src, weights=lengths, minlength=len(WEIGHTS))
        padded += len(lengths) * float(lengths.max())
    seconds = time.perf_counter() - t0
    return seconds, rows[:i + 1], tokens[:i + 1], padded


def _first_batch_s(client: icefloe.Client, source, **kw) -> tuple[float, float]:
    """Seconds from asking for an epoch to its first batch, and the CPU
    seconds this process spent meanwhile (planning, mostly: steadier than
    the wall time on a shared machine)."""
    t0, c0 = time.perf_counter(), time.process_time()
    batches = client.iter_epoch(source, **kw)
    next(batches)
    seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    batches.close()
    return seconds, cpu


def worst_window(counts: np.ndarray) -> float:
    """The largest |share - weight| of any source over any WINDOW consecutive
    batches (counts: batches x sources)."""
    weights = np.array(list(WEIGHTS.values())) / sum(WEIGHTS.values())
    cum = np.concatenate([np.zeros((1, counts.shape[1])), np.cumsum(counts, axis=0)])
    windows = cum[WINDOW:] - cum[:-WINDOW]
    shares = windows / windows.sum(axis=1, keepdims=True)
    return float(np.abs(shares - weights).max())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="smaller sources, 2 repeats")
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=None)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    scale = 1 if args.quick else 4
    rows = {"web": 100_000 * scale, "code": 40_000 * scale, "math": 10_000 * scale}
    repeats = args.repeats or (2 if args.quick else 3)
    b = args.batch_size
    with tempfile.TemporaryDirectory(prefix="icefloe-mixture-") as tmp:
        root = Path(tmp)
        locations = _tables(root, rows)
        with icefloe.LocalCluster(num_nodes=2, log_dir=root / "logs") as cluster, \
                cluster.client() as client:
            for name, location in locations.items():
                client.load(name, location)
            # As many batches as the tokens mixture's epoch (one pass of web).
            steps = min(rows["web"] // b, 2000)
            budget = {"batch_tokens": BATCH_TOKENS, "token_column": "tok"}
            variants = {
                "single (web)": ("web", {}),
                "mixture, rows": (WEIGHTS, {"mix_by": "rows", "epoch_total": steps * b}),
                "mixture, tokens": (WEIGHTS, {"mix_by": "tokens", "token_column": "tok",
                                              "epoch_source": "web"}),
                "per_batch, rows": (WEIGHTS, {"per_batch": True, "epoch_total": steps * b}),
                "per_batch, tokens": (WEIGHTS, {"per_batch": True, "mix_by": "tokens",
                                                "token_column": "tok", "epoch_source": "web"}),
                "budget, single (web)": ("web", budget),
                "budget, mixed": (WEIGHTS, {**budget, "varlen": True}),
                "budget, per_batch": (WEIGHTS, {**budget, "per_batch": True}),
            }
            seconds: dict[str, list[float]] = {v: [] for v in variants}
            firsts: dict[str, list[tuple[tuple[float, float], ...]]] = {v: [] for v in variants}
            shares: dict[str, dict[str, float]] = {}
            for r in range(repeats):
                for v, (source, kw) in variants.items():
                    size = None if "batch_tokens" in kw else b
                    if "batch_tokens" in kw:  # a seed of its own: the read below plans its own
                        first = _first_batch_s(client, source, seed=1000 + r, **kw)
                        again = _first_batch_s(client, source, seed=1000 + r, epoch=1, **kw)
                        firsts[v].append((first, again))
                    s, per_rows, per_tokens, padded = _read(client, source, size, steps,
                                                            seed=r, **kw)
                    seconds[v].append(s)
                    n = len(per_rows)
                    shares[v] = {"batches": n, "rows": int(per_rows.sum()),
                                 "pad_share": 1 - float(per_tokens.sum()) / padded,
                                 "worst_rows_pp": 100 * worst_window(per_rows),
                                 "worst_tokens_pp": 100 * worst_window(per_tokens)}
    result = {"batch_size": b, "batch_tokens": BATCH_TOKENS, "rows": rows, "weights": WEIGHTS,
              "mean_tokens": MEAN_TOKENS, "window_batches": WINDOW, "repeats": repeats,
              "variants": {}}
    print(f"batch {b} (budget variants: batch_tokens {BATCH_TOKENS}), windows of {WINDOW} "
          f"batches, {repeats} repeats (median)")
    print(f"{'variant':20} {'batches':>7} {'rows/s':>10} {'vs single':>9} {'pad share':>9} "
          f"{'worst rows pp':>13} {'worst tokens pp':>15}")
    for v in variants:
        # Each variant against the single dataset read the same way.
        base_name = "budget, single (web)" if v.startswith("budget") else "single (web)"
        base = statistics.median(seconds[base_name])
        med = statistics.median(seconds[v])
        line = {**shares[v], "seconds": med, "rows_per_s": shares[v]["rows"] / med,
                "vs_single": base / med * shares[v]["rows"] / shares[base_name]["rows"]}
        if firsts[v]:
            for key, k in (("first_batch", 0), ("next_epoch_first_batch", 1)):
                line[f"{key}_s"] = statistics.median(f[k][0] for f in firsts[v])
                line[f"{key}_cpu_s"] = statistics.median(f[k][1] for f in firsts[v])
        result["variants"][v] = line
        if v.endswith("single (web)"):  # one source: no weights to keep
            line.pop("worst_rows_pp")
            line.pop("worst_tokens_pp")
        worst = (f"{'-':>13} {'-':>15}" if "worst_rows_pp" not in line else
                 f"{line['worst_rows_pp']:>13.2f} {line['worst_tokens_pp']:>15.2f}")
        print(f"{v:20} {line['batches']:>7} {line['rows_per_s']:>10,.0f} "
              f"{line['vs_single']:>9.2f} {100 * line['pad_share']:>8.1f}% {worst}")
    print("time to the first batch, s (CPU s), median: epoch 0 of a new seed / epoch 1 after it")
    for v, line in result["variants"].items():
        if "first_batch_s" in line:
            print(f"  {v:20} {line['first_batch_s']:.3f} ({line['first_batch_cpu_s']:.3f}) / "
                  f"{line['next_epoch_first_batch_s']:.3f} "
                  f"({line['next_epoch_first_batch_cpu_s']:.3f})")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
