"""`pack` with labels (issue 45, items 3 and 4): a pre-tokenized SFT table's
aligned `input_ids` and `labels` packed by real servers, against
transformers' DataCollatorWithFlattening on the same documents; first-fit
decreasing keeps every document whole; the tensors CacheDataset yields."""

from __future__ import annotations

import os
import random

import numpy as np
import pyarrow as pa
import pytest
from iceberg_util import Warehouse

import icefloe

os.environ.setdefault("HF_HUB_OFFLINE", "1")
torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

SEED = 45
SEQ_LEN = 64


Rows = list[list[int] | None]


def sft_documents(n: int, seed: int = SEED) -> tuple[Rows, Rows]:
    """Instruction-shaped documents: a prompt (labels -100) then a response
    (labels = ids); lognormal lengths, a few longer than SEQ_LEN, a few empty
    or null rows (no document)."""
    rng = random.Random(seed)
    ids: Rows = []
    labels: Rows = []
    for k in range(n):
        if k % 97 == 5:
            ids.append(None)
            labels.append(None)
            continue
        if k % 89 == 7:
            ids.append([])
            labels.append([])
            continue
        prompt = max(1, int(rng.lognormvariate(2.3, 0.7)))
        response = max(1, int(rng.lognormvariate(2.0, 0.9)))
        doc = [rng.randrange(3, 32000) for _ in range(prompt + response)]
        ids.append(doc)
        labels.append([-100] * prompt + doc[prompt:])
    print(f"seed {seed}: {n} rows, {sum(len(d) > SEQ_LEN for d in ids if d)} longer than {SEQ_LEN}")
    return ids, labels


def sft_table(ids, labels) -> pa.Table:
    return pa.table({"id": pa.array(range(len(ids)), pa.int64()),
                     "input_ids": pa.array(ids, pa.list_(pa.int32())),
                     "labels": pa.array(labels, pa.list_(pa.int32()))})


def collator_rows(ids, labels, seq_len: int) -> dict[str, list[list[int]]]:
    """DataCollatorWithFlattening's one flattened row for these documents, cut
    into rows of seq_len (a partial last row dropped)."""
    from transformers import DataCollatorWithFlattening

    features = [{"input_ids": i, "labels": lab} for i, lab in zip(ids, labels, strict=True) if i]
    flat = DataCollatorWithFlattening(return_tensors="np")(features)
    out = {}
    for name in ("input_ids", "labels", "position_ids"):
        values = flat[name][0]
        rows = len(values) // seq_len
        out[name] = values[:rows * seq_len].reshape(rows, seq_len).tolist()
    return out


def load_packed(client, table, name: str, *, replication: int = 1,
                **pack) -> tuple[pa.Table, dict]:
    """`table` (of sft_table) loaded as `name`, its input_ids and labels packed
    into rows of SEQ_LEN with `pack`'s other settings; the packed rows as the
    client reads them and describe's scan."""
    client.load(name, table.metadata_location, replication=replication, transform={
        "keep": ["input_ids", "labels"],
        "pack": {"columns": ["input_ids", "labels"], "seq_len": SEQ_LEN, **pack}})
    return client.read(name), client.describe(name)["scan"]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("pack")
    with icefloe.LocalCluster(num_nodes=1, log_dir=tmp / "logs") as c:
        yield c, tmp


def test_packed_ids_labels_positions_equal_the_collator_cut_into_rows(cluster):
    c, tmp = cluster
    ids, labels = sft_documents(600)
    t = Warehouse(tmp / "wh1").create("sft", sft_table(ids, labels))  # one file: one task
    with c.client() as client:
        got, _ = load_packed(client, t, "sft_packed", position_ids=True)
    want = collator_rows(ids, labels, SEQ_LEN)
    assert got.column_names == ["input_ids", "labels", "position_ids"]
    assert got.num_rows == len(want["input_ids"]) > 100
    for name in ("input_ids", "labels", "position_ids"):
        ours = got[name].to_pylist()
        bad = [r for r in range(len(ours)) if ours[r] != want[name][r]]
        assert not bad, f"{name}: {len(bad)} rows differ, first {bad[0]}: " \
                        f"ours {ours[bad[0]]} collator {want[name][bad[0]]}"


def test_first_fit_keeps_every_document_whole_and_once_with_padding_masked(cluster):
    c, tmp = cluster
    ids, labels = sft_documents(2000, seed=SEED + 1)
    t = Warehouse(tmp / "wh2").create("sft", sft_table(ids, labels))
    with c.client() as client:
        got, _ = load_packed(client, t, "sft_ffd", position_ids=True, strategy="ffd",
                             overlong="drop", pad=0)
    assert got.column_names == ["input_ids", "labels", "attention_mask", "position_ids"]
    rows = {n: np.array(got[n].to_pylist()) for n in got.column_names}
    mask = rows["attention_mask"].astype(bool)
    assert (rows["input_ids"][~mask] == 0).all() and (rows["labels"][~mask] == -100).all()
    assert (rows["position_ids"][~mask] == 0).all()
    # Each row: whole documents one after another (positions 0, 1, ...), each
    # one's labels as the collator gives them (the first -100).
    found = []
    for r in range(len(got)):
        pos, n = rows["position_ids"][r], int(mask[r].sum())
        assert mask[r][:n].all(), "padding only at the end of a row"
        starts = [k for k in range(n) if pos[k] == 0] + [n]
        for a, b in zip(starts, starts[1:], strict=False):
            assert pos[a:b].tolist() == list(range(b - a))
            found.append((rows["input_ids"][r][a:b].tolist(), rows["labels"][r][a:b].tolist()))
    want = [(i, [-100] + lab[1:]) for i, lab in zip(ids, labels, strict=True)
            if i and len(i) <= SEQ_LEN]
    assert sorted(found) == sorted(want)
    dropped = sum(1 for i in ids if i and len(i) > SEQ_LEN)
    assert dropped > 0
    # Fewer pad tokens than keeping documents whole in arrival order (next fit).
    next_fit, used = 0, 0
    for i, _ in want:
        if used + len(i) > SEQ_LEN:
            next_fit, used = next_fit + SEQ_LEN - used, 0
        used += len(i)
    next_fit += SEQ_LEN - used
    assert int((~mask).sum()) < next_fit


def test_unaligned_columns_are_refused_naming_the_columns_and_row(cluster):
    c, tmp = cluster
    ids, labels = [[1, 2, 3], [4, 5]], [[1, 2, 3], [4, 5, 6]]
    t = Warehouse(tmp / "wh3").create("bad", sft_table(ids, labels))
    with c.client() as client, pytest.raises(icefloe.errors.InvalidArgument) as e:
        load_packed(client, t, "bad", seq_len=8)
    assert "row 1 of the task: 'input_ids' has 2 tokens, 'labels' 3; packed columns must be " \
           "aligned" in str(e.value)


def test_packed_copies_become_zero_copy_tensors(cluster):
    from icefloe.torch import CacheDataset, batch_to_tensors

    c, tmp = cluster
    ids, labels = sft_documents(800, seed=SEED + 2)
    t = Warehouse(tmp / "wh4").create("sft", sft_table(ids, labels))
    with c.client() as client:
        table, _ = load_packed(client, t, "sft_tensors", position_ids=True, strategy="ffd")
        # Each tensor is a view of its Arrow buffer: the same address.
        batch = table.to_batches()[0]
        out = batch_to_tensors(batch)
        for name in ("input_ids", "labels", "position_ids", "attention_mask"):
            col = batch.column(name)
            values = col.values
            address = values.buffers()[1].address + values.offset * values.type.bit_width // 8
            assert out[name].data_ptr() == address + col.offset * SEQ_LEN * \
                values.type.bit_width // 8, name
    ds = CacheDataset(c.head_uri, "sft_tensors", batch_size=16, drop_last=False, seed=3)
    seen = 0
    for b in ds:
        assert set(b) == {"input_ids", "labels", "position_ids", "attention_mask"}
        n = len(b["input_ids"])
        for name, dtype in [("input_ids", torch.int32), ("labels", torch.int32),
                            ("position_ids", torch.int32), ("attention_mask", torch.int8)]:
            assert b[name].shape == (n, SEQ_LEN) and b[name].dtype == dtype, name
        seen += n
    assert seen == table.num_rows


def test_unpacked_token_columns_pad_labels_with_ignore_index(cluster):
    from icefloe.torch import CacheDataset

    c, tmp = cluster
    ids, labels = sft_documents(300, seed=SEED + 3)
    t = Warehouse(tmp / "wh5").create("sft", sft_table(ids, labels))
    with c.client() as client:
        client.load("sft_rows", t.metadata_location, transform={
            "keep": ["id", "input_ids", "labels"]})
    ds = CacheDataset(c.head_uri, "sft_rows", batch_size=32, drop_last=False, seed=5)
    rows = 0
    for b in ds:
        n, width = b["input_ids"].shape
        assert b["labels"].shape == (n, width) == b["attention_mask"].shape
        for k, row in enumerate(b["id"].tolist()):
            m = len(ids[row] or [])
            assert b["attention_mask"][k].tolist() == [1] * m + [0] * (width - m)
            assert b["input_ids"][k].tolist() == (ids[row] or []) + [0] * (width - m)
            assert b["labels"][k].tolist() == (labels[row] or []) + [-100] * (width - m)
        rows += n
    assert rows == len(ids)


def test_describe_counts_padding_and_overlong_documents(cluster):
    c, tmp = cluster
    ids, labels = sft_documents(1500, seed=SEED + 4)
    t = Warehouse(tmp / "wh6").create("sft", sft_table(ids, labels))
    docs = [i for i in ids if i]
    overlong = sum(1 for i in docs if len(i) > SEQ_LEN)
    with c.client() as client:
        for strategy, rule in [("ffd", "drop"), ("concat", "split")]:
            got, scan = load_packed(client, t, f"sft_{strategy}_{rule}", tail="pad",
                                    strategy=strategy, overlong=rule)
            mask = np.array(got["attention_mask"].to_pylist())
            assert scan["pack_rows"] == len(mask)
            assert scan["pack_pad_tokens"] == int((mask == 0).sum())
            assert scan["pack_tokens"] == int(mask.sum())
            assert scan["pack_overlong_dropped"] == (overlong if rule == "drop" else 0)
            assert scan["pack_overlong_split"] == (overlong if rule == "split" else 0)
            assert scan["pack_documents"] == len(docs) - scan["pack_overlong_dropped"]


def test_describe_counts_each_document_once_at_replication_two(tmp_path):
    ids, labels = sft_documents(700, seed=SEED + 5)
    t = Warehouse(tmp_path / "wh").create("sft", sft_table(ids, labels))
    with icefloe.LocalCluster(num_nodes=2, log_dir=tmp_path / "logs") as c, \
            c.client() as client:
        got, scan = load_packed(client, t, "twice", replication=2, strategy="ffd")
    mask = np.array(got["attention_mask"].to_pylist())
    assert scan["pack_documents"] == sum(1 for i in ids if i)
    assert scan["pack_rows"] == len(mask)
    assert scan["pack_pad_tokens"] == int((mask == 0).sum())
