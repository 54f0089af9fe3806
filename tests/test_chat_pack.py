"""The chat column packed with its labels, end to end (issue 45, items 1, 3
and 4, the issue's own interface): an Alpaca instruction table (`alpaca`,
instruction/input/output columns) and a `messages` table (`chatml`, the real
Qwen2 vocabulary) loaded through LocalCluster with

    {"columns": [{"name": "input_ids", "chat": {...}}],
     "pack": {"columns": ["input_ids", "labels"], "seq_len": S, "position_ids": True}}

and read with `icefloe.torch.CacheDataset` as `[B, S]` tensors. The
reference is the unpacked copy of the same chat column (itself equal to
transformers: tests/test_chat.py) run through transformers'
`DataCollatorWithFlattening`: `concat` equals its flattened row cut into rows
of S; `ffd` holds each of its documents whole, once, and a small Llama fed a
packed batch attends within each document."""

from __future__ import annotations

import os
import random

import numpy as np
import pyarrow as pa
import pytest
from fetch_tokenizers import llama3
from iceberg_util import Warehouse

import icefloe

os.environ.setdefault("HF_HUB_OFFLINE", "1")
torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

SEED = 45
SEQ_LEN = 256
WORDS = ("the of and to in is that for it as with was on be by this are from or an at which "
         "data model train token response instruction input output explain write list give "
         "describe summarize translate café naïve 東京 서울 ελληνικά 👍 3.14 $100 `code`").split()


def text(rng: random.Random, median_words: float, sigma: float = 0.8) -> str:
    n = max(1, int(rng.lognormvariate(np.log(median_words), sigma)))
    return " ".join(rng.choice(WORDS) for _ in range(n))


def alpaca_rows(n: int, rng: random.Random) -> list[dict]:
    """Alpaca-shaped rows: an instruction, an input in about 40% of them, a
    response with a long tail (a few documents longer than SEQ_LEN), and a
    few whose prompt alone fills max_tokens (dropped: no trained token)."""
    rows = [{"instruction": text(rng, 12), "input": text(rng, 10) if rng.random() < 0.4 else "",
             "output": text(rng, 40, 1.0)} for _ in range(n)]
    for k in range(0, n, 50):
        rows[k]["instruction"] = text(rng, 400, 0.01)
    return rows


def conversations(n: int, rng: random.Random) -> list[list[dict]]:
    out = []
    for _ in range(n):
        turns = [{"role": "system", "content": text(rng, 8)}] if rng.random() < 0.5 else []
        for _ in range(rng.randint(1, 3)):
            turns += [{"role": "user", "content": text(rng, 15)},
                      {"role": "assistant", "content": text(rng, 30, 1.0)}]
        out.append(turns)
    return out


def collated(ids: list[list[int]], labels: list[list[int]]) -> dict[str, list[int]]:
    """DataCollatorWithFlattening's one flattened row for these documents."""
    features = [{"input_ids": i, "labels": lab} for i, lab in zip(ids, labels, strict=True)]
    flat = transformers.DataCollatorWithFlattening(return_tensors="np")(features)
    return {name: flat[name][0].tolist() for name in ("input_ids", "labels", "position_ids")}


def documents(packed: dict[str, np.ndarray]) -> list[tuple[list[int], list[int]]]:
    """The documents of packed rows (each row starting at a document), split
    at position 0, padding left out."""
    found = []
    for r in range(len(packed["input_ids"])):
        n = int(packed["attention_mask"][r].sum())
        assert packed["attention_mask"][r][:n].all(), "padding only at the end of a row"
        pos = packed["position_ids"][r]
        starts = [k for k in range(n) if pos[k] == 0] + [n]
        for a, b in zip(starts, starts[1:], strict=False):
            assert pos[a:b].tolist() == list(range(b - a))
            found.append((packed["input_ids"][r][a:b].tolist(),
                          packed["labels"][r][a:b].tolist()))
    return found


def attends_within_documents(packed: dict[str, np.ndarray], rows: int = 2) -> None:
    """A transformers model (a tiny random Llama, sdpa) given a packed batch's
    input_ids and position_ids, without the attention_mask and the KV cache,
    computes each document's logits as it does for the document alone; given
    the mask, a document after the first in its row attends to those before
    it (why a concat copy has no mask; docs/transforms.md)."""
    config = transformers.LlamaConfig(vocab_size=152_000, hidden_size=16, intermediate_size=32,
                                      num_hidden_layers=1, num_attention_heads=2,
                                      num_key_value_heads=1, attn_implementation="sdpa")
    torch.manual_seed(SEED)
    model = transformers.LlamaForCausalLM(config).eval()
    ids = torch.from_numpy(packed["input_ids"][:rows]).long()
    pos = torch.from_numpy(packed["position_ids"][:rows]).long()
    mask = torch.from_numpy(packed["attention_mask"][:rows]).long()
    with torch.no_grad():
        free = model(input_ids=ids, position_ids=pos, use_cache=False).logits
        masked = model(input_ids=ids, position_ids=pos, attention_mask=mask,
                       use_cache=False).logits
        later = 0
        for r in range(rows):
            n = int(mask[r].sum())
            starts = [k for k in range(n) if pos[r, k] == 0] + [n]
            for a, b in zip(starts, starts[1:], strict=False):
                alone = model(input_ids=ids[r:r + 1, a:b]).logits[0]
                assert torch.allclose(free[r, a:b], alone, atol=1e-5), (r, a, b)
                if a > 0:
                    later += 1
                    assert not torch.allclose(masked[r, a:b], alone, atol=1e-5), (r, a, b)
    assert later > 0


def read_tensors(head_uri: str, name: str, columns: set[str]) -> dict[str, np.ndarray]:
    """Every row of `name` through CacheDataset, in one order (by ids), each
    batch exactly `columns`, each a [B, S] tensor, int32 (the mask int8)."""
    from icefloe.torch import CacheDataset

    got: dict[str, list] = {}
    for b in CacheDataset(head_uri, name, batch_size=8, drop_last=False, seed=SEED):
        assert set(b) == columns, sorted(b)
        n = len(b["input_ids"])
        for column in columns:
            dtype = torch.int8 if column == "attention_mask" else torch.int32
            assert b[column].shape == (n, SEQ_LEN) and b[column].dtype == dtype, column
            got.setdefault(column, []).append(b[column].numpy())
    out = {k: np.concatenate(v) for k, v in got.items()}
    order = np.lexsort(out["input_ids"].T[::-1])
    return {k: v[order] for k, v in out.items()}


def check_packed_like_the_collator(client, head_uri: str, name: str, table: pa.Table,
                                   chat: dict) -> None:
    """`name` loaded packed by concat and by ffd; both against the collator
    run on the unpacked copy of the same chat column."""
    rows = client.load(f"{name}_rows", table.metadata_location, transform={
        "keep": ["id"], "columns": [{"name": "input_ids", "chat": chat}]})
    unpacked = client.read(f"{name}_rows").sort_by("id")  # one file: one task, row order
    ids, labels = unpacked["input_ids"].to_pylist(), unpacked["labels"].to_pylist()
    dropped = rows["scan"]["transform_rows_dropped"]
    flat = collated(ids, labels)
    cut = len(flat["input_ids"]) // SEQ_LEN
    assert cut > 10 and dropped > 0 and any(len(i) > SEQ_LEN for i in ids)

    # concat: exactly the collator's row cut into rows of SEQ_LEN (the tail dropped).
    spec = {"columns": [{"name": "input_ids", "chat": chat}],
            "pack": {"columns": ["input_ids", "labels"], "seq_len": SEQ_LEN,
                     "position_ids": True}}
    desc = client.load(f"{name}_concat", table.metadata_location, transform=spec)
    assert desc["scan"]["transform_rows_dropped"] == dropped
    packed = client.read(f"{name}_concat")
    assert packed.column_names == ["input_ids", "labels", "position_ids"]
    for column in ("input_ids", "labels", "position_ids"):
        want = np.array(flat[column][:cut * SEQ_LEN]).reshape(cut, SEQ_LEN)
        ours = np.array(packed[column].to_pylist())
        bad = [r for r in range(cut) if (ours[r] != want[r]).any()] if ours.shape == want.shape \
            else ["shape", ours.shape, want.shape]
        assert not bad, f"{name} concat {column}: rows {bad[:5]} differ from the collator's"
    # No attention_mask: concat rows hold no padding, and transformers finds
    # the documents in position_ids only when attention_mask is None (an
    # all-ones mask would let every token attend across document boundaries).
    tensors = read_tensors(head_uri, f"{name}_concat", {"input_ids", "labels", "position_ids"})
    ours = {c: np.array(packed[c].to_pylist()) for c in ("input_ids", "labels", "position_ids")}
    order = np.lexsort(ours["input_ids"].T[::-1])
    for column, values in ours.items():
        assert (tensors[column] == values[order]).all(), column

    # ffd: every document whole and once, its first label -100, padding masked.
    spec["pack"]["strategy"] = "ffd"
    spec["pack"]["overlong"] = "drop"
    desc = client.load(f"{name}_ffd", table.metadata_location, transform=spec)
    tensors = read_tensors(head_uri, f"{name}_ffd",
                           {"input_ids", "labels", "position_ids", "attention_mask"})
    mask = tensors["attention_mask"].astype(bool)
    assert (tensors["labels"][~mask] == -100).all() and (tensors["position_ids"][~mask] == 0).all()
    want = [(i, [-100] + lab[1:]) for i, lab in zip(ids, labels, strict=True) if len(i) <= SEQ_LEN]
    assert sorted(documents(tensors)) == sorted(want)
    attends_within_documents(tensors)
    scan = desc["scan"]
    assert scan["transform_rows_dropped"] == dropped
    assert scan["pack_overlong_dropped"] == sum(len(i) > SEQ_LEN for i in ids)
    assert scan["pack_pad_tokens"] == int((~mask).sum())
    print(f"\n{name}: {len(ids)} documents ({dropped} rows dropped), {cut} concat rows, "
          f"{len(mask)} ffd rows, ffd pad share {scan['pack_pad_tokens'] / mask.size:.2%}")


def test_alpaca_chat_column_packed_with_labels_equals_the_collator(tmp_path):
    rng = random.Random(SEED)
    rows = alpaca_rows(400, rng)
    data = pa.table({"id": pa.array(range(len(rows)), pa.int64()),
                     **{k: pa.array([r[k] for r in rows], pa.string())
                        for k in ("instruction", "input", "output")}})
    table = Warehouse(tmp_path / "wh").create("alpaca", data)
    chat = {"template": "alpaca", "instruction": "instruction", "input": "input",
            "output": "output", "model": str(llama3()), "bos": "<|begin_of_text|>",
            "eos": "<|end_of_text|>", "labels": "labels", "train_on": "assistant",
            "max_tokens": 400}
    with icefloe.LocalCluster(num_nodes=1, log_dir=tmp_path / "logs") as cluster, \
            cluster.client() as client:
        check_packed_like_the_collator(client, cluster.head_uri, "alpaca", table, chat)


def test_chatml_messages_packed_with_labels_equals_the_collator(tmp_path):
    from icefloe_demo.gguf_tokenizer import qwen2

    rng = random.Random(SEED + 1)
    rows = conversations(300, rng)
    for k in range(0, len(rows), 60):  # ends with the user: dropped
        rows[k] = rows[k][:-1]
    turn = pa.struct([("role", pa.string()), ("content", pa.string())])
    data = pa.table({"id": pa.array(range(len(rows)), pa.int64()),
                     "messages": pa.array(rows, pa.list_(turn))})
    table = Warehouse(tmp_path / "wh").create("chats", data)
    chat = {"template": "chatml", "messages": "messages", "model": str(qwen2())}
    with icefloe.LocalCluster(num_nodes=1, log_dir=tmp_path / "logs") as cluster, \
            cluster.client() as client:
        check_packed_like_the_collator(client, cluster.head_uri, "chatml", table, chat)
