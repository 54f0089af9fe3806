"""Transforms at load (issue 27): the data nodes compute the cached columns
once — expressions over Arrow compute, SentencePiece token ids, packed
sequences — and every epoch guarantee holds for the transformed copy.

Token ids are checked against the Python `sentencepiece` package (the
reference library) on models trained here on the test's own text; packing
against a pure-Python packing of those reference ids, file by file."""

from __future__ import annotations

import random
import time

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from iceberg_util import Warehouse
from resume_util import run_then_resume

import icefloe

spm = pytest.importorskip("sentencepiece")

WORDS = ["great", "film", "terrible", "plot", "loved", "the", "actors", "was", "boring",
         "café", "naïve", "東京", "映画", "привет", "🎉", "👍🏽", "ok", "x"]
HEAD_ARGS = ["--heartbeat-timeout-ms", "1000"]


def review_text(rng: random.Random, i: int) -> str | None:
    if i % 97 == 0:
        return ""  # empty strings tokenize to no ids
    if i % 89 == 0:
        return None  # a null text is a null token list
    if i % 211 == 0:  # very long
        return " ".join(rng.choice(WORDS) for _ in range(3000))
    if i % 53 == 0:
        return "\t tabs\tand\nnewlines \u00a0nbsp \u200b zero-width"
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 40)))


def reviews(start: int, rows: int, seed: int) -> pa.Table:
    rng = random.Random(seed)
    ids = list(range(start, start + rows))
    return pa.table({
        "review_id": pa.array(ids, pa.int64()),
        "text": pa.array([review_text(rng, i) for i in ids], pa.string()),
        "stars": pa.array([1 + (i * 7) % 5 for i in ids], pa.int32()),
    })


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """A 4-file review table and two SentencePiece models (BPE, unigram)
    trained on a sample of its own text."""
    root = tmp_path_factory.mktemp("transforms")
    parts = [reviews(k * 1500, 1500, seed=k) for k in range(4)]
    t = Warehouse(root).create("reviews", parts[0])
    for p in parts[1:]:
        t.append(p)
    sample = root / "sample.txt"
    sample.write_text("\n".join(s for p in parts[:2] for s in p["text"].to_pylist()[:600] if s))
    models = {}
    for kind in ("bpe", "unigram"):
        spm.SentencePieceTrainer.train(
            input=str(sample), model_prefix=str(root / kind), vocab_size=300, model_type=kind,
            hard_vocab_limit=False, character_coverage=1.0, minloglevel=2)
        models[kind] = str(root / f"{kind}.model")
    return t, pa.concat_tables(parts), models, root


def kill_a_holder_and_wait_for_the_heal(cluster, client, name: str) -> dict:
    """SIGKILLs the node holding `name`'s first slice; waits (bounded) until
    the head has healed the copy onto the others; returns its description."""
    lost = client.describe(name)["slices"][0]["nodes"][0]
    cluster.kill_node(cluster.node_uris.index(lost))
    deadline = time.monotonic() + 60
    while True:
        desc = client.describe(name)
        if desc["state"] == "ready" and all(lost not in s["nodes"] for s in desc["slices"]):
            return desc
        assert time.monotonic() < deadline, f"not healed: {desc}"
        time.sleep(0.05)


def data_files_in_row_order(desc: dict) -> list[str]:
    return [f["path"] for f in desc["files"]]


def reference_ids(model: str, texts: list[str | None], bos: bool, eos: bool,
                  max_tokens: int | None = None) -> list[list[int] | None]:
    sp = spm.SentencePieceProcessor(model_file=model)
    out: list[list[int] | None] = []
    for text in texts:
        if text is None:
            out.append(None)
            continue
        ids = sp.encode(text)
        if max_tokens is not None:
            ids = ids[:max(0, max_tokens - bos - eos)]
        out.append(([sp.bos_id()] if bos else []) + ids + ([sp.eos_id()] if eos else []))
    return out


@pytest.mark.parametrize("kind", ["bpe", "unigram"])
def test_token_ids_equal_the_sentencepiece_package(tmp_path, corpus, kind):
    t, oracle, models, _ = corpus
    spec = {"keep": ["review_id"], "columns": [
        {"name": "label", "expr": "stars - 1"},
        {"name": "input_ids", "tokenize": {"column": "text", "model": models[kind],
                                           "bos": True, "eos": True}},
        {"name": "short", "tokenize": {"column": "text", "model": models[kind],
                                       "eos": True, "max_tokens": 8}},
    ]}
    with icefloe.LocalCluster(num_nodes=2, log_dir=tmp_path / "logs") as cluster, \
            cluster.client() as client:
        desc = client.load("tok", t.metadata_location, transform=spec, batch_rows=1000)
        assert desc["transform"] == spec  # as given
        assert desc["rows"] == oracle.num_rows
        got = client.read("tok")
    assert got.schema.names == ["review_id", "label", "input_ids", "short"]
    assert got.schema.field("input_ids").type == pa.list_(pa.int32())
    assert got["review_id"].to_pylist() == oracle["review_id"].to_pylist()
    assert got["label"].to_pylist() == [s - 1 for s in oracle["stars"].to_pylist()]
    texts = oracle["text"].to_pylist()
    want = reference_ids(models[kind], texts, bos=True, eos=True)
    ours = got["input_ids"].to_pylist()
    mismatched = [i for i, (a, b) in enumerate(zip(ours, want, strict=True)) if a != b]
    assert not mismatched, f"rows {mismatched[:5]} differ, e.g. {texts[mismatched[0]]!r}"
    assert max(len(x) for x in ours if x) > 2000  # the very long strings came through whole
    assert got["short"].to_pylist() == reference_ids(models[kind], texts, bos=False, eos=True,
                                                     max_tokens=8)


def pack_reference(ids_per_file: list[list[list[int] | None]], seq_len: int, eos: int | None,
                   tail: str, pad: int) -> tuple[list[list[int]], list[list[int]]]:
    """Documents of each file concatenated (with the separator), cut into rows."""
    rows, masks = [], []
    for docs in ids_per_file:
        stream = []
        for d in docs:
            if d is None:
                continue
            stream += d + ([eos] if eos is not None else [])
        full = len(stream) // seq_len
        for r in range(full):
            rows.append(stream[r * seq_len:(r + 1) * seq_len])
            masks.append([1] * seq_len)
        rest = stream[full * seq_len:]
        if rest and tail == "pad":
            rows.append(rest + [pad] * (seq_len - len(rest)))
            masks.append([1] * len(rest) + [0] * (seq_len - len(rest)))
    return rows, masks


def test_packed_sequences_shard_and_shuffle_exactly(tmp_path, corpus, monkeypatch):
    torch = pytest.importorskip("torch")
    from icefloe.torch import CacheDataset

    t, _, models, _ = corpus
    seq_len = 64
    spec = {"columns": [{"name": "input_ids", "tokenize": {"column": "text",
                                                          "model": models["bpe"], "bos": True}}],
            "pack": {"column": "input_ids", "seq_len": seq_len, "eos": 2, "tail": "pad",
                     "pad": 0}}
    with icefloe.LocalCluster(num_nodes=2, log_dir=tmp_path / "logs") as cluster, \
            cluster.client() as client:
        desc = client.load("packed", t.metadata_location, transform=spec, batch_rows=128)
        got = client.read("packed")
        assert got.schema.field("input_ids").type == pa.list_(pa.int32(), seq_len)
        assert got.schema.names == ["input_ids", "attention_mask"]
        files = data_files_in_row_order(client.describe("packed"))
        per_file = [reference_ids(models["bpe"], pq.read_table(f.removeprefix("file://"))
                                  ["text"].to_pylist(), bos=True, eos=False) for f in files]
        rows, masks = pack_reference(per_file, seq_len, 2, "pad", 0)
        assert got["input_ids"].to_pylist() == rows
        assert got["attention_mask"].to_pylist() == masks
        assert desc["rows"] == len(rows)

        # Two ranks of a window-shuffled epoch: [B, S] tensors, every row once.
        seen = []
        monkeypatch.setenv("WORLD_SIZE", "2")
        for rank in range(2):
            monkeypatch.setenv("RANK", str(rank))
            ds = CacheDataset(cluster.head_uri, "packed", batch_size=16, drop_last=False, seed=3)
            ds.set_epoch(1)
            for batch in ds:
                assert batch["input_ids"].shape == (batch["input_ids"].shape[0], seq_len)
                assert batch["input_ids"].dtype == torch.int32
                seen += [tuple(r) for r in batch["input_ids"].tolist()]
        want = sorted(tuple(r) for r in rows)
        assert sorted(set(seen)) == sorted(set(want))
        assert len(seen) >= len(want) and len(seen) - len(want) < 2  # padding only

        # Three steps on one rank, then resumed on two: every row exactly once more.
        def packed():
            return CacheDataset(cluster.head_uri, "packed", batch_size=16, drop_last=False, seed=4)

        first, per_rank, _ = run_then_resume(
            packed, packed, 3, 1, 2, rows=lambda b: [tuple(r) for r in b["input_ids"].tolist()])
        rest = [r for batches in per_rank for b in batches for r in b]
        assert sorted(set(first + rest)) == sorted(set(want))
        assert len(first) + len(rest) - len(want) < 2


def test_a_second_job_shares_the_copy_and_another_transform_makes_its_own(tmp_path, corpus):
    t, _, models, root = corpus
    spec = {"keep": ["review_id"], "columns": [
        {"name": "bucket", "expr": "hash_bucket(review_id, 8)"},
        {"name": "input_ids", "tokenize": {"column": "text", "model": models["bpe"]}}]}
    with icefloe.LocalCluster(num_nodes=2, log_dir=tmp_path / "logs") as cluster, \
            cluster.client() as client:
        first = client.load("a", t.metadata_location, transform=spec)
        second = client.load("b", t.metadata_location, transform=spec)
        assert second["generation"] == first["generation"]  # the same cached copy
        held = sum(d["bytes"] for n in client.status()["nodes"] for d in n["datasets"])
        assert held == first["bytes"]
        other = dict(spec, columns=spec["columns"][:1])
        third = client.load("c", t.metadata_location, transform=other)
        assert third["generation"] != first["generation"]
        assert client.read("c").schema.names == ["review_id", "bucket"]
        # Another model with the same location's content changed is another copy too.
        copy = root / "copy.model"
        copy.write_bytes(open(models["unigram"], "rb").read())
        spec_u = {"columns": [{"name": "ids", "tokenize": {"column": "text", "model": str(copy)}}]}
        u1 = client.load("u1", t.metadata_location, transform=spec_u)
        copy.write_bytes(open(models["bpe"], "rb").read())
        u2 = client.load("u2", t.metadata_location, transform=spec_u)
        assert u2["generation"] != u1["generation"]
        assert u1["model_sha256"] != u2["model_sha256"]
        buckets = client.read("a")["bucket"].to_pylist()
        assert set(buckets) <= set(range(8)) and len(set(buckets)) == 8


@pytest.mark.parametrize("spec_fn, match", [
    (lambda m: {"keep": ["nope"]}, r"'keep': unknown column 'nope'"),
    (lambda m: {"columns": [{"name": "label", "expr": "stars -"}]},
     r"column 'label' \('stars -'\): expression syntax error at position 8"),
    (lambda m: {"columns": [{"name": "label", "expr": "text * 2"}]},
     r"column 'label' \('text \* 2'\).*multiply_checked"),
    (lambda m: {"columns": [{"name": "y", "expr": "frob(stars)"}]},
     r"column 'y' \('frob\(stars\)'\): .*unknown function 'frob'"),
    (lambda m: {"columns": [{"name": "ids", "tokenize": {"column": "stars", "model": m}}]},
     r"tokenize needs a string column; 'stars' is int32"),
    (lambda m: {"columns": [{"name": "ids", "tokenize": {"column": "text",
                                                         "model": m + ".missing"}}]},
     r"cannot read tokenizer model '.*\.missing'"),
    (lambda m: {"columns": [{"name": "ids", "tokenize": {"column": "text", "model": "CORRUPT"}}]},
     r"tokenizer model '.*corrupt.model' is not a SentencePiece model"),
    (lambda m: {"columns": [{"name": "ids", "tokenize": {"column": "text", "model": "JSON"}}]},
     r"tokenizer model '.*tokenizer.json': model.vocab: missing"),
    (lambda m: {"columns": [{"name": "a", "expr": "stars", "tokenize": {"column": "text",
                                                                        "model": m}}]},
     r"give exactly one of 'expr', 'tokenize' and 'chat'"),
    # A misspelt option would make another copy than the one asked for.
    (lambda m: {"columns": [{"name": "ids", "tokenize": {"column": "text", "model": m,
                                                         "max_tokens": 8, "pad_too": 8}}]},
     r"'columns'\[0\]\.tokenize: unknown field 'pad_too' \(fields: column, model, bos, eos, "),
    (lambda m: {"columns": [{"name": "ids", "tokenize": {"column": "text", "model": m}}],
                "pack": {"column": "ids", "seq_len": 8, "seq_length": 16}},
     r"transform: 'pack': unknown field 'seq_length'"),
])
def test_bad_specs_and_models_are_refused_with_nothing_loaded(tmp_path, corpus, spec_fn, match):
    t, _, models, root = corpus
    (root / "corrupt.model").write_bytes(open(models["bpe"], "rb").read()[:200])
    (root / "tokenizer.json").write_text('{"version": "1.0", "model": {"type": "BPE"}}')
    spec = spec_fn(models["bpe"])
    for c in spec.get("columns", []):
        tok = c.get("tokenize")
        if tok and tok["model"] == "CORRUPT":
            tok["model"] = str(root / "corrupt.model")
        if tok and tok["model"] == "JSON":
            tok["model"] = str(root / "tokenizer.json")
    with icefloe.LocalCluster(num_nodes=1, log_dir=tmp_path / "logs") as cluster, \
            cluster.client() as client:
        with pytest.raises(icefloe.InvalidArgument, match=match):
            client.load("bad", t.metadata_location, transform=spec)
        status = client.status()
        assert all(not n["datasets"] for n in status["nodes"])
        assert all(n["memory_used_bytes"] == 0 for n in status["nodes"])


def test_a_healed_slice_is_transformed_identically(tmp_path, corpus):
    t, _, models, _ = corpus
    spec = {"keep": ["review_id"], "columns": [
        {"name": "input_ids", "tokenize": {"column": "text", "model": models["unigram"],
                                           "eos": True}}]}
    with icefloe.LocalCluster(num_nodes=3, memory_limit="256MiB", head_args=HEAD_ARGS,
                              log_dir=tmp_path / "logs") as cluster, cluster.client() as client:
        loaded = client.load("h", t.metadata_location, transform=spec, batch_rows=500)
        before = client.read("h")
        desc = kill_a_holder_and_wait_for_the_heal(cluster, client, "h")
        assert desc["generation"] == loaded["generation"]
        assert client.read("h").equals(before)


def test_window_epoch_and_random_access_over_token_lists(tmp_path, corpus):
    pytest.importorskip("torch")
    from icefloe.torch import CacheDataset

    t, oracle, models, _ = corpus
    spec = {"keep": ["review_id"], "columns": [
        {"name": "input_ids", "tokenize": {"column": "text", "model": models["bpe"],
                                           "max_tokens": 32}}]}
    want = dict(zip(oracle["review_id"].to_pylist(),
                    reference_ids(models["bpe"], oracle["text"].to_pylist(), False, False, 32),
                    strict=True))
    with icefloe.LocalCluster(num_nodes=2, log_dir=tmp_path / "logs") as cluster, \
            cluster.client() as client:
        client.load("w", t.metadata_location, transform=spec, batch_rows=700)
        seen = {}
        ds = CacheDataset(cluster.head_uri, "w", batch_size=64, seed=5, drop_last=False)
        for batch in ds:
            ids, lengths = batch["input_ids"], batch["input_ids_lengths"]
            assert ids.dim() == 2 and ids.shape[0] == lengths.shape[0]
            for rid, row, n in zip(batch["review_id"].tolist(), ids.tolist(),
                                   lengths.tolist(), strict=True):
                seen[rid] = row[:n]
        assert seen.keys() == want.keys()
        assert all(seen[k] == (want[k] or []) for k in want)
        rows = np.random.default_rng(0).choice(oracle.num_rows, 50, replace=False).tolist()
        taken = client.take("w", rows)
        assert taken["input_ids"].to_pylist() == [want[oracle["review_id"][r].as_py()]
                                                   for r in rows]


def test_a_transformed_copy_is_adopted_after_a_head_restart_and_heals_after(tmp_path, corpus):
    t, _, models, _ = corpus
    spec = {"keep": ["review_id"], "columns": [
        {"name": "label", "expr": "if_else(stars >= 4, 1, 0)"},
        {"name": "input_ids", "tokenize": {"column": "text", "model": models["bpe"],
                                           "bos": True}}]}
    with icefloe.LocalCluster(num_nodes=3, head_args=HEAD_ARGS,
                              log_dir=tmp_path / "logs") as cluster:
        with cluster.client() as client:
            loaded = client.load("r", t.metadata_location, transform=spec, batch_rows=500)
            before = client.read("r")
        cluster.kill_head()
        cluster.restart_head()
        with cluster.client() as client:
            desc = client.describe("r")  # adopted from the nodes' catalog records
            assert desc["transform"] == spec
            assert desc["model_sha256"] == loaded["model_sha256"]
            assert desc["model_kind"] == loaded["model_kind"] == ["sentencepiece"]
            assert desc["generation"] == loaded["generation"]
            assert client.read("r").equals(before)
            # A heal of the adopted copy re-plans its snapshot, binds the transform
            # again (same model, checked by hash) and reloads the same rows.
            kill_a_holder_and_wait_for_the_heal(cluster, client, "r")
            assert client.read("r").equals(before)
            # Another client's second job with the same spec joins the copy at once.
            assert client.load("r2", t.metadata_location, transform=spec,
                               batch_rows=500)["generation"] == loaded["generation"]


@pytest.mark.parametrize("op", ["+", "*"])
def test_a_long_chain_of_operators_is_refused_and_the_head_keeps_serving(tmp_path, corpus, op):
    """Issue 42: `stars+1+1+...` of 32,000 terms (64 KB) is a tree 32,000 levels
    deep; binding it overflowed the head's stack (SIGSEGV). Refused by depth,
    naming the column; the head serves the next load."""
    t, oracle, _, _ = corpus
    deep = "stars" + (op + "1") * 31999
    assert len(deep) < 65536  # under the text limit: the depth bound refuses it
    with icefloe.LocalCluster(num_nodes=1, log_dir=tmp_path / "logs") as cluster, \
            cluster.client() as client:
        with pytest.raises(icefloe.InvalidArgument) as refused:
            client.load("deep", t.metadata_location,
                        transform={"columns": [{"name": "deep", "expr": deep}]})
        message = str(refused.value)
        assert "column 'deep'" in message
        assert "deeper than 64 levels" in message
        assert len(message) < 2000  # the 64 KB expression is not echoed whole
        assert cluster.head.popen.poll() is None, cluster.logs()
        spec = {"keep": ["review_id"], "columns": [{"name": "label", "expr": "stars - 1"}]}
        client.load("ok", t.metadata_location, transform=spec)
        assert [d["name"] for d in client.datasets()] == ["ok"]
        got = client.read("ok")
    assert got["label"].to_pylist() == [s - 1 for s in oracle["stars"].to_pylist()]


def test_literal_types_on_an_int32_column_are_those_the_docs_give(tmp_path, corpus):
    """docs/transforms.md, "Types" (issue 42: the docs said `stars - 1` was
    int64; Arrow narrows the literal to the column's type)."""
    t, oracle, _, _ = corpus
    assert oracle.schema.field("stars").type == pa.int32()
    stars = oracle["stars"].to_pylist()
    spec = {"columns": [{"name": "minus", "expr": "stars - 1"},
                        {"name": "wide", "expr": "cast(stars, 'int64') * 1000000000"}]}
    with icefloe.LocalCluster(num_nodes=1, log_dir=tmp_path / "logs") as cluster, \
            cluster.client() as client:
        with pytest.raises(icefloe.InvalidArgument,
                           match=r"column 'times' \('stars \* 1000000000'\): overflow"):
            client.load("narrow", t.metadata_location,
                        transform={"columns": [{"name": "times", "expr": "stars * 1000000000"}]})
        client.load("typed", t.metadata_location, transform=spec)
        got = client.read("typed")
    assert got.schema.field("minus").type == pa.int32()
    assert got["minus"].to_pylist() == [s - 1 for s in stars]
    assert got.schema.field("wide").type == pa.int64()
    assert got["wide"].to_pylist() == [s * 1000000000 for s in stars]
