"""Pad share of `pack` by concatenation vs first-fit decreasing, side by side
(issue 45, item 6): a pre-tokenized, Alpaca-shaped SFT table (input_ids and
labels; the prompt's labels -100) loaded and packed with labels by each
strategy in one run.

    .venv/bin/python benchmarks/run.py --only pack_labels

Lengths: Alpaca's prompt template (~40 tokens) plus instruction and input
(lognormal, median 20 tokens) and response (lognormal, median 45, a long
tail): mean ~125 tokens a document, a few longer than seq_len. For each
strategy: packed rows, pad share (pad tokens / packed tokens, from describe's
scan figures, checked against the copy's attention_mask), documents cut
across a row boundary (a row that starts inside a document) and dropped, and
the load's seconds. Next fit (documents whole, in row order; computed here,
not a cache mode) is the baseline FFD improves on.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from . import common
from .common import Env

NAME = "pack_labels"
ROWS = 50_000
SEQ_LEN = 2048
FILES = 4
SEED = 45


def _documents(rows: int, seed: int) -> tuple[pa.Table, np.ndarray]:
    rng = np.random.default_rng(seed)
    prompt = 40 + np.maximum(1, rng.lognormal(np.log(20), 0.8, rows)).astype(np.int64)
    response = np.maximum(1, rng.lognormal(np.log(45), 1.0, rows)).astype(np.int64)
    lengths = prompt + response
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    ids = rng.integers(3, 32000, int(offsets[-1]), dtype=np.int32)
    labels = ids.copy()
    for k in range(rows):  # the prompt is not trained
        labels[offsets[k]:offsets[k] + prompt[k]] = -100
    table = pa.table({
        "id": pa.array(np.arange(rows, dtype=np.int64)),
        "input_ids": pa.ListArray.from_arrays(pa.array(offsets), pa.array(ids)),
        "labels": pa.ListArray.from_arrays(pa.array(offsets), pa.array(labels))})
    return table, lengths


def _next_fit_pad_share(lengths: np.ndarray, files: int) -> float:
    """Documents whole, in row order, per file (as a task packs): pad / all."""
    pad = total = 0
    for part in np.array_split(lengths, files):
        used = 0
        for n in part[part <= SEQ_LEN].tolist():
            if used + n > SEQ_LEN:
                pad, total, used = pad + SEQ_LEN - used, total + SEQ_LEN, 0
            used += n
        if used:
            pad, total = pad + SEQ_LEN - used, total + SEQ_LEN
    return pad / total


def run(env: Env) -> dict[str, Any]:
    import icefloe

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from iceberg_util import Warehouse  # tests/ helper

    cfg, log = env.cfg, env.log
    table, lengths = _documents(ROWS, SEED)
    per_file = -(-ROWS // FILES)
    wh = Warehouse(env.log_dir(NAME) / "wh")
    t = wh.catalog.create_table("db.sft", schema=table.schema)
    for start in range(0, ROWS, per_file):  # one append (one file, one task) per slice
        t.append(table.slice(start, per_file))
    log(f"{NAME}: {ROWS:,} documents, {int(lengths.sum()):,} tokens, mean {lengths.mean():.0f}, "
        f"{int((lengths > SEQ_LEN).sum())} longer than {SEQ_LEN}")
    variants = {"concat": {"strategy": "concat", "tail": "pad"},
                "ffd": {"strategy": "ffd"}}
    got: dict[str, dict[str, float]] = {}
    with icefloe.LocalCluster(num_nodes=2, log_dir=env.log_dir(NAME)) as cluster, \
            cluster.client() as client:
        for name, pack in variants.items():
            spec = {"keep": ["input_ids", "labels"],
                    "pack": {"columns": ["input_ids", "labels"], "seq_len": SEQ_LEN,
                             "position_ids": True, **pack}}
            t0 = time.perf_counter()
            client.load(name, t.metadata_location, transform=spec)
            seconds = time.perf_counter() - t0
            scan = client.describe(name)["scan"]
            copy = client.read(name, columns=["attention_mask", "position_ids"])
            mask = copy["attention_mask"].combine_chunks().values.to_numpy()
            starts = copy["position_ids"].combine_chunks().values.to_numpy()[::SEQ_LEN]
            pad = int(scan["pack_pad_tokens"])
            assert pad == int((mask == 0).sum()), (pad, int((mask == 0).sum()))
            rows = scan["pack_rows"]
            got[name] = {"rows": rows, "pad_share": pad / (rows * SEQ_LEN),
                         "cut": int((starts != 0).sum()), "dropped": scan["pack_overlong_dropped"],
                         "split": scan["pack_overlong_split"], "seconds": seconds}
            client.evict(name)
    next_fit = _next_fit_pad_share(lengths, FILES)
    text = common.print_table(
        f"{NAME}: {ROWS:,} Alpaca-shaped documents (mean {lengths.mean():.0f} tokens) in "
        f"{FILES} files, seq_len {SEQ_LEN}, input_ids + labels + position_ids",
        ["strategy", "packed rows", "pad share", "rows starting inside a document",
         "overlong split", "load s"],
        [[k, v["rows"], f"{v['pad_share']:.2%}", v["cut"], v["split"], v["seconds"]]
         for k, v in got.items()]
        + [["next fit (whole documents, row order; computed)", "", f"{next_fit:.2%}", 0, "", ""]])
    log(text)
    targets = [
        common.target("pad share, concat", "report", 0, got["concat"]["pad_share"]),
        common.target("pad share, ffd", "report", 0, got["ffd"]["pad_share"]),
        common.target("pad share, next fit (whole documents)", "report", 0, next_fit),
        common.target("ffd pad share < next fit's", "<", next_fit, got["ffd"]["pad_share"]),
    ]
    result = {"name": NAME, "rows": ROWS, "seq_len": SEQ_LEN, "runs": got,
              "next_fit_pad_share": next_fit, "targets": targets, "table": text}
    common.write_result(cfg, NAME, result)
    return result
