"""The review demo's packed Llama-3 copy (issue 43, "a packed Llama-3 copy of
the same table, for the LLM runtimes"): the same review table loaded a
second time, its text tokenized on the nodes with Llama-3's tokenizer.json
and packed into rows of exactly ``--seq-len`` tokens, and a small causal
language model trained over it, fed two ways side by side:

a. the baseline, as a user of Kubeflow's LLM runtimes writes it: Parquet
   read with pyarrow, tokenized with the ``tokenizers`` package (the same
   file, BOS, truncated to ``--seq-len``) and packed in Python (``Packer``)
   in ``--workers`` DataLoader workers, every epoch;
b. icefloe: ``CacheDataset`` over the packed copy: ``input_ids``,
   ``labels`` and ``position_ids`` as ``[B, seq_len]`` tensors without a copy.

The tokenizer is rebuilt from llama.cpp's GGUF vocabulary, fetched with
``pip download`` of the pinned llama-cpp-python sdist and cached
(``icefloe_demo.gguf_tokenizer.llama3_bpe``); where it cannot be fetched the
demo says so and skips this copy only.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from .model_store import read_model, store_model
from .numeric import (
    ParquetDataset,
    encoder_layers,
    init_rank,
    on_device,
    train_and_report,
)

DATASET = "reviews_llama3"
COLUMNS = ["input_ids", "labels", "position_ids"]
# The model's embedding and output layer fold Llama-3's 128,256 ids into this
# many buckets (id mod LM_BUCKETS; the reviews use about 240 distinct ids, a
# few of which share a bucket): a 128K-way output layer would make the CPU
# step, not the input, all this demo shows (4,096 buckets took about 5x the
# step time of 1,024 on the busy 2-core build machine). The input is Llama-3's ids all the same.
LM_BUCKETS = 1024
LM = {"dim": 32, "heads": 2, "layers": 2}


def llama3_tokenizer() -> Path | None:
    """The path of Llama-3's tokenizer.json (rebuilt from llama.cpp's GGUF
    vocabulary, fetched once through pip and cached), or None after saying
    why it cannot be had."""
    from .gguf_tokenizer import llama3_bpe

    try:
        return llama3_bpe()
    except Exception as e:  # noqa: BLE001 - offline: say so, skip only this copy
        # The consequence first: pip's reason may run over several lines.
        print(f"the Llama-3 tokenizer.json cannot be fetched, skipping the packed Llama-3 "
              f"copy: {e}")
        return None


def stored_tokenizer(wanted: bool, root: Path, s3: dict | None) -> str | None:
    """Llama-3's tokenizer.json stored beside the table (its location, as
    nodes and workers read it), or None where not ``wanted`` or where it
    cannot be fetched (said)."""
    path = llama3_tokenizer() if wanted else None
    if path is None:
        return None
    where = store_model(path.read_bytes(), root, s3, "llama3/tokenizer.json")
    print(f"packed copy's tokenizer: Llama-3 tokenizer.json (rebuilt from llama.cpp's GGUF "
          f"vocabulary) from {path}, stored at {where}")
    return where


def packed_spec(model: str, seq_len: int) -> dict[str, Any]:
    """The nodes' work (docs/transforms.md): ``text`` tokenized with the
    tokenizer.json's own special tokens (Llama-3: BOS), cut to ``seq_len``,
    into ``input_ids`` and the aligned ``labels``; both packed end to end
    (``concat``, the tail of each scan task dropped) into rows of
    ``seq_len`` with ``position_ids``; pack sets each document's first label
    to -100."""
    tokenize = {"column": "text", "model": model, "max_tokens": seq_len}
    return {"columns": [{"name": "input_ids", "tokenize": tokenize},
                        {"name": "labels", "tokenize": tokenize}],
            "pack": {"columns": ["input_ids", "labels"], "seq_len": seq_len,
                     "position_ids": True}}


class Packer:
    """The nodes' ``tokenize`` + ``pack`` in Python, for the baseline: texts
    in (``add``), rows of ``seq_len`` out (``take``): input_ids, labels (the
    ids, -100 at each document's first token) and position_ids (0 at each
    document), documents end to end and cut anywhere, as transformers'
    ``DataCollatorWithFlattening`` over the documents cut into rows."""

    def __init__(self, model: bytes, seq_len: int) -> None:
        import os

        # One thread: the DataLoader workers already use every core.
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        import tokenizers

        self.seq_len = seq_len
        self.tok = tokenizers.Tokenizer.from_str(model.decode())
        self.tok.no_padding()
        self.tok.enable_truncation(max_length=seq_len)
        self.pending = {name: np.empty(0, np.int32) for name in COLUMNS}

    def add(self, texts: list[str]) -> None:
        docs = [e.ids for e in self.tok.encode_batch(texts)]
        lengths = np.array([len(d) for d in docs], np.int64)
        ids = np.fromiter((i for d in docs for i in d), np.int32, int(lengths.sum()))
        starts = np.cumsum(lengths) - lengths
        positions = np.arange(len(ids), dtype=np.int64) - np.repeat(starts, lengths)
        labels = ids.copy()
        labels[starts[lengths > 0]] = -100
        for name, new in (("input_ids", ids), ("labels", labels),
                          ("position_ids", positions.astype(np.int32))):
            self.pending[name] = np.concatenate([self.pending[name], new])

    def take(self, rows: int) -> dict[str, torch.Tensor] | None:
        """The next ``rows`` rows as ``[rows, seq_len]`` int32 tensors, or
        None until that many tokens are pending."""
        n = rows * self.seq_len
        if len(self.pending["input_ids"]) < n:
            return None
        out = {}
        for name, values in self.pending.items():
            out[name] = torch.from_numpy(values[:n].reshape(rows, self.seq_len).copy())
            self.pending[name] = values[n:]
        return out


class ParquetPackedDataset(ParquetDataset):
    """The baseline: each epoch reads the table's text from Parquet with
    pyarrow (files split across ranks x workers, a per-epoch shuffled file
    order), tokenizes and packs it in Python (``Packer``) and yields batches
    of ``batch_size`` packed rows; each worker's last partial batch is
    dropped."""

    def __init__(self, files: list[str], batch_size: int, s3: dict | None, model: str,
                 seq_len: int) -> None:
        # Text is read in batches of documents, about a packed batch's tokens' worth.
        super().__init__(files, max(16, batch_size * seq_len // 64), s3)
        self.rows, self.model, self.seq_len = batch_size, model, seq_len

    def __iter__(self):
        packer = Packer(read_model(self.model, self.s3), self.seq_len)
        for batch in self._batches(["text"]):
            packer.add(batch.column("text").to_pylist())
            while (rows := packer.take(self.rows)) is not None:
                yield rows


class TinyCausalLM(torch.nn.Module):
    """A small causal transformer over packed rows: token (folded into
    LM_BUCKETS) and position embeddings (``position_ids``), ``layers``
    pre-norm layers where each token sees the tokens before it in its own
    document (documents told apart by position_ids restarting at 0), a
    linear head over the buckets."""

    def __init__(self, max_len: int, dim: int = 32, heads: int = 2, layers: int = 2) -> None:
        super().__init__()
        self.heads = heads
        self.embed = torch.nn.Embedding(LM_BUCKETS, dim)
        self.position = torch.nn.Embedding(max_len, dim)
        self.encoder = encoder_layers(dim, heads, layers)
        self.head = torch.nn.Linear(dim, LM_BUCKETS)

    def forward(self, ids: torch.Tensor, position_ids: torch.Tensor) -> torch.Tensor:
        n = ids.shape[1]
        document = torch.cumsum(position_ids == 0, dim=1)
        causal = torch.ones(n, n, dtype=torch.bool, device=ids.device).tril()
        allowed = (document[:, :, None] == document[:, None, :]) & causal
        mask = (~allowed).repeat_interleave(self.heads, dim=0)  # True: may not attend
        x = self.embed(ids % LM_BUCKETS) + self.position(position_ids)
        return self.head(self.encoder(x, mask=mask))


def _make_dataset(source: dict, args: dict):
    if source["kind"] == "llama3-icefloe":
        from icefloe.torch import CacheDataset

        return CacheDataset(source["head"], source["dataset"], batch_size=args["batch_size"],
                            seed=0, drop_last=True, columns=COLUMNS)
    return ParquetPackedDataset(source["files"], args["batch_size"], source.get("s3"),
                                args["model"], args["seq_len"])


def train_rank(rank: int, world: int, init: str, source: dict, args: dict, out: str) -> None:
    """One DDP rank over one source: ``epochs`` training epochs (next-token
    loss on the labels; each its first ``steps`` batches, 0: all), then one
    whole epoch of the input alone."""
    device = init_rank(rank, world, init, args["device"])
    model = torch.nn.parallel.DistributedDataParallel(
        TinyCausalLM(args["seq_len"], **LM).to(device))
    opt = torch.optim.AdamW(model.parameters(), lr=2e-3)

    def step(batch: dict[str, Any]) -> float:
        batch = on_device(batch, device)
        logits = model(batch["input_ids"].long(), batch["position_ids"].long())
        labels = batch["labels"].long()
        target = torch.where(labels >= 0, labels % LM_BUCKETS, -100)
        loss = torch.nn.functional.cross_entropy(
            logits[:, :-1].reshape(-1, LM_BUCKETS), target[:, 1:].reshape(-1),
            ignore_index=-100)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.item()

    count = {"rows": lambda b: len(b["input_ids"]), "tokens": lambda b: b["input_ids"].numel()}
    train_and_report(_make_dataset(source, args), model, step, count, source, rank,
                     args["epochs"], out, args["steps"] or None)


def load(client: Any, metadata_location: str, model: str, seq_len: int) -> str:
    """Loads the packed copy; returns what to print about it."""
    start = time.perf_counter()
    desc = client.load(DATASET, metadata_location, transform=packed_spec(model, seq_len))
    scan = desc.get("scan", {})
    docs = f"{scan['pack_documents']:,} reviews, " if "pack_documents" in scan else ""
    return (f"loaded '{DATASET}' (text tokenized on the nodes ({desc['model_kind'][0]}), "
            f"BOS, cut to {seq_len}, packed into rows of {seq_len} tokens with labels and "
            f"position_ids): {docs}{desc['rows']:,} rows, {desc['bytes'] / 1e6:,.1f} MB in "
            f"RAM, {desc['load_seconds']:.2f}s (tokenization and packing included, once; "
            f"{time.perf_counter() - start:.2f}s to the call's return)")


def sources(parquet: dict | None, head: str, workers: int, model: str) -> dict[str, dict]:
    """The packed copy's two sources, keyed by kind: the baseline (from the
    classifier's Parquet source ``parquet``, None with --skip-parquet) and
    icefloe."""
    out: dict[str, dict] = {}
    if parquet is not None:
        out["llama3-s3" if parquet.get("s3") else "llama3-local"] = {**parquet, "model": model}
    out["llama3-icefloe"] = {"head": head, "dataset": DATASET, "workers": workers}
    return out


LABELS = {"llama3-s3": "Parquet from S3 + tokenizing and packing (Llama-3) in DataLoader "
                       "workers",
          "llama3-local": "Parquet on local disk + tokenizing and packing (Llama-3) in "
                          "DataLoader workers",
          "llama3-icefloe": "icefloe (packed Llama-3 copy)"}


def setup_text(srcs: dict[str, dict], seq_len: int, batch_rows: int, epochs: int,
               steps: int) -> str:
    each = f"the first {steps} steps of each" if steps else "whole epochs"
    lines = [f"packed Llama-3 copy: causal LM ({LM['layers']} layers, d={LM['dim']}, "
             f"{LM['heads']} heads, ids folded into {LM_BUCKETS} buckets), batch "
             f"{batch_rows} rows of {seq_len} tokens, {epochs} epochs (the first a warm-up; "
             f"{each}), then a whole epoch of the input alone"]
    for kind, s in srcs.items():
        if kind == "llama3-icefloe":
            how = (f"CacheDataset over the packed copy, window shuffle, {s['workers']} "
                   f"DataLoader workers, [B, {seq_len}] input_ids, labels, position_ids "
                   "without a copy")
        else:
            where = "in S3 (moto on loopback)" if s.get("s3") else "on local disk"
            how = (f"pyarrow.dataset over {len(s['files'])} files {where}, Python tokenizers "
                   f"(Llama-3, BOS, cut to {seq_len}) and packing into rows of {seq_len} "
                   f"in {s['workers']} DataLoader workers per rank")
        lines.append(f"  {kind:<14} {how}")
    return "\n".join(lines)
