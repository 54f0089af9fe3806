"""Fine-tuning input, in-loop vs cached (issue 45, item 6): an Alpaca-shaped
instruction table (instruction, input in ~40% of rows, output; synthetic
English-like text, lognormal lengths: mean ~150 Llama-3 tokens a rendered
row, a long tail) in 4 files, the real Llama-3 tokenizer.json
(`icefloe_demo.tokenizer_files.llama3()`), side by side in one run, input
alone (no model):

a. **in-loop** (what users do today): a torch DataLoader with 2 workers
   whose collate renders each row with the Alpaca prompt (torchtune's
   `AlpacaToMessages` layout), tokenizes the prompt and the whole text with
   transformers' `PreTrainedTokenizerFast` (one batch call each), builds the
   labels (-100 over the prompt), truncates to `max_tokens`, drops rows left
   without a trained token and pads the batch to its longest row (labels
   -100), 8 rows a batch; timed over the first BASELINE_ROWS rows after the
   first batch (the workers' start and tokenizer load left out);
b. **cached**: the same rows loaded once with the issue's spec (a `chat`
   column, `alpaca`, `max_tokens`, then `pack` of input_ids + labels with
   `position_ids`, seq_len 2048), by `concat` and by `ffd`, each read for
   3 epochs with `CacheDataset` (4 packed rows a batch; the median epoch).

Both count the trained tokens (labels != -100) of each batch in the loop.
Samples/s: rows (documents) a second; trained tokens/s the goal's figure
(>= 20x). Also: the load's seconds (paid once; the first epoch with the
load counted against the in-loop rate), the pad share of each strategy and
the tokens `concat` drops in each task's partial last row (describe's scan
figures), and the rows dropped by truncation (none kept no trained token).

    .venv/bin/python benchmarks/run.py --only sft [--quick]
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from . import common
from .common import Env

NAME = "sft"
SEED = 45
FILES = 4
SEQ_LEN = 2048
MAX_TOKENS = 1024
EPOCHS = 3
BOS, EOS = "<|begin_of_text|>", "<|end_of_text|>"
PROMPT_INPUT = ("Below is an instruction that describes a task, paired with an input that "
                "provides further context. Write a response that appropriately completes the "
                "request.\n\n### Instruction:\n{instruction}\n\n### Input:\n{input}\n\n"
                "### Response:\n")
PROMPT = ("Below is an instruction that describes a task. Write a response that "
          "appropriately completes the request.\n\n### Instruction:\n{instruction}\n\n"
          "### Response:\n")
WORDS = np.array((
    "the of and to a in is that for it as with was on be by this are from or an at which "
    "have not but all can more one were their if will would there what about when some "
    "data model system process example list write explain describe summarize translate "
    "give three ways reduce improve energy water health people time world city language "
    "computer network learning science history music story poem email letter recipe plan "
    "important different simple common following sentence paragraph word number answer "
    "because however therefore also often usually example, result. (for instance) 2023 "
    "42% $15.99 café naïve résumé").split())


def alpaca_table(rows: int, seed: int) -> pa.Table:
    """Alpaca's shape: a short instruction, an input in 40% of rows, a response
    of a few words to a few hundred (lognormal), a few very long ones."""
    rng = np.random.default_rng(seed)

    def texts(median_words: float, sigma: float) -> list[str]:
        lengths = np.maximum(1, rng.lognormal(np.log(median_words), sigma, rows)).astype(int)
        words = WORDS[rng.integers(0, len(WORDS), int(lengths.sum()))]
        ends = np.cumsum(lengths)
        return [" ".join(words[e - n:e]) for e, n in zip(ends, lengths, strict=True)]

    inputs = texts(12, 0.8)
    has_input = rng.random(rows) < 0.4
    return pa.table({
        "id": pa.array(np.arange(rows, dtype=np.int64)),
        "instruction": pa.array(texts(11, 0.5)),
        "input": pa.array([x if h else "" for x, h in zip(inputs, has_input, strict=True)]),
        "output": pa.array(texts(40, 1.0))})


class Render:
    """The in-loop collate: render, tokenize, label, truncate, drop, pad."""

    def __init__(self, model: str, max_tokens: int) -> None:
        self.model, self.max_tokens, self.tok = model, max_tokens, None

    def __call__(self, rows: list[dict]) -> dict[str, Any]:
        import torch
        from transformers import PreTrainedTokenizerFast

        if self.tok is None:  # in the worker
            self.tok = PreTrainedTokenizerFast(tokenizer_file=self.model)
        prompts = [BOS + (PROMPT_INPUT if r["input"] else PROMPT).format(**r) for r in rows]
        whole = [p + r["output"] + EOS for p, r in zip(prompts, rows, strict=True)]
        prompt_ids = self.tok(prompts, add_special_tokens=False)["input_ids"]
        ids = self.tok(whole, add_special_tokens=False)["input_ids"]
        kept = [(i[:self.max_tokens], len(p)) for i, p in zip(ids, prompt_ids, strict=True)
                if len(p) < min(len(i), self.max_tokens)]
        width = max((len(i) for i, _ in kept), default=0)
        out = {"input_ids": torch.zeros(len(kept), width, dtype=torch.int64),
               "labels": torch.full((len(kept), width), -100, dtype=torch.int64),
               "attention_mask": torch.zeros(len(kept), width, dtype=torch.int64)}
        for k, (i, start) in enumerate(kept):
            row = torch.tensor(i)
            out["input_ids"][k, :len(i)] = row
            out["labels"][k, start:len(i)] = row[start:]
            out["attention_mask"][k, :len(i)] = 1
        return out


def in_loop(table: pa.Table, model: str, rows: int) -> dict[str, float]:
    import torch

    data = table.slice(0, rows).select(["instruction", "input", "output"]).to_pylist()
    loader = torch.utils.data.DataLoader(data, batch_size=8, num_workers=2,
                                         collate_fn=Render(model, MAX_TOKENS))
    samples = trained = 0
    t0 = None
    for b in loader:
        if t0 is None:  # the workers' start and tokenizer load left out
            t0 = time.perf_counter()
            continue
        samples += len(b["input_ids"])
        trained += int((b["labels"] != -100).sum())
    seconds = time.perf_counter() - t0
    return {"samples": samples, "trained": trained, "seconds": seconds}


def cached_epochs(head_uri: str, name: str, documents: int) -> dict[str, float]:
    """The median of EPOCHS epochs (each its own shuffle)."""
    from icefloe.torch import CacheDataset

    ds = CacheDataset(head_uri, name, batch_size=4, drop_last=False, seed=SEED)
    seconds = []
    for epoch in range(EPOCHS):
        ds.set_epoch(epoch)
        trained = 0
        t0 = time.perf_counter()
        for b in ds:
            trained += int((b["labels"] != -100).sum())
        seconds.append(time.perf_counter() - t0)
    return {"samples": documents, "trained": trained, "seconds": common.median(seconds)}


def run(env: Env) -> dict[str, Any]:
    import icefloe
    from icefloe_demo.tokenizer_files import llama3

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from iceberg_util import Warehouse  # tests/ helper

    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")  # one thread per worker
    cfg, log = env.cfg, env.log
    rows = 20_000 if cfg.quick else 100_000
    baseline_rows = 2_000 if cfg.quick else 8_000
    model = str(llama3())
    table = alpaca_table(rows, SEED)
    wh = Warehouse(env.log_dir(NAME) / "wh")
    t = wh.catalog.create_table("db.alpaca", schema=table.schema)
    per_file = -(-rows // FILES)
    for start in range(0, rows, per_file):  # one append (one file, one task) per slice
        t.append(table.slice(start, per_file))
    log(f"{NAME}: {rows:,} Alpaca-shaped rows in {FILES} files; in-loop over {baseline_rows:,}")

    got = {"in-loop (DataLoader, 2 workers)": in_loop(table, model, baseline_rows)}
    chat = {"template": "alpaca", "instruction": "instruction", "input": "input",
            "output": "output", "model": model, "bos": BOS, "eos": EOS, "labels": "labels",
            "train_on": "assistant", "max_tokens": MAX_TOKENS}
    loads: dict[str, dict[str, float]] = {}
    with icefloe.LocalCluster(num_nodes=2, log_dir=env.log_dir(NAME)) as cluster, \
            cluster.client() as client:
        for strategy in ("concat", "ffd"):
            spec = {"columns": [{"name": "input_ids", "chat": chat}],
                    "pack": {"columns": ["input_ids", "labels"], "seq_len": SEQ_LEN,
                             "position_ids": True, "strategy": strategy}}
            t0 = time.perf_counter()
            client.load(strategy, t.metadata_location, transform=spec)
            seconds = time.perf_counter() - t0
            scan = client.describe(strategy)["scan"]
            loads[strategy] = {"seconds": seconds, "rows": scan["pack_rows"],
                               "pad_share": scan["pack_pad_tokens"] / (scan["pack_rows"] * SEQ_LEN),
                               "dropped": scan["transform_rows_dropped"],
                               "documents": scan["pack_documents"],
                               "tail_dropped": scan["pack_tail_dropped_tokens"]}
            got[f"cached, pack {strategy} (CacheDataset)"] = cached_epochs(
                cluster.head_uri, strategy, scan["pack_documents"])
            client.evict(strategy)
    base = got["in-loop (DataLoader, 2 workers)"]
    for v in got.values():
        v["samples_per_s"] = v["samples"] / v["seconds"]
        v["trained_per_s"] = v["trained"] / v["seconds"]
        v["per_sample"] = v["trained"] / v["samples"]
    text = common.print_table(
        f"{NAME}: {rows:,} Alpaca-shaped rows, Llama-3 tokenizer, max_tokens {MAX_TOKENS}, "
        f"seq_len {SEQ_LEN}; input alone, same machine, one run",
        ["reader", "samples/s", "trained tokens/s", "trained tokens a sample", "x in-loop"],
        [[k, v["samples_per_s"], v["trained_per_s"], v["per_sample"],
          v["trained_per_s"] / base["trained_per_s"]] for k, v in got.items()])
    log(text)
    for k, v in loads.items():  # the load paid in the first epoch: still ahead?
        epoch = got[f"cached, pack {k} (CacheDataset)"]
        v["first_epoch_x"] = epoch["trained"] / (v["seconds"] + epoch["seconds"]) \
            / base["trained_per_s"]
    loads_text = common.print_table(
        f"{NAME}: the cached copies' loads (render + tokenize + label + pack on 2 nodes, once)",
        ["strategy", "load s", "packed rows", "pad share", "tail tokens dropped",
         "rows dropped (no trained token)", "load + 1 epoch, x in-loop"],
        [[k, v["seconds"], v["rows"], f"{v['pad_share']:.2%}", v["tail_dropped"], v["dropped"],
          v["first_epoch_x"]] for k, v in loads.items()])
    log(loads_text)
    ffd = got["cached, pack ffd (CacheDataset)"]
    targets = [
        common.target("trained tokens/s, cached ffd / in-loop", ">=", 20,
                      ffd["trained_per_s"] / base["trained_per_s"]),
        common.target("pad share, concat", "report", 0, loads["concat"]["pad_share"]),
        common.target("pad share, ffd", "report", 0, loads["ffd"]["pad_share"]),
        common.target("rows dropped by truncation", "report", 0, loads["ffd"]["dropped"]),
    ]
    result = {"name": NAME, "rows": rows, "baseline_rows": baseline_rows, "seq_len": SEQ_LEN,
              "max_tokens": MAX_TOKENS, "readers": got, "loads": loads, "targets": targets,
              "table": text + "\n\n" + loads_text}
    common.write_result(cfg, NAME, result)
    return result
