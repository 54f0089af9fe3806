"""Hugging Face tokenizer.json components beyond BERT's and byte-level BPE's
(issue 43): normalizers Lowercase, Strip, StripAccents, Replace (string
and regex) and Prepend; pre-tokenizers Digits, Punctuation (every
behavior), Whitespace, WhitespaceSplit and Metaspace (every prepend_scheme,
split or not, another replacement); the RobertaProcessing post-processor;
and the SentencePiece shape of Llama-2 and Mistral (Metaspace + BPE with
byte_fallback, and its legacy Prepend + Replace form). Each on a tokenizer
trained here with the `tokenizers` trainers; the data nodes' ids equal the
package's `Tokenizer.from_file(path).encode(text, add_special_tokens=S).ids`
on the machine's gettext catalogs (100+ languages) and adversarial strings.
What stays unsupported is refused by the head, naming the JSON path."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pyarrow as pa
import pytest
from iceberg_util import Warehouse
from test_hf_bpe import BYTES, MORE, compare, save
from test_hf_tokenizer import (
    ADVERSARIAL,
    _set,
    bert_like,
    gettext_corpus,
    reference,
    refused_then_loads,
)

import icefloe

tk = pytest.importorskip("tokenizers")

# Around SentencePiece's ▁ and the added tokens of the Llama-2 shape.
SPM = ["▁already▁marked", "▁▁ two ▁ marks", "<s>hello</s> world", " <s> x</s>", "hi<s>",
       "<s>", "</s>  ", "  leading", "trailing   ", "ends with ▁", "_under_score_ x", "a\u00a0b",
       "Tab\tand\nnewline", "<unk>ab"]


@pytest.fixture(scope="module")
def texts() -> list[str | None]:
    corpus, locales = gettext_corpus(1_200_000)
    if locales < 100:
        pytest.skip(f"only {locales} locales of gettext catalogs on this machine")
    rng = random.Random(43)
    adversarial = ADVERSARIAL + MORE + SPM
    mixed = [" ".join(rng.sample(corpus, 3)) + " " + rng.choice(adversarial) for _ in range(300)]
    return [None, *adversarial, *corpus, *mixed]


@pytest.fixture(scope="module")
def sample(texts) -> list[str]:
    return [t for t in texts if t][::3]


def train(path: Path, texts: list[str], model, *, normalizer=None, pre_tokenizer=None,
          specials=(), post=None, added=(), edit=None, **trainer) -> str:
    """A tokenizer trained on `texts` with `model`'s trainer (BPE or
    WordPiece), saved to `path`, then changed by `edit(doc)`."""
    tok = tk.Tokenizer(model)
    tok.normalizer = normalizer
    tok.pre_tokenizer = pre_tokenizer
    kind = tk.trainers.WordPieceTrainer if isinstance(model, tk.models.WordPiece) \
        else tk.trainers.BpeTrainer
    tok.train_from_iterator(texts, kind(vocab_size=2000, special_tokens=list(specials),
                                        show_progress=False, **trainer))
    if added:
        tok.add_tokens(list(added))
    if post is not None:
        tok.post_processor = post(tok)
    return save(tok, path, edit)


def variant(path: str, name: str, edit) -> str:
    """A copy of the file at `path`, changed by `edit(doc)`, as `name`."""
    doc = json.loads(Path(path).read_text())
    edit(doc)
    out = Path(path).with_name(f"{name}.json")
    out.write_text(json.dumps(doc))
    return str(out)


def byte_level() -> object:
    """GPT-2's pre-tokenizer: keeps the spaces a normalizer leaves as tokens."""
    return tk.pre_tokenizers.ByteLevel(add_prefix_space=False)


def test_normalizers_equal_the_tokenizers_package(tmp_path, texts, sample):
    n = tk.normalizers
    AT = tk.AddedToken
    alphabet = tk.pre_tokenizers.ByteLevel.alphabet()
    root = tmp_path / "models"
    root.mkdir()

    def bpe(name, normalizer, **kw):
        return train(root / f"{name}.json", sample, tk.models.BPE(), normalizer=normalizer,
                     pre_tokenizer=byte_level(), initial_alphabet=alphabet, **kw)

    models = {
        # Added tokens normalized with the text (and one that is not).
        "lowercase": bpe("lowercase", n.Lowercase(), specials=["<|end|>"],
                         added=[AT("HeLLo", normalized=True), AT("ΣΑΣ", normalized=False)]),
        "strip": bpe("strip", n.Strip()),
        "strip_left": bpe("strip_left", n.Strip(left=True, right=False)),
        "strip_right": bpe("strip_right", n.Strip(left=False, right=True)),
        # Marks removed after decomposing (the usual pairing), and without.
        "accents": bpe("accents", n.Sequence([n.NFKD(), n.StripAccents()])),
        "accents_alone": bpe("accents_alone", n.StripAccents()),
        # Literal patterns (regex metacharacters taken literally); content
        # empty or longer than the match.
        "replace_string": bpe("replace_string", n.Sequence([
            n.Replace("'", "’"), n.Replace("a.", "[a-dot]"), n.Replace("e", ""),
            n.Replace("$(", "^")])),
        "replace_regex": bpe("replace_regex", n.Sequence([
            n.Replace(tk.Regex(r"\s+"), " "), n.Replace(tk.Regex(r"\p{N}+"), "#"),
            n.Replace(tk.Regex(r"(?i)the"), "")])),
        "prepend": bpe("prepend", n.Sequence([n.Prepend("▁"), n.Lowercase()]),
                       added=[AT("hello", normalized=True)]),
    }
    compare(tmp_path, texts, models, [(name, True) for name in models])
    # The variants exercise what they are for.
    strip = tk.Tokenizer.from_file(models["strip"])
    assert strip.encode("  x  ").ids == strip.encode("x").ids



def llama2_post(tok):
    bos = tok.token_to_id("<s>")
    return tk.processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", bos)])


def test_pre_tokenizers_equal_the_tokenizers_package(tmp_path, texts, sample):
    p = tk.pre_tokenizers
    root = tmp_path / "models"
    root.mkdir()

    def bpe(name, pre, **kw):
        # A small alphabet leaves room for merges; the rest is [UNK].
        return train(root / f"{name}.json", sample, tk.models.BPE(unk_token="[UNK]"),
                     pre_tokenizer=pre, specials=["[UNK]"], limit_alphabet=200, **kw)

    def pre(**fields):
        return lambda d: d["pre_tokenizer"].update(fields)

    models = {
        "digits": bpe("digits", p.Digits(individual_digits=False)),
        "digits_individual": bpe("digits_individual", p.Sequence([
            p.WhitespaceSplit(), p.Digits(individual_digits=True)])),
        "punctuation": bpe("punctuation", p.Punctuation()),
        "whitespace": bpe("whitespace", p.Whitespace()),
        "whitespace_split": bpe("whitespace_split", p.WhitespaceSplit()),
        # An added token: where "first" differs from "always".
        "metaspace": bpe("metaspace", p.Metaspace(),
                         added=[tk.AddedToken("</s>", special=True)]),
        # T5's shape: words, then each marked.
        "t5": bpe("t5", p.Sequence([p.WhitespaceSplit(), p.Metaspace()])),
        # Llama-2 / Mistral as transformers converts them: Metaspace
        # (prepend_scheme first, no split) before a BPE with byte_fallback, a BOS
        # template; trained split, as SentencePiece trains.
        "llama2": train(root / "llama2.json", sample,
                        tk.models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True),
                        pre_tokenizer=p.Metaspace(prepend_scheme="first"),
                        specials=["<unk>", "<s>", "</s>", *BYTES], limit_alphabet=150,
                        post=llama2_post, edit=pre(split=False)),
    }
    # Each behavior trained with it, so that merges cross what it joins.
    for behavior in ("removed", "merged_with_previous", "merged_with_next", "contiguous"):
        models[f"punctuation_{behavior}"] = bpe(f"punctuation_{behavior}",
                                                p.Punctuation(behavior=behavior))
    models["metaspace_unsplit"] = bpe("metaspace_unsplit", p.Metaspace(split=False))
    for name, fields in [("never", {"prepend_scheme": "never"}),
                         ("first", {"prepend_scheme": "first"}),
                         ("underscore", {"replacement": "_"}),
                         # An old file's form: add_prefix_space, str_rep, no scheme.
                         ("old_form", {"add_prefix_space": True, "str_rep": "▁"})]:
        models[f"metaspace_{name}"] = variant(models["metaspace"], f"metaspace_{name}",
                                              pre(**fields))
    for name in ("old_form",):
        doc = json.loads(Path(models[f"metaspace_{name}"]).read_text())
        del doc["pre_tokenizer"]["prepend_scheme"], doc["pre_tokenizer"]["split"]
        Path(models[f"metaspace_{name}"]).write_text(json.dumps(doc))
    # The first stage of a Sequence may ask where the text begins.
    models["llama2_sequence"] = variant(models["llama2"], "llama2_sequence", lambda d: _set(
        d, ["pre_tokenizer"], {"type": "Sequence", "pretokenizers": [
            d["pre_tokenizer"], {"type": "Digits", "individual_digits": True}]}))
    # Llama-2's legacy form: the same model behind Prepend + Replace.
    models["llama2_legacy"] = variant(models["llama2"], "llama2_legacy", lambda d: (
        _set(d, ["pre_tokenizer"], None),
        _set(d, ["normalizer"], {"type": "Sequence", "normalizers": [
            {"type": "Prepend", "prepend": "▁"},
            {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}]})))
    # The package's own SentencePiece-style BPE (NFKC, Metaspace).
    spm = tk.implementations.SentencePieceBPETokenizer()
    spm.train_from_iterator(sample, vocab_size=2000, limit_alphabet=300, show_progress=False)
    spm.save(str(root / "spm_bpe.json"))
    models["spm_bpe"] = str(root / "spm_bpe.json")

    columns = [(name, True) for name in models] + [("llama2", False), ("llama2_legacy", False)]
    compare(tmp_path, texts, models, columns)
    # The variants exercise what they are for.
    llama2 = tk.Tokenizer.from_file(models["llama2"])
    assert llama2.encode("<s>hi").tokens != llama2.encode("<s> hi").tokens
    joined = " ".join(x for x in texts[1:200] if x)
    assert set(llama2.encode(joined).ids) & {llama2.token_to_id(b) for b in BYTES}
    for name in models:
        assert len(json.loads(Path(models[name]).read_text())["model"]["merges"]) > 500, name
    first, always = (tk.Tokenizer.from_file(models[k]) for k in ("metaspace_first", "metaspace"))
    assert first.encode("a</s>b").tokens != always.encode("a</s>b").tokens
    unsplit = tk.Tokenizer.from_file(models["metaspace_unsplit"])
    assert any("▁" in t[1:] for t in unsplit.encode(joined).tokens)
    previous = tk.Tokenizer.from_file(models["punctuation_merged_with_previous"])
    tokens = previous.encode(joined).tokens
    assert any(len(t) > 1 and t[-1] in ",.:" for t in tokens)


def test_roberta_processing_equals_the_tokenizers_package(tmp_path, texts, sample):
    """RoBERTa's shape: byte-level BPE, <s> $A </s> (trim_offsets and
    add_prefix_space move offsets only)."""
    specials = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]

    def roberta(tok):
        return tk.processors.RobertaProcessing(("</s>", tok.token_to_id("</s>")),
                                               ("<s>", tok.token_to_id("<s>")),
                                               trim_offsets=False, add_prefix_space=False)

    path = train(tmp_path / "roberta.json", sample, tk.models.BPE(), pre_tokenizer=byte_level(),
                 specials=specials, post=roberta,
                 initial_alphabet=tk.pre_tokenizers.ByteLevel.alphabet())
    models = {"roberta": path}
    compare(tmp_path, texts, models, [("roberta", True), ("roberta", False)])
    ids = tk.Tokenizer.from_file(path).encode("hi").ids
    assert (ids[0], ids[-1]) == (0, 2)


def test_unigram_equals_the_tokenizers_package(tmp_path, texts, sample):
    """SentencePiece unigram files (T5, ALBERT): Viterbi over the pieces'
    scores, unknown characters fused into one unk, byte_fallback."""
    p, n = tk.pre_tokenizers, tk.normalizers
    root = tmp_path / "models"
    root.mkdir()

    def unigram(name, texts, **kw):
        tok = tk.Tokenizer(tk.models.Unigram())
        tok.normalizer = kw.pop("normalizer", None)
        tok.pre_tokenizer = kw.pop("pre_tokenizer", p.Metaspace())
        tok.train_from_iterator(texts, tk.trainers.UnigramTrainer(
            vocab_size=8000, special_tokens=["<pad>", "</s>", "<unk>"], unk_token="<unk>",
            show_progress=False, **kw))
        eos = tok.token_to_id("</s>")
        tok.post_processor = tk.processors.TemplateProcessing(single="$A </s>",
                                                              special_tokens=[("</s>", eos)])
        tok.save(str(root / f"{name}.json"))
        return str(root / f"{name}.json")

    def byte_fallback(d):
        low = min(score for _, score in d["model"]["vocab"])
        d["model"]["vocab"] += [[b, low - 1.0] for b in BYTES]
        d["model"]["byte_fallback"] = True

    models = {
        # Trained on ASCII text: the other scripts' characters are unknown.
        "unigram": unigram("unigram", [t for t in sample if t.isascii()]),
        # ALBERT-like: normalized, short pieces, every script.
        "albert": unigram("albert", sample, normalizer=n.Sequence([n.NFKC(), n.Lowercase()]),
                          pre_tokenizer=p.WhitespaceSplit(), max_piece_length=8),
    }
    models["unigram_fallback"] = variant(models["unigram"], "unigram_fallback", byte_fallback)
    # No pre-tokenizer: a whole text is one word (spaces unknown characters).
    models["unigram_whole"] = variant(models["unigram"], "unigram_whole",
                                      lambda d: _set(d, ["pre_tokenizer"], None))
    columns = [(name, True) for name in models] + [("unigram", False)]
    compare(tmp_path, texts, models, columns)
    # The variants exercise what they are for.
    joined = " ".join(x for x in texts[1:200] if x)
    for name in ("unigram", "unigram_fallback"):
        tok = tk.Tokenizer.from_file(models[name])
        ids = tok.encode(joined.replace("<unk>", "")).ids
        uses_bytes = bool(set(ids) & {tok.token_to_id(b) for b in BYTES})
        assert (tok.token_to_id("<unk>") in ids, uses_bytes) == (
            (True, False) if name == "unigram" else (False, True)), name


def test_unigram_reads_scores_as_the_library_does(tmp_path):
    """The library's JSON parser (serde_json without float_roundtrip) reads
    -6.1316232245374716 one ULP below the correctly rounded value; with it,
    "a" + "b" ties "ab" exactly and the first offered, "ab", stays. Read
    correctly, "a" + "b" would win."""
    vocab = [["<unk>", 0.0], ["a", -6.1316232245374716], ["b", -1.0], ["ab", -7.131623224537472]]
    doc = json.loads(tk.Tokenizer(tk.models.Unigram()).to_str())
    doc["model"] = {"type": "Unigram", "unk_id": 0, "vocab": vocab, "byte_fallback": False}
    path = tmp_path / "ulp.json"
    path.write_text(json.dumps(doc))
    texts = ["ab", "abab", "ba"]
    want = reference(str(path), texts)
    assert want == [[3], [3, 3], [2, 1]]
    t = Warehouse(tmp_path / "wh").create("t", pa.table({"text": texts}))
    spec = {"columns": [{"name": "ids", "tokenize": {"column": "text", "model": str(path)}}]}
    with icefloe.LocalCluster(num_nodes=1, log_dir=tmp_path / "logs") as cluster, \
            cluster.client() as client:
        client.load("t", t.metadata_location, transform=spec)
        assert client.read("t")["ids"].to_pylist() == want


def _normalizer(value):
    return lambda d: _set(d, ["normalizer"], value)


@pytest.mark.parametrize("edit, match", [
    (_normalizer({"type": "Strip", "strip_left": True}),
     r"normalizer.strip_right: missing \(true or false is needed\)"),
    (_normalizer({"type": "Replace", "pattern": {"Regex": "(a"}, "content": ""}),
     r"normalizer.pattern.Regex: Oniguruma refuses the pattern: end pattern with unmatched "
     r"parenthesis"),
    (_normalizer({"type": "Replace", "pattern": {"Glob": "a*"}, "content": ""}),
     r"normalizer.pattern: must be \{\"String\": ...\} or \{\"Regex\": ...\}"),
    (_normalizer({"type": "Replace", "pattern": {"String": "a"}}),
     r"normalizer.content: missing \(a string is needed\)"),
    (_normalizer({"type": "Prepend", "prepend": 5}), r"normalizer.prepend: must be a string"),
    (_normalizer({"type": "Sequence", "normalizers": [
        {"type": "StripAccents"}, {"type": "Lowercase", "locale": "tr"}]}),
     r"normalizer.normalizers\[1\].locale: option not supported"),
    (_normalizer({"type": "Precompiled", "precompiled_charsmap": ""}),
     r"normalizer: Precompiled is not supported"),
])
def test_bad_normalizers_are_refused_by_the_head(tmp_path, edit, match):
    text = "hello worlds"
    got, good = refused_then_loads(tmp_path, text, bert_like(tmp_path, edit), {}, match,
                                   lambda: bert_like(tmp_path, lambda d: None))
    assert got == reference(good, [text])


def _pre(value, normalizer=None):
    return lambda d: (_set(d, ["normalizer"], normalizer), _set(d, ["pre_tokenizer"], value))


FIRST = {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first", "split": False}


@pytest.mark.parametrize("edit, match", [
    (_pre({"type": "Digits"}),
     r"pre_tokenizer.individual_digits: must be true or false \(the library requires it\)"),
    (_pre({"type": "Punctuation", "behavior": "Merged"}),
     r'pre_tokenizer.behavior: "Merged" is not Removed, Isolated, MergedWithPrevious'),
    (_pre({"type": "Whitespace", "pattern": "x"}), r"pre_tokenizer.pattern: option not supported"),
    (_pre({**FIRST, "replacement": "ab"}), r"pre_tokenizer.replacement: must be one character"),
    (_pre({**FIRST, "prepend_scheme": "sometimes"}),
     r'pre_tokenizer.prepend_scheme: "sometimes" is not "always", "first" or "never"'),
    (_pre({"type": "Metaspace", "replacement": "▁", "add_prefix_space": False}),
     r'pre_tokenizer.add_prefix_space: false without prepend_scheme "never"'),
    # Where the text begins is known only before a normalizer or another stage
    # has moved it.
    (_pre({"type": "Sequence", "pretokenizers": [{"type": "WhitespaceSplit"}, FIRST]}),
     r'pre_tokenizer.pretokenizers\[1\]: prepend_scheme "first" after another pre-tokenizer '
     r"is not supported"),
    (_pre(FIRST, {"type": "Lowercase"}),
     r'pre_tokenizer: prepend_scheme "first" with a normalizer is not supported'),
    (_pre({"type": "UnicodeScripts"}), r"pre_tokenizer: UnicodeScripts is not supported"),
    (lambda d: _set(d, ["model"], {"type": "Unigram", "vocab": [["<unk>", 0.0], ["a", -1]]}),
     r"model.unk_id: null is not supported"),
    (lambda d: _set(d, ["model"], {"type": "Unigram", "unk_id": 2,
                                   "vocab": [["<unk>", 0.0], ["a", -1]]}),
     r"model.unk_id: 2 is out of range \[0, 1\]"),
    (lambda d: _set(d, ["model"], {"type": "Unigram", "unk_id": 0,
                                   "vocab": [["<unk>", 0.0], ["a", -1], ["a", -2]]}),
     r'model.vocab\[2\]: "a" is also model.vocab\[1\]'),
    (lambda d: _set(d, ["model"], {"type": "Unigram", "unk_id": 0,
                                   "vocab": [["<unk>", 0.0], ["a", "-1"]]}),
     r'model.vocab\[1\]: must be \[piece, score\]'),
    (lambda d: _set(d, ["post_processor"], {"type": "RobertaProcessing", "cls": ["[CLS]", 1],
                                            "sep": ["[SEP]", 2], "add_prefix_space": "yes"}),
     r"post_processor.add_prefix_space: must be true or false"),
])
def test_bad_pre_tokenizers_are_refused_by_the_head(tmp_path, edit, match):
    text = "hello worlds"
    got, good = refused_then_loads(tmp_path, text, bert_like(tmp_path, edit), {}, match,
                                   lambda: bert_like(tmp_path, lambda d: None))
    assert got == reference(good, [text])
