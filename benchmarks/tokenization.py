"""Tokenization on the nodes (issue 27): what caching token ids buys, side by side.

On one review corpus (``icefloe_demo.text``'s generator: text whose words
follow the stars, lengths from one sentence to a few dozen), written as an
Iceberg table on local disk (page cache), with one SentencePiece BPE model
and one Hugging Face ``tokenizers`` BPE model trained on it:

1. **Node throughput**: MB of text tokenized per CPU-second on the data
   nodes (CPU of the node processes from /proc/<pid>/stat: a load with the
   tokenize transform minus a raw load of the same columns) vs Python
   ``sentencepiece`` (``encode`` of a list, one thread) and ``tokenizers``
   (``encode_batch``, one thread) on the same texts, each in a fresh
   interpreter, CPU from ``time.process_time``.
2. **Epoch in documents/s**: an epoch over cached packed tokens
   (``pack`` with ``seq_len`` 512 on a second load; ``CacheDataset``, default
   window shuffle; documents/s = tokens/s over mean tokens per document) vs
   the same corpus read from Parquet and tokenized with Python
   ``sentencepiece`` in the training loop, and in 2 DataLoader workers.
   Target: ≥ 20× the in-loop rate.
3. **A second job with the same transform**: its ``load`` returns the cached
   copy; the time from that call to its first batch, against the first load.
4. **Load time** with tokenization vs a raw load of the same table.

Every figure is a ratio of variants measured in the same round
(``common.interleaved``), medians over rounds.

    .venv/bin/python benchmarks/run.py --only tokenization [--quick]

Workers (fresh interpreters): ``python -m benchmarks.tokenization NAME '{json}'``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make `benchmarks` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import common  # noqa: E402
from benchmarks.measure import worker_main  # noqa: E402

NAME = "tokenization"
SEQ_LEN = 512
DOC_BATCH = 256  # documents per training batch (raw text); packed batches hold as many tokens
VOCAB = 8000
ONE_THREAD = {"RAYON_RS_NUM_CPUS": "1", "TOKENIZERS_PARALLELISM": "false",
              "OMP_NUM_THREADS": "1"}


# -- the corpus, its table and its tokenizers ----------------------------------------


def _corpus(env: common.Env) -> dict[str, Any]:
    """The review table (local warehouse) and both models, made once per work dir."""
    rows = 50_000 if env.cfg.quick else 200_000
    files = 4 if env.cfg.quick else 8
    root = env.cfg.work / f"tokenize-{rows}-{files}"
    info_path = root / "corpus.json"
    if info_path.exists() and not env.cfg.fresh_data:
        return json.loads(info_path.read_text())
    import shutil

    from icefloe_demo.text import train_tokenizer, write_reviews

    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    env.log(f"tokenize: writing {rows:,} reviews in {files} files under {root}")
    table, sample = write_reviews(root, rows, files, None, seed=7)
    spm_path = root / "spm.model"
    spm_path.write_bytes(train_tokenizer(sample, VOCAB))
    hf_path = root / "tokenizer.json"
    _train_hf(sample, hf_path)
    paths = [t.file.file_path.removeprefix("file://") for t in table.scan().plan_files()]
    info = {"metadata": table.metadata_location, "files": paths, "rows": rows,
            "spm": str(spm_path), "hf": str(hf_path)}
    info_path.write_text(json.dumps(info))
    return info


def _train_hf(sample: list[str], path: Path) -> None:
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.train_from_iterator(sample, trainers.BpeTrainer(
        vocab_size=VOCAB, special_tokens=["<unk>", "<s>", "</s>"], show_progress=False))
    tok.save(str(path))


def _tokenize(model: str, *, bos: bool = True, eos: bool = True,
              max_tokens: int | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"column": "text", "model": model, "bos": bos, "eos": eos}
    if max_tokens is not None:
        spec["max_tokens"] = max_tokens
    return spec


def _spec(model: str) -> dict[str, Any]:
    return {"keep": ["review_id"], "columns": [
        {"name": "label", "expr": "stars - 1"},
        {"name": "input_ids", "tokenize": _tokenize(model)}]}


def _packed_spec(model: str, eos_id: int) -> dict[str, Any]:
    # Documents as BOS ... , each followed by EOS as the separator.
    return {"columns": [{"name": "input_ids", "tokenize": _tokenize(model, eos=False)}],
            "pack": {"column": "input_ids", "seq_len": SEQ_LEN, "eos": eos_id, "tail": "drop"}}


# -- workers (fresh interpreters) --------------------------------------------------


def _texts(files: list[str]) -> list[str]:
    import pyarrow.dataset as ds

    return ds.dataset(files, format="parquet").to_table(columns=["text"]).column(
        "text").to_pylist()


def python_sentencepiece(files: list[str], model: str) -> dict[str, Any]:
    """Python sentencepiece over every text, one thread, lists of 4096."""
    import sentencepiece as spm

    texts = _texts(files)
    sp = spm.SentencePieceProcessor(model_file=model)
    nbytes = sum(len(t.encode()) for t in texts)
    cpu0, t0, tokens = time.process_time(), time.perf_counter(), 0
    for i in range(0, len(texts), 4096):
        ids = sp.encode(texts[i:i + 4096], add_bos=True, add_eos=True, num_threads=1)
        tokens += sum(map(len, ids))
    return {"cpu_seconds": time.process_time() - cpu0, "seconds": time.perf_counter() - t0,
            "text_bytes": nbytes, "tokens": tokens, "docs": len(texts)}


def python_tokenizers(files: list[str], model: str) -> dict[str, Any]:
    """Hugging Face tokenizers' encode_batch over every text, lists of 4096."""
    from tokenizers import Tokenizer

    texts = _texts(files)
    tok = Tokenizer.from_file(model)
    nbytes = sum(len(t.encode()) for t in texts)
    cpu0, t0, tokens = time.process_time(), time.perf_counter(), 0
    for i in range(0, len(texts), 4096):
        tokens += sum(len(e.ids) for e in tok.encode_batch(texts[i:i + 4096]))
    return {"cpu_seconds": time.process_time() - cpu0, "seconds": time.perf_counter() - t0,
            "text_bytes": nbytes, "tokens": tokens, "docs": len(texts)}


def _count(source: Any, first: list[float], t0: float) -> tuple[int, int]:
    """(documents, tokens) of one pass; the first batch's time from t0 into ``first``."""
    docs = tokens = 0
    for batch in source:
        if not first:
            first.append(time.perf_counter() - t0)
        lengths = batch.get("input_ids_lengths")
        if lengths is None:  # packed: every token real (tail "drop")
            tokens += batch["input_ids"].numel()
        else:
            tokens += int(lengths.sum())
            docs += len(lengths)
    return docs, tokens


def _epochs(dataset: Any, loader: Any) -> dict[str, Any]:
    """Two epochs: the first warms up (worker start-up, connections, page
    cache) and gives the first batch's time; the second is the one measured."""
    t0 = time.perf_counter()
    first: list[float] = []
    _count(loader, first, t0)
    dataset.set_epoch(1)
    t1 = time.perf_counter()
    docs, tokens = _count(loader, [], t1)
    return {"seconds": time.perf_counter() - t1, "docs": docs, "tokens": tokens,
            "first_batch_s": first[0] if first else None}


def epoch_icefloe(head: str, dataset: str, batch_size: int) -> dict[str, Any]:
    """CacheDataset (window shuffle) through DataLoader(num_workers=0)."""
    from torch.utils.data import DataLoader

    from icefloe.torch import CacheDataset

    ds = CacheDataset(head, dataset, batch_size=batch_size, drop_last=False)
    return _epochs(ds, DataLoader(ds, batch_size=None, num_workers=0))


def epoch_parquet(files: list[str], model: str, workers: int) -> dict[str, Any]:
    """Parquet + Python sentencepiece in the loop (workers=0) or in
    persistent DataLoader workers: the demo's baseline, without truncation."""
    from torch.utils.data import DataLoader

    from icefloe_demo.text import ParquetTokenDataset

    ds = ParquetTokenDataset(files, DOC_BATCH, None, model, max_tokens=1 << 30)
    loader = DataLoader(ds, batch_size=None, num_workers=workers,
                        multiprocessing_context="forkserver" if workers else None,
                        persistent_workers=bool(workers))
    return _epochs(ds, loader)


WORKERS = {"python_sentencepiece": python_sentencepiece, "python_tokenizers": python_tokenizers,
           "epoch_icefloe": epoch_icefloe, "epoch_parquet": epoch_parquet}


def _worker(name: str, args: dict[str, Any]) -> Any:
    argv = [sys.executable, "-m", "benchmarks.tokenization", name, json.dumps(args)]
    out = subprocess.run(argv, cwd=common.ROOT, env=common.child_env(ONE_THREAD),
                         capture_output=True, text=True, timeout=1800)
    if out.returncode != 0:
        raise RuntimeError(f"worker {name} failed ({out.returncode}):\n{out.stderr[-4000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


# -- the run -----------------------------------------------------------------------


def _node_cpu(cluster: Any) -> float:
    return sum(common.cpu_seconds(n.popen.pid) for n in cluster.nodes)


def _load(client: Any, cluster: Any, name: str, source: str, **kwargs: Any) -> dict[str, Any]:
    cpu0 = _node_cpu(cluster)
    with common.Timer() as t:
        desc = client.load(name, source, **kwargs)
    return {"seconds": t.seconds, "node_cpu_seconds": _node_cpu(cluster) - cpu0,
            "rows": desc["rows"], "bytes": desc["bytes"]}


def run(env: common.Env) -> dict[str, Any]:
    import sentencepiece as spm

    import icefloe

    cfg, log = env.cfg, env.log
    corpus = _corpus(env)
    source, files = corpus["metadata"], corpus["files"]
    sp = spm.SentencePieceProcessor(model_file=corpus["spm"])
    with icefloe.LocalCluster(num_nodes=2, memory_limit=None,
                              log_dir=env.log_dir(NAME)) as cluster, cluster.client() as client:
        # 1 and 4: raw and tokenizing loads, node CPU; 1: the Python tokenizers.
        def measure_load(v: str, r: int) -> dict[str, Any]:
            name = f"{v.replace(' ', '-')}-{r}"
            if v == "raw load":
                res = _load(client, cluster, name, source, columns=["review_id", "text", "stars"])
            elif v == "tokenizing load":
                res = _load(client, cluster, name, source, transform=_spec(corpus["spm"]))
            elif v == "python sentencepiece":
                return _worker("python_sentencepiece", {"files": files, "model": corpus["spm"]})
            else:
                return _worker("python_tokenizers", {"files": files, "model": corpus["hf"]})
            client.evict(name)
            return res

        loads = common.interleaved(["raw load", "tokenizing load", "python sentencepiece",
                                    "python tokenizers"], cfg.repeats, measure_load, log)
        text_bytes = loads["python sentencepiece"][0]["text_bytes"]
        tokens = loads["python sentencepiece"][0]["tokens"]
        docs = loads["python sentencepiece"][0]["docs"]
        node_cpu = [t["node_cpu_seconds"] - r["node_cpu_seconds"]
                    for t, r in zip(loads["tokenizing load"], loads["raw load"], strict=True)]
        node_mb_per_cpu_s = [text_bytes / 1e6 / max(c, 1e-9) for c in node_cpu]
        mb_per_cpu_s = {"nodes": common.median(node_mb_per_cpu_s)}
        for v in ("python sentencepiece", "python tokenizers"):
            mb_per_cpu_s[v] = common.median(text_bytes / 1e6 / x["cpu_seconds"]
                                            for x in loads[v])

        # 2 and 3: the tokenized and packed copies, kept; epochs over each source.
        first_load = _load(client, cluster, "reviews_tok", source, transform=_spec(corpus["spm"]))
        packed = _load(client, cluster, "reviews_packed", source,
                       transform=_packed_spec(corpus["spm"], sp.eos_id()))
        # Tokens per document as the packed copy counts them (BOS, text, EOS).
        doc_tokens = tokens / docs
        packed_batch = max(1, round(DOC_BATCH * doc_tokens / SEQ_LEN))

        def measure_epoch(v: str, r: int) -> dict[str, Any]:
            if v == "icefloe packed":
                res = _worker("epoch_icefloe", {"head": cluster.head_uri,
                                                "dataset": "reviews_packed",
                                                "batch_size": packed_batch})
                res["docs"] = res["tokens"] / doc_tokens
            else:
                res = _worker("epoch_parquet", {"files": files, "model": corpus["spm"],
                                                "workers": 2 if "workers" in v else 0})
            res["docs_per_s"] = res["docs"] / res["seconds"]
            return res

        epochs = common.interleaved(["icefloe packed", "tokenize in loop",
                                     "tokenize in 2 workers"], cfg.repeats, measure_epoch, log)

        # 3: a second job asks for the same transform under its own name.
        def second_job(v: str, r: int) -> dict[str, Any]:
            with common.Timer() as t:
                client.load(f"second-{r}", source, transform=_spec(corpus["spm"]))
            res = _worker("epoch_icefloe", {"head": cluster.head_uri, "dataset": f"second-{r}",
                                            "batch_size": DOC_BATCH})
            # The load call, then the job's own first batch (its interpreter's
            # start-up left out: every job pays it, cached or not).
            return {"load_to_first_batch_s": t.seconds + res["first_batch_s"],
                    "load_seconds": t.seconds, "first_batch_s": res["first_batch_s"]}

        second = common.interleaved(["second job"], cfg.repeats, second_job, log)

    return _report(cfg, corpus, loads, mb_per_cpu_s, epochs, first_load, packed, second,
                   text_bytes, doc_tokens)


def _report(cfg: common.Config, corpus: dict[str, Any], loads: dict[str, list[dict]],
            mb_per_cpu_s: dict[str, float], epochs: dict[str, list[dict]],
            first_load: dict[str, Any], packed: dict[str, Any], second: dict[str, list[dict]],
            text_bytes: int, doc_tokens: float) -> dict[str, Any]:
    docs_s = {v: common.median(x["docs_per_s"] for x in runs) for v, runs in epochs.items()}
    in_loop = common.paired_ratio(epochs, "icefloe packed", "tokenize in loop", "docs_per_s")
    in_workers = common.paired_ratio(epochs, "icefloe packed", "tokenize in 2 workers",
                                     "docs_per_s")
    load_ratio = common.paired_ratio(loads, "tokenizing load", "raw load", "seconds")
    to_first = common.median(x["load_to_first_batch_s"] for x in second["second job"])
    rows = [["nodes (C++ SentencePiece)", mb_per_cpu_s["nodes"], 1.0]]
    rows += [[v, mb_per_cpu_s[v], mb_per_cpu_s["nodes"] / mb_per_cpu_s[v]]
             for v in ("python sentencepiece", "python tokenizers")]
    text = common.print_table(
        f"tokenization throughput: {corpus['rows']:,} reviews, {text_bytes / 1e6:.1f} MB of "
        f"text, MB per CPU-second", ["tokenizer", "MB/CPU-s", "nodes / this"], rows)
    text += "\n" + common.print_table(
        f"epoch in documents/s ({doc_tokens:.1f} tokens a document; packed rows of {SEQ_LEN})",
        ["source", "docs/s", "icefloe / this"],
        [[v, s, docs_s["icefloe packed"] / s] for v, s in docs_s.items()])
    targets = [
        common.target("tokenize: node MB/CPU-s / Python sentencepiece", "report", 0,
                      mb_per_cpu_s["nodes"] / mb_per_cpu_s["python sentencepiece"]),
        common.target("tokenize: node MB/CPU-s / Hugging Face tokenizers", "report", 0,
                      mb_per_cpu_s["nodes"] / mb_per_cpu_s["python tokenizers"]),
        common.target("tokenize: packed-token epoch / tokenizing in the loop (docs/s)", ">=",
                      20, in_loop),
        common.target("tokenize: packed-token epoch / tokenizing in 2 DataLoader workers "
                      "(docs/s)", "report", 0, in_workers),
        common.target("tokenize: second job, load call to first batch (s; first load "
                      f"{first_load['seconds']:.2f} s)", "report", 0, to_first),
        common.target("tokenize: load time, tokenizing / raw", "report", 0, load_ratio),
    ]
    notes = [f"tokenize: nodes {mb_per_cpu_s['nodes']:.1f} MB/CPU-s, Python sentencepiece "
             f"{mb_per_cpu_s['python sentencepiece']:.1f}, tokenizers "
             f"{mb_per_cpu_s['python tokenizers']:.1f}; docs/s: "
             + ", ".join(f"{v} {s:,.0f}" for v, s in docs_s.items())
             + f"; packed copy {packed['rows']:,} rows of {SEQ_LEN} loaded in "
             f"{packed['seconds']:.2f} s"]
    result = {"name": NAME, "corpus": corpus, "loads": loads, "mb_per_cpu_s": mb_per_cpu_s,
              "epochs": epochs, "docs_per_s": docs_s, "first_load": first_load,
              "packed_load": packed, "second_job": second, "targets": targets,
              "notes": notes, "table": text}
    common.write_result(cfg, NAME, result)
    return result


if __name__ == "__main__":
    worker_main(WORKERS)
