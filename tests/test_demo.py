"""The README's main job, small: a review table in S3 -> cluster -> load with the
nodes tokenizing -> a small transformer trained over Parquet + tokenizing in
DataLoader workers and over icefloe's cached token ids, side by side; and the
numeric demo (--numeric): Parquet from S3, Parquet on local disk and icefloe."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

SOURCES = ("parquet-s3", "parquet-local", "icefloe")


def _run_demo(tmp_path, *args: str, env: dict[str, str] | None = None) -> tuple[list[str], str]:
    """(stdout lines, stderr) of a demo that exited 0 (``env``: added to the
    environment)."""
    import os

    # Output goes to files, not pipes: DataLoader's forkserver may outlive the
    # demo by a moment and would hold a pipe open.
    log, errors = tmp_path / "demo.out", tmp_path / "demo.err"
    with open(log, "w") as out, open(errors, "w") as err:
        code = subprocess.run([sys.executable, "-m", "icefloe_demo", *args], stdout=out,
                              stderr=err, stdin=subprocess.DEVNULL, timeout=600,
                              env={**os.environ, **(env or {})}).returncode
    assert code == 0, errors.read_text()[-3000:]
    return log.read_text().replace("\r", "\n").splitlines(), errors.read_text()


def _warnings(stderr: str) -> list[str]:
    """Warnings the demo printed (Python's, multiprocessing's resource tracker:
    "leaked semaphore objects" when a rank left with 2 persistent DataLoader
    workers' queues not cleaned up)."""
    return [line for line in stderr.replace("\r", "\n").splitlines()
            if "Warning" in line or "warn(" in line or "leaked" in line]


def _llama3_fetchable() -> bool:
    from icefloe_demo.gguf_tokenizer import llama3_bpe

    try:
        llama3_bpe()
        return True
    except Exception:  # noqa: BLE001 - the demo then says so and skips that copy
        return False


# The packed Llama-3 copy's rows: "<kind> <epoch> <samples> <tokens> ..." (samples: rows
# of --seq-len tokens).
PACKED_KINDS = ("llama3-s3", "llama3-icefloe")


@pytest.mark.parametrize("tokenizer", ["bert", "sentencepiece"])
def test_demo_trains_on_tokens_cached_by_the_nodes(tmp_path, tokenizer):
    # The packed Llama-3 copy (_check_packed_llama3) runs with the default
    # tokenizer. The SentencePiece model is trained on the reviews, so that run
    # goes offline (an empty cache, pip pointed at a closed port): the demo
    # cannot fetch Llama-3's tokenizer, says so and runs the rest.
    offline = {"ICEFLOE_CACHE": str(tmp_path / "empty-cache"), "PIP_CONFIG_FILE": "/dev/null",
               "PIP_INDEX_URL": "http://127.0.0.1:9/simple", "PIP_RETRIES": "0",
               "PIP_TIMEOUT": "2"}
    lines, stderr = _run_demo(tmp_path, "--rows", "3000", "--files", "3", "--epochs", "2",
                              "--batch-size", "64", "--nodes", "1", "--workers", "2",
                              "--vocab-size", "400", "--max-tokens", "48",
                              "--tokenizer", tokenizer, "--seq-len", "64", "--lm-steps", "10",
                              env=None if tokenizer == "bert" else offline)
    said = next(line for line in lines if line.startswith("tokenizer: "))
    loaded = next(line for line in lines if line.startswith("loaded 'reviews_tok'"))
    assert "3,000 rows" in loaded, loaded
    assert "truncated and padded to 48 ids with attention_mask" in loaded, loaded
    if tokenizer == "bert":  # the real file, or offline the WordPiece trained instead
        assert "BERT-base-uncased tokenizer.json" in said or "WordPiece" in said, said
        assert "(tokenizer.json WordPiece), [CLS]/[SEP]" in loaded, loaded
    else:
        assert "SentencePiece BPE" in said and "(sentencepiece), BOS/EOS" in loaded, loaded
    header = next(line for line in lines if line.startswith("source "))
    assert header.split() == ["source", "epoch", "samples", "tokens", "seconds", "samples/s",
                              "tokens/s", "waiting", "loss"]
    row = re.compile(r"^(\S+) +(warm-up|1|steady|alone) +([\d,]+) +([\d,]+) +[\d.]+ +[\d,]+ "
                     r"+[\d,]+ +(?:([\d.]+)%|-) +(?:[\d.]+|-)$")
    seen: dict[str, dict[str, tuple[int, int]]] = {"parquet-s3": {}, "icefloe": {}}
    for line in lines:
        m = row.match(line)
        if m and m.group(1) in seen:
            samples, tokens = (int(m.group(i).replace(",", "")) for i in (3, 4))
            seen[m.group(1)][m.group(2)] = (samples, tokens)
            assert (m.group(5) is None) == (m.group(2) == "alone"), line
            assert m.group(5) is None or 0 <= float(m.group(5)) <= 100, line
    for kind, epochs in seen.items():
        assert set(epochs) == {"warm-up", "1", "steady", "alone"}, (kind, epochs)
        for samples, tokens in epochs.values():
            # Every review has BOS/EOS or [CLS]/[SEP] and some text, at most 48 tokens.
            assert samples > 0 and 3 * samples <= tokens <= 48 * samples, (kind, epochs)
    # Same tokenizer, same truncation: the cached ids count what the baseline's
    # Python tokenizers (or sentencepiece) makes (both read whole batches of the same table;
    # drop_last leaves out at most a batch per source).
    ice, base = seen["icefloe"]["1"], seen["parquet-s3"]["1"]
    assert abs(ice[1] / ice[0] - base[1] / base[0]) < 0.1 * base[1] / base[0], seen
    assert any(line.startswith("icefloe: ") and "Parquet from S3" in line for line in lines)
    assert _warnings(stderr) == [], stderr[-3000:]
    if tokenizer == "bert":
        _check_packed_llama3(lines, seq_len=64)
    else:
        said = next(line for line in lines if "Llama-3 tokenizer.json cannot be fetched" in line)
        assert said.startswith("the Llama-3 tokenizer.json cannot be fetched, skipping the "
                               "packed Llama-3 copy: pip download llama-cpp-python"), said
        assert not any(line.startswith(PACKED_KINDS) for line in lines), lines


def _check_packed_llama3(lines: list[str], seq_len: int) -> None:
    """The demo's packed Llama-3 copy: loaded, trained from CacheDataset and
    from Parquet tokenized and packed in DataLoader workers, reported as the
    classifier's sources are; or, where the tokenizer cannot be fetched, said
    and skipped."""
    if not _llama3_fetchable():
        said = next(line for line in lines if "Llama-3 tokenizer.json cannot be fetched" in line)
        assert "skipping the packed Llama-3 copy: " in said, said
        assert not any(line.startswith(PACKED_KINDS) for line in lines), lines
        return
    loaded = next(line for line in lines if line.startswith("loaded 'reviews_llama3'"))
    assert "(tokenizer.json BPE)" in loaded and f"rows of {seq_len} tokens" in loaded, loaded
    row = re.compile(r"^(\S+) +(warm-up|1|steady|alone) +([\d,]+) +([\d,]+) +[\d.]+ +[\d,]+ "
                     r"+[\d,]+ +(?:([\d.]+)%|-) +(?:[\d.]+|-)$")
    seen: dict[str, dict[str, tuple[int, int]]] = {k: {} for k in PACKED_KINDS}
    for line in lines:
        m = row.match(line)
        if m and m.group(1) in seen:
            seen[m.group(1)][m.group(2)] = tuple(int(m.group(i).replace(",", "")) for i in (3, 4))
    for kind, epochs in seen.items():
        assert set(epochs) == {"warm-up", "1", "steady", "alone"}, (kind, epochs)
        for samples, tokens in epochs.values():
            # Packed rows: every row exactly seq_len tokens, no padding.
            assert samples > 0 and tokens == samples * seq_len, (kind, epochs)
    # Training epochs: their first 10 steps. The input alone reads a whole
    # epoch: the same table, tokenizer and packing give about as many rows
    # (each packs per file or per worker's stream, dropping its tail; drop_last
    # leaves out at most a batch per source).
    assert seen["llama3-icefloe"]["1"] == seen["llama3-s3"]["1"] == (320, 320 * seq_len), seen
    ice, base = seen["llama3-icefloe"]["alone"][0], seen["llama3-s3"]["alone"][0]
    assert base > 320 and abs(ice - base) <= 0.15 * base, seen
    assert any(line.startswith("llama3-icefloe: ") and "tokenizing and packing" in line
               for line in lines), lines


def test_baseline_packs_as_the_nodes_do(tmp_path):
    """The packed copy's baseline does the nodes' work, no less: Llama-3's
    tokenizer.json in the tokenizers package (BOS, truncated to seq_len),
    the documents end to end, cut into rows of seq_len with labels -100 at
    each document's first token and position_ids from 0 at each document:
    the rows the nodes' `pack` cached from one file (one scan task)."""
    import pyarrow.dataset as ds

    import icefloe
    from icefloe_demo.packed import Packer, llama3_tokenizer, packed_spec
    from icefloe_demo.text import write_reviews

    model = llama3_tokenizer()
    if model is None:
        pytest.skip("the Llama-3 tokenizer.json cannot be fetched")
    table, _ = write_reviews(tmp_path, 300, 1, None, seed=5)
    seq_len = 32
    with icefloe.LocalCluster(num_nodes=1, log_dir=tmp_path / "logs") as cluster, \
            cluster.client() as client:
        client.load("packed", table.metadata_location,
                    transform=packed_spec(str(model), seq_len))
        got = client.read("packed")
    files = [t.file.file_path.removeprefix("file://") for t in table.scan().plan_files()]
    texts = ds.dataset(files, format="parquet").to_table(columns=["text"]).column("text")
    packer = Packer(model.read_bytes(), seq_len)
    want = {"input_ids": [], "labels": [], "position_ids": []}
    for chunk in (texts.slice(0, 100), texts.slice(100)):  # rows carry over between batches
        packer.add(chunk.to_pylist())
        while (rows := packer.take(1)) is not None:
            for name, tensor in rows.items():
                want[name].extend(tensor.tolist())
    assert got.num_rows == len(want["input_ids"]) > 10, (got.num_rows, len(want["input_ids"]))
    for name, rows in want.items():
        assert got.column(name).to_pylist() == rows, name
    labels = want["labels"]
    assert sum(r.count(-100) for r in labels) == sum(r.count(0) for r in want["position_ids"])


def test_the_packed_copys_lm_sees_each_document_alone():
    """The demo's causal LM over packed rows: a document's logits are those
    of the document alone (position_ids restart at 0 at each document; no
    token attends to another document or to a later token)."""
    import torch

    from icefloe_demo.packed import LM, TinyCausalLM

    torch.manual_seed(43)
    ids = torch.randint(0, 128256, (1, 128))
    positions = (torch.arange(128) % 50).unsqueeze(0)  # documents at 0, 50 and 100
    model = TinyCausalLM(128, **LM).eval()
    with torch.no_grad():
        packed = model(ids, positions)[0]
        alone = model(ids[:, 50:100], positions[:, 50:100])[0]
        later = ids.clone()
        later[0, 60:] = 7  # the second document's tail and the third document
        changed = model(later, positions)[0]
    assert torch.allclose(packed[50:100], alone, atol=1e-5)
    assert torch.equal(packed[:60], changed[:60])
    assert not torch.allclose(packed[60:100], changed[60:100])


def test_without_the_llama3_tokenizer_the_demo_skips_only_that_copy(tmp_path, monkeypatch,
                                                                     capsys):
    """No cached file and no package index (pip pointed at a closed port): the
    packed copy's tokenizer cannot be fetched, and the demo says so and why,
    and goes on without that copy."""
    from icefloe_demo.packed import llama3_tokenizer

    monkeypatch.setenv("ICEFLOE_CACHE", str(tmp_path / "empty-cache"))
    monkeypatch.setenv("PIP_CONFIG_FILE", "/dev/null")
    monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:9/simple")
    monkeypatch.setenv("PIP_RETRIES", "0")
    monkeypatch.setenv("PIP_TIMEOUT", "2")
    assert llama3_tokenizer() is None
    said = capsys.readouterr().out
    assert ("the Llama-3 tokenizer.json cannot be fetched, skipping the packed Llama-3 copy: "
            "pip download llama-cpp-python") in said, said


def test_numeric_demo_compares_icefloe_with_parquet_from_s3_and_local_disk(tmp_path):
    lines, stderr = _run_demo(tmp_path, "--numeric", "--size-mb", "3", "--files", "4",
                              "--epochs", "2", "--batch-size", "256", "--nodes", "1",
                              "--workers", "2")
    assert any(line.startswith("loaded 'demo'") for line in lines)
    header = next(line for line in lines if line.startswith("source "))
    assert header.split() == ["source", "epoch", "rows", "seconds", "MB/s", "rows/s",
                              "waiting", "loss"]
    # Every source has a warm-up row, an epoch-1 row and a steady row, each
    # with rows read, a non-zero MB/s and a waiting share.
    row = re.compile(r"^(\S+) +(warm-up|1|steady) +([\d,]+) +[\d.]+ +([\d,.]+) +[\d,]+ "
                     r"+([\d.]+)% +[\d.]+$")
    seen: dict[str, set[str]] = {s: set() for s in SOURCES}
    for line in lines:
        m = row.match(line)
        if m and m.group(1) in seen:
            seen[m.group(1)].add(m.group(2))
            assert int(m.group(3).replace(",", "")) > 0, line
            assert float(m.group(4).replace(",", "")) > 0, line
            assert (m.group(5) is None) == (m.group(2) == "alone"), line
            assert m.group(5) is None or 0 <= float(m.group(5)) <= 100, line
    assert all(epochs == {"warm-up", "1", "steady"} for epochs in seen.values()), seen
    assert any(line.startswith("icefloe: ") and "Parquet from S3" in line for line in lines)
    assert any(line.startswith("icefloe: ") and "Parquet on local disk" in line
               for line in lines)
    assert _warnings(stderr) == [], stderr[-3000:]


@pytest.mark.parametrize("kind", ["bert", "wordpiece", "sentencepiece"])
def test_baseline_tokenizes_as_the_nodes_do(tmp_path, kind):
    """The demo's baseline does the nodes' work, no less: its Python rule
    (the tokenizers package on the tokenizer.json, truncated and padded to
    max_tokens; or sentencepiece with BOS, the text's ids cut to
    max_tokens - 2, EOS, padded) gives the ids and attention mask the nodes
    cached, truncated rows included."""
    import pyarrow.dataset as ds

    import icefloe
    from icefloe_demo.text import Encoder, tokenizer_file, transform_spec, write_reviews
    from icefloe_demo.tokenizer_files import bert_uncased

    if kind == "bert":
        try:
            bert_uncased()
        except Exception as e:  # noqa: BLE001
            pytest.skip(f"the BERT-base-uncased tokenizer.json cannot be fetched: {e}")
    table, sample = write_reviews(tmp_path, 400, 2, None, seed=3)
    data, what = tokenizer_file(kind, sample, 300)
    assert {"bert": "BERT-base-uncased", "wordpiece": "WordPiece",
            "sentencepiece": "SentencePiece"}[kind] in what
    model = tmp_path / "tokenizer.model"
    model.write_bytes(data)
    spec = transform_spec(str(model), 16, sentencepiece=kind == "sentencepiece")
    with icefloe.LocalCluster(num_nodes=1, log_dir=tmp_path / "logs") as cluster, \
            cluster.client() as client:
        client.load("tok", table.metadata_location, transform=spec)
        got = client.read("tok").sort_by("review_id")
    files = [t.file.file_path.removeprefix("file://") for t in table.scan().plan_files()]
    raw = ds.dataset(files, format="parquet").to_table().sort_by("review_id")
    want = Encoder(data, 16, pad_to=16)(raw.column("text").to_pylist())
    assert got.column("input_ids").to_pylist() == want["input_ids"].to_pylist()
    assert got.column("attention_mask").to_pylist() == want["attention_mask"].to_pylist()
    lengths = [sum(m) for m in want["attention_mask"].to_pylist()]
    assert any(n == 16 for n in lengths) and any(n < 16 for n in lengths)
    assert got.column("label").to_pylist() == [s - 1 for s in raw.column("stars").to_pylist()]


def test_offline_the_demo_trains_a_wordpiece_on_the_reviews_and_says_so(tmp_path, monkeypatch,
                                                                        capsys):
    """No cached file and no package index (pip pointed at a closed port): the
    demo's BERT tokenizer falls back to a WordPiece trained on the reviews,
    and prints why."""
    import json

    from icefloe_demo.text import tokenizer_file, write_reviews

    monkeypatch.setenv("ICEFLOE_CACHE", str(tmp_path / "empty-cache"))
    monkeypatch.setenv("PIP_CONFIG_FILE", "/dev/null")
    monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:9/simple")
    monkeypatch.setenv("PIP_RETRIES", "0")
    monkeypatch.setenv("PIP_TIMEOUT", "2")
    _, sample = write_reviews(tmp_path, 200, 1, None, seed=4)
    data, what = tokenizer_file("bert", sample, 300)
    said = capsys.readouterr().out
    assert "the BERT-base-uncased tokenizer.json cannot be fetched (pip download" in said, said
    assert "training a WordPiece tokenizer on the reviews instead" in said
    assert what.startswith("WordPiece (BERT-style, uncased) trained on 200 reviews")
    doc = json.loads(data)
    assert doc["model"]["type"] == "WordPiece" and doc["padding"]["pad_id"] == 0
