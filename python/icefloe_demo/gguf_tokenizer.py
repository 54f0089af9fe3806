"""Hugging Face tokenizer.json files rebuilt from llama.cpp's GGUF
vocabularies (issue 43, "real vocabularies"), and the reference ids that
come with them.

llama.cpp's `models/` folder (vendored by the pinned llama-cpp-python sdist,
fetched by tokenizer_files.llama_cpp_file) holds, per model family, a
vocabulary-only GGUF file (`ggml-vocab-<family>.gguf`: tokens, merges, token
types, the pre-tokenizer's name `tokenizer.ggml.pre`, BOS/EOS ids) and test
strings (`.inp`) with the ids Hugging Face's tokenizer gave for them
(`.out`, `encode(text, add_special_tokens=False)`). A GGUF file keeps the
vocabulary but not the normalizer, pre-tokenizer and post-processor: those
are the family's, written here as the model repositories' tokenizer.json has
them: byte-level BPE families by `tokenizer.ggml.pre` (FAMILIES), Llama-2's
SentencePiece BPE (merges derived from the scores, as transformers does),
Gemma 4's BPE and BERT-uncased's WordPiece. The tests check each rebuilt
file against the `.out` ids with the `tokenizers` package before using it,
so the rebuild is proven, not assumed. The `.out` ids have no special
tokens: the BOS a post-processor adds follows the GGUF file's
`add_bos_token` (else the family's), as llama.cpp does, and is not proven
by them.

    python -m icefloe_demo.gguf_tokenizer   # convert every family, print the paths

The rebuilt files are cached under <cache>/gguf-<CONVERTER>/<family>/.
"""

from __future__ import annotations

import json
import re
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from icefloe_demo.tokenizer_files import _cache_bytes, cache_dir, llama_cpp_file

# Bumped when the conversion changes, so that a cached file is rebuilt.
CONVERTER = 2

# llama.cpp's token types (gguf-py's TokenType).
NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6

_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?",
            10: "<Q", 11: "<q", 12: "<d"}
_STRING, _ARRAY = 8, 9


def read_metadata(path: Path | str) -> dict[str, Any]:
    """The key-value metadata of a GGUF file (versions 2 and 3; the tensor
    infos after it are not read). Raises ValueError naming the file and the
    byte offset when it is not a well-formed GGUF file."""
    data = Path(path).read_bytes()
    pos = 0

    def take(fmt: str) -> Any:
        nonlocal pos
        size = struct.calcsize(fmt)
        if pos + size > len(data):
            raise ValueError(f"{path}: truncated GGUF file at byte {pos}")
        value = struct.unpack_from(fmt, data, pos)
        pos += size
        return value[0] if len(value) == 1 else value

    def string() -> str:
        nonlocal pos
        n = take("<Q")
        if pos + n > len(data):
            raise ValueError(f"{path}: a string of {n} bytes at byte {pos} runs past the end")
        raw = data[pos:pos + n]
        pos += n
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise ValueError(f"{path}: the string at byte {pos - n} is not UTF-8: {e}") from e

    def value(kind: int) -> Any:
        if kind == _STRING:
            return string()
        if kind == _ARRAY:
            item_kind, n = take("<IQ")
            if item_kind in _SCALARS:  # one unpack for the whole array
                fmt = _SCALARS[item_kind]
                return list(take(f"<{n}{fmt[1]}")) if n != 1 else [take(fmt)]
            return [value(item_kind) for _ in range(n)]
        if kind not in _SCALARS:
            raise ValueError(f"{path}: unknown GGUF value type {kind} at byte {pos - 4}")
        return take(_SCALARS[kind])

    if data[:4] != b"GGUF":
        raise ValueError(f"{path}: not a GGUF file (magic {data[:4]!r})")
    pos = 4
    version, _tensors, count = take("<IQQ")
    if version not in (2, 3):
        raise ValueError(f"{path}: GGUF version {version} is not 2 or 3")
    meta: dict[str, Any] = {}
    for _ in range(count):
        key = string()
        meta[key] = value(take("<I"))
    return meta


def _split(regex: str) -> dict:
    return {"type": "Split", "pattern": {"Regex": regex}, "behavior": "Isolated",
            "invert": False}


def _byte_level(use_regex: bool, trim_offsets: bool = True) -> dict:
    return {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": trim_offsets,
            "use_regex": use_regex}


def _sequence(*pretokenizers: dict) -> dict:
    return {"type": "Sequence", "pretokenizers": list(pretokenizers)}


@dataclass(frozen=True)
class Family:
    """What a family's tokenizer.json has that its GGUF file does not."""

    pre_tokenizer: dict
    normalizer: dict | None = None
    # ByteLevel post-processor settings (GPT-2's files have add_prefix_space
    # true; it changes offsets only, never ids).
    post_byte_level: dict = field(default_factory=lambda: {
        "type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False,
        "use_regex": True})
    ignore_merges: bool = False
    add_bos: bool = False  # when the GGUF file does not say


QWEN2_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|"
               r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN35_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}|"
                r" ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
LLAMA3_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
                r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
# Escaped: some of these characters have other NFC forms an editor may
# substitute, and Oniguruma then refuses a reversed range.
DEEPSEEK_LETTERS = (
    "A-Za-z\xb5\xc0-\xd6\xd8-\xf6\xf8-\u01ba\u01bc-\u01bf\u01c4-\u0293\u0295-\u02af\u0370-"
    "\u0373\u0376\u0377\u037b-\u037d\u037f\u0386\u0388-\u038a\u038c\u038e-\u03a1\u03a3-"
    "\u03f5\u03f7-\u0481\u048a-\u052f\u0531-\u0556\u10a0-\u10c5\u13a0-\u13f5\u13f8-\u13fd"
    "\u1c90-\u1cba\u1cbd-\u1cbf\u1d00-\u1d2b\u1d6b-\u1d77\u1d79-\u1d9a\u1e00-\u1f15\u1f18-"
    "\u1f1d\u1f20-\u1f45\u1f48-\u1f4d\u1f50-\u1f57\u1f59\u1f5b\u1f5d\u1f5f-\u1f7d\u1f80-"
    "\u1fb4\u1fb6-\u1fbc\u1fbe\u1fc2-\u1fc4\u1fc6-\u1fcc\u1fd0-\u1fd3\u1fd6-\u1fdb\u1fe0-"
    "\u1fec\u1ff2-\u1ff4\u1ff6-\u1ffc\u2102\u2107\u210a-\u2113\u2115\u2119-\u211d\u2124"
    "\u2126\u2128\u212a-\u212d\u212f-\u2134\u2139\u213c-\u213f\u2145-\u2149\u214e\u2183"
    "\u2184\u2c00-\u2c7b\u2c7e-\u2ce4\u2ceb-\u2cee\u2cf2\u2cf3\ua640-\ua66d\ua680-\ua69b"
    "\ua722-\ua76f\ua771-\ua787\ua78b-\ua78e\uab70-\uabbf\ufb00-\ufb06\ufb13-\ufb17\uff21-"
    "\uff3a\uff41-\uff5a\U00010400-\U0001044f\U000104b0-\U000104d3\U000104d8-\U000104fb"
    "\U00010c80-\U00010cb2\U00010cc0-\U00010cf2\U000118a0-\U000118df\U0001e900-\U0001e943")
DEEPSEEK_PUNCTUATION = r"\s?[!-/:-~" "\uff01-\uff0f\uff1a-\uff5e\u2018-\u201f\u3000-\u3002]+"
CJK_HANGUL = "[\u4e00-\u9fa5\u0800-\u4e00\uac00-\ud7ff]+"
DIGITS = {"type": "Digits", "individual_digits": True}
NFC = {"type": "NFC"}

# Keyed by the GGUF file's `tokenizer.ggml.pre`; written from the model
# repositories' tokenizer.json (llama.cpp's convert_hf_to_gguf_update.py names
# the repository of each) and proven by the `.out` ids.
FAMILIES: dict[str, Family] = {
    # openai-community/gpt2
    "gpt-2": Family(_byte_level(use_regex=True)),
    # Qwen/Qwen1.5-7B (Qwen2 and Qwen2.5 share the vocabulary and stages)
    "qwen2": Family(_sequence(_split(QWEN2_REGEX), _byte_level(False, trim_offsets=False)),
                    normalizer=NFC,
                    post_byte_level={"type": "ByteLevel", "add_prefix_space": False,
                                     "trim_offsets": False, "use_regex": False}),
    "qwen35": Family(_sequence(_split(QWEN35_REGEX), _byte_level(False, trim_offsets=False)),
                     post_byte_level={"type": "ByteLevel", "add_prefix_space": False,
                                      "trim_offsets": False, "use_regex": False}),
    # meta-llama/Meta-Llama-3-8B
    "llama-bpe": Family(_sequence(_split(LLAMA3_REGEX), _byte_level(False)),
                        ignore_merges=True, add_bos=True),
    # bigcode/starcoder2-3b, smallcloudai/Refact-1_6-base
    "starcoder": Family(_sequence(DIGITS, _byte_level(True))),
    "refact": Family(_sequence(DIGITS, _byte_level(True))),
    # CohereForAI/c4ai-command-r-v01
    "command-r": Family(_sequence(DIGITS, _byte_level(True)), normalizer=NFC),
    # mosaicml/mpt-7b (EleutherAI/gpt-neox-20b's tokenizer)
    "mpt": Family(_byte_level(True), normalizer=NFC),
    # tiiuae/falcon-7b
    "falcon": Family(_sequence({"type": "Punctuation", "behavior": "Contiguous"},
                               _byte_level(True),
                               {"type": "Digits", "individual_digits": False},
                               _split("[0-9][0-9][0-9]"))),
    # deepseek-ai/deepseek-llm-7b-base
    "deepseek-llm": Family(_sequence(
        _split("[\r\n]"), _split(r"\s?[" + DEEPSEEK_LETTERS + "]+"),
        _split(DEEPSEEK_PUNCTUATION), _split(r"\s+$"), _split(CJK_HANGUL),
        DIGITS, _byte_level(False))),
    # deepseek-ai/deepseek-coder-6.7b-base
    "deepseek-coder": Family(_sequence(
        _split("[\r\n]"), _split(r"\s?\p{L}+"), _split(r"\s?\p{P}+"), _split(CJK_HANGUL),
        DIGITS, _byte_level(False))),
}


def _is_placeholder(token: str, token_id: int, kind: int) -> bool:
    """llama.cpp's converter pads a vocabulary to the model's embedding rows
    with "[PAD<id>]" tokens (USER_DEFINED, or UNKNOWN in older files) that
    the Hugging Face file does not have."""
    return kind in (USER_DEFINED, UNKNOWN) and token == f"[PAD{token_id}]"


class _Meta:
    """A GGUF file's metadata, with errors naming the file and the key."""

    def __init__(self, path: Path | str) -> None:
        self.path = path
        self.meta = read_metadata(path)

    def need(self, key: str) -> Any:
        if key not in self.meta:
            raise ValueError(f"{self.path}: no {key}")
        return self.meta[key]

    def get(self, key: str, default: Any) -> Any:
        return self.meta.get(key, default)

    def fail(self, why: str) -> ValueError:
        return ValueError(f"{self.path}: {why}")

    def token(self, key: str, tokens: list[str]) -> tuple[str, int]:
        """(token, id) of the id `key` names, checked to be a token's."""
        i = self.need(key)
        if not isinstance(i, int) or not 0 <= i < len(tokens):
            raise self.fail(f"{key} {i!r} is not a token id (0..{len(tokens) - 1})")
        return tokens[i], i

    def vocabulary(self, special_kinds: tuple[int, ...], rename=lambda t: t):
        """(vocab, added tokens, tokens by id): every token but llama.cpp's
        placeholders, renamed by `rename`; the added tokens are those of
        `special_kinds` (USER_DEFINED ones are not special)."""
        tokens = self.need("tokenizer.ggml.tokens")
        kinds = self.need("tokenizer.ggml.token_type")
        if len(tokens) != len(kinds):
            raise self.fail(f"{len(tokens)} tokens but {len(kinds)} token types")
        vocab: dict[str, int] = {}
        added = []
        for i, (token, kind) in enumerate(zip(tokens, kinds, strict=True)):
            if _is_placeholder(token, i, kind):
                continue
            name = rename(token)
            if name in vocab:
                raise self.fail(f"tokenizer.ggml.tokens[{i}] {token!r} is also token "
                                f"{vocab[name]}")
            vocab[name] = i
            if kind in special_kinds:
                added.append({"id": i, "content": name, "single_word": False,
                              "lstrip": False, "rstrip": False,
                              "normalized": kind == USER_DEFINED,
                              "special": kind != USER_DEFINED})
        return vocab, added, tokens


def _template(single: list[str], pair: list[tuple[str, int]], ids: dict[str, int]) -> dict:
    """A TemplateProcessing post-processor: `single` and `pair` list special
    tokens and "A"/"B" (with type ids in `pair`); `ids` gives the tokens' ids."""
    def piece(name: str, type_id: int) -> dict:
        if name in ("A", "B"):
            return {"Sequence": {"id": name, "type_id": type_id}}
        return {"SpecialToken": {"id": name, "type_id": type_id}}
    return {"type": "TemplateProcessing",
            "single": [piece(name, 0) for name in single],
            "pair": [piece(name, type_id) for name, type_id in pair],
            "special_tokens": {name: {"id": name, "ids": [i], "tokens": [name]}
                               for name, i in ids.items()}}


def _bos_template(meta: _Meta, tokens: list[str]) -> dict:
    """`<bos> $A` and `<bos> $A <bos>:1 $B:1`, as Llama's files have it."""
    bos, bos_id = meta.token("tokenizer.ggml.bos_token_id", tokens)
    return _template([bos, "A"], [(bos, 0), ("A", 0), (bos, 1), ("B", 1)], {bos: bos_id})


def _merges(meta: _Meta) -> list[list[str]]:
    """The file's merges ("a b" strings) as [a, b] pairs."""
    merges = []
    for i, merge in enumerate(meta.need("tokenizer.ggml.merges")):
        pair = merge.split(" ")
        if len(pair) != 2 or not all(pair):
            raise meta.fail(f"tokenizer.ggml.merges[{i}] {merge!r} is not two tokens "
                            "separated by one space")
        merges.append(pair)
    return merges


def _byte_level_bpe(meta: _Meta) -> dict:
    pre = meta.need("tokenizer.ggml.pre")
    if pre not in FAMILIES:
        raise meta.fail(f"tokenizer.ggml.pre {pre!r} is not one of {sorted(FAMILIES)}")
    family = FAMILIES[pre]
    vocab, added, tokens = meta.vocabulary((CONTROL, USER_DEFINED))
    merges = _merges(meta)
    post = family.post_byte_level
    if meta.get("tokenizer.ggml.add_bos_token", family.add_bos):
        post = {"type": "Sequence", "processors": [post, _bos_template(meta, tokens)]}
    return {
        "added_tokens": added, "normalizer": family.normalizer,
        "pre_tokenizer": family.pre_tokenizer, "post_processor": post,
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True,
                    "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None,
                  "continuing_subword_prefix": None, "end_of_word_suffix": None,
                  "fuse_unk": False, "byte_fallback": False,
                  "ignore_merges": family.ignore_merges, "vocab": vocab, "merges": merges},
    }


def _sentencepiece_merges(vocab: dict[str, int], scores: dict[str, float]) -> list[list[str]]:
    """The merges of a SentencePiece BPE model, derived from its pieces and
    scores as transformers' SentencePieceExtractor does (a GGUF file, like a
    `.model` file, has none): every split of a piece into two pieces, the
    best-scored piece's first, then the longer left part, then right."""
    merges = []
    for piece, score in scores.items():
        local = [(piece[:j], piece[j:], score) for j in range(1, len(piece))
                 if piece[:j] in vocab and piece[j:] in vocab]
        local.sort(key=lambda m: (vocab[m[0]], vocab[m[1]]))
        merges += local
    merges.sort(key=lambda m: (m[2], len(m[0]), len(m[1])), reverse=True)
    return [[left, right] for left, right, _ in merges]


def _sentencepiece_bpe(meta: _Meta) -> dict:
    """Llama-2's shape: ▁ prepended and for spaces (the legacy normalizer),
    no pre-tokenizer, BPE with byte fallback and fused unknowns."""
    pre = meta.need("tokenizer.ggml.pre")
    if pre != "default" or not meta.get("tokenizer.ggml.add_space_prefix", True):
        raise meta.fail(f"tokenizer.ggml.pre {pre!r} with add_space_prefix "
                        f"{meta.get('tokenizer.ggml.add_space_prefix', True)}: only "
                        "Llama-2's SentencePiece shape ('default', true) is converted")
    vocab, added, tokens = meta.vocabulary((UNKNOWN, CONTROL, USER_DEFINED))
    scores = meta.need("tokenizer.ggml.scores")
    if len(scores) != len(tokens):
        raise meta.fail(f"{len(tokens)} tokens but {len(scores)} scores")
    unk, _ = meta.token("tokenizer.ggml.unknown_token_id", tokens)
    post = _bos_template(meta, tokens) if meta.get("tokenizer.ggml.add_bos_token", True) \
        else None
    return {
        "added_tokens": added,
        "normalizer": {"type": "Sequence", "normalizers": [
            {"type": "Prepend", "prepend": "\u2581"},
            {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]},
        "pre_tokenizer": None, "post_processor": post, "decoder": None,
        "model": {"type": "BPE", "dropout": None, "unk_token": unk,
                  "continuing_subword_prefix": None, "end_of_word_suffix": None,
                  "fuse_unk": True, "byte_fallback": True, "ignore_merges": False,
                  "vocab": vocab,
                  "merges": _sentencepiece_merges(vocab, {t: scores[i]
                                                          for t, i in vocab.items()})},
    }


def _gemma4_bpe(meta: _Meta) -> dict:
    """Gemma 4's shape: spaces become ▁ (no ▁ prepended), no pre-tokenizer,
    BPE on the file's merges with byte fallback."""
    if meta.get("tokenizer.ggml.add_space_prefix", False):
        raise meta.fail("tokenizer.ggml.add_space_prefix is true: Gemma 4 has none")
    vocab, added, tokens = meta.vocabulary((UNKNOWN, CONTROL, USER_DEFINED))
    merges = _merges(meta)
    post = _bos_template(meta, tokens) if meta.get("tokenizer.ggml.add_bos_token", True) \
        else None
    return {
        "added_tokens": added,
        "normalizer": {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"},
        "pre_tokenizer": None, "post_processor": post, "decoder": None,
        "model": {"type": "BPE", "dropout": None,
                  "unk_token": meta.token("tokenizer.ggml.unknown_token_id", tokens)[0],
                  "continuing_subword_prefix": None, "end_of_word_suffix": None,
                  "fuse_unk": True, "byte_fallback": True, "ignore_merges": False,
                  "vocab": vocab, "merges": merges},
    }


def _wordpiece(meta: _Meta) -> dict:
    """BERT-uncased's shape. llama.cpp writes a word-initial piece with a ▁
    in front and a continuing one without its ##: undone here."""
    pre = meta.need("tokenizer.ggml.pre")
    if pre != "bert-bge":
        raise meta.fail(f"tokenizer.ggml.pre {pre!r} is not 'bert-bge'")

    def rename(token: str) -> str:
        if token.startswith("[") and token.endswith("]"):
            return token
        return token[1:] if token.startswith("\u2581") else "##" + token

    vocab, added, tokens = meta.vocabulary((CONTROL,), rename)
    cls, cls_id = meta.token("tokenizer.ggml.cls_token_id", tokens)
    sep, sep_id = meta.token("tokenizer.ggml.seperator_token_id", tokens)  # llama.cpp's spelling
    return {
        "added_tokens": added,
        "normalizer": {"type": "BertNormalizer", "clean_text": True,
                       "handle_chinese_chars": True, "strip_accents": None,
                       "lowercase": True},
        "pre_tokenizer": {"type": "BertPreTokenizer"},
        "post_processor": _template([cls, "A", sep],
                                    [(cls, 0), ("A", 0), (sep, 0), ("B", 1), (sep, 1)],
                                    {cls: cls_id, sep: sep_id}),
        "decoder": None,
        "model": {"type": "WordPiece",
                  "unk_token": meta.token("tokenizer.ggml.unknown_token_id", tokens)[0],
                  "continuing_subword_prefix": "##", "max_input_chars_per_word": 100,
                  "vocab": vocab},
    }


_MODELS = {"gpt2": _byte_level_bpe, "llama": _sentencepiece_bpe, "gemma4": _gemma4_bpe,
           "bert": _wordpiece}


def tokenizer_json(path: Path | str) -> dict:
    """The Hugging Face tokenizer.json document for the GGUF vocabulary at
    `path`: byte-level BPE (FAMILIES), Llama-2's SentencePiece BPE, Gemma
    4's BPE or BERT-uncased's WordPiece. Raises ValueError naming the file and the key
    when it is none of those."""
    meta = _Meta(path)
    model = meta.need("tokenizer.ggml.model")
    if model not in _MODELS:
        raise meta.fail(f"tokenizer.ggml.model {model!r} is not one of {sorted(_MODELS)}")
    return {"version": "1.0", "truncation": None, "padding": None, **_MODELS[model](meta)}


def converted(family: str) -> Path:
    """The tokenizer.json rebuilt from llama.cpp's `ggml-vocab-<family>.gguf`
    (fetched and converted once, then cached). Raises RuntimeError when the
    sdist cannot be fetched, ValueError when the file cannot be converted."""
    out = cache_dir() / f"gguf-{CONVERTER}" / family / "tokenizer.json"
    if out.exists():
        return out
    doc = tokenizer_json(llama_cpp_file(f"ggml-vocab-{family}.gguf"))
    return _cache_bytes(out, json.dumps(doc, ensure_ascii=False).encode())


def gpt2() -> Path:
    """GPT-2's tokenizer.json (50,257 tokens), rebuilt from its GGUF vocabulary."""
    return converted("gpt-2")


def qwen2() -> Path:
    """Qwen2's tokenizer.json (151,643 tokens and 3 special ones: Qwen1.5,
    Qwen2 and Qwen2.5 share it), rebuilt from its GGUF vocabulary."""
    return converted("qwen2")


def llama3_bpe() -> Path:
    """Llama-3's tokenizer.json (128,000 tokens and 256 special ones),
    rebuilt from its GGUF vocabulary."""
    return converted("llama-bpe")


def _varint(n: int) -> bytes:
    n &= (1 << 64) - 1  # protobuf writes a negative int32 as its 64-bit two's complement
    out = bytearray()
    while n > 0x7F:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _field(number: int, value: int | float | bytes) -> bytes:
    """One protobuf field: an int (varint), a float (fixed32) or bytes."""
    if isinstance(value, bytes):
        return _varint(number << 3 | 2) + _varint(len(value)) + value
    if isinstance(value, float):
        return _varint(number << 3 | 5) + struct.pack("<f", value)
    return _varint(number << 3) + _varint(value)


def sentencepiece_model_proto(path: Path | str) -> bytes:
    """The SentencePiece `.model` (a ModelProto) of the Llama-2-shaped GGUF
    vocabulary at `path`: its pieces, scores and types (llama.cpp keeps
    SentencePiece's numbering), BPE with byte fallback, the identity
    normalizer with a dummy prefix and whitespace kept, as Llama-2's
    tokenizer.model has them. Raises ValueError as tokenizer_json does."""
    meta = _Meta(path)
    model = meta.need("tokenizer.ggml.model")
    if model != "llama":
        raise meta.fail(f"tokenizer.ggml.model {model!r} is not 'llama' (SentencePiece)")
    _sentencepiece_bpe(meta)  # the same checks
    tokens, kinds = meta.need("tokenizer.ggml.tokens"), meta.need("tokenizer.ggml.token_type")
    scores = meta.need("tokenizer.ggml.scores")
    out = b"".join(_field(1, _field(1, token.encode()) + _field(2, float(score))
                          + _field(3, kind))
                   for token, kind, score in zip(tokens, kinds, scores, strict=True))
    trainer = b"".join([  # TrainerSpec: model_type BPE, vocab_size, byte_fallback, ids
        _field(3, 2), _field(4, len(tokens)), _field(35, 1),
        _field(40, meta.need("tokenizer.ggml.unknown_token_id")),
        _field(41, meta.need("tokenizer.ggml.bos_token_id")),
        _field(42, meta.need("tokenizer.ggml.eos_token_id")), _field(43, -1)])
    normalizer = b"".join([  # NormalizerSpec: name, add_dummy_prefix, remove_extra_whitespaces,
        _field(1, b"identity"), _field(3, 1), _field(4, 0), _field(5, 1)])  # escape_whitespaces
    return out + _field(2, trainer) + _field(3, normalizer)


def sentencepiece_model(family: str) -> Path:
    """The SentencePiece `.model` rebuilt from llama.cpp's
    `ggml-vocab-<family>.gguf` (fetched and converted once, then cached)."""
    out = cache_dir() / f"gguf-{CONVERTER}" / family / "tokenizer.model"
    if out.exists():
        return out
    return _cache_bytes(out, sentencepiece_model_proto(
        llama_cpp_file(f"ggml-vocab-{family}.gguf")))


def llama2() -> Path:
    """Llama-2's tokenizer.json (32,000 SentencePiece BPE pieces), rebuilt
    from its GGUF vocabulary; llama2_model() is the same as a `.model`."""
    return converted("llama-spm")


def llama2_model() -> Path:
    """Llama-2's SentencePiece `.model`, rebuilt from its GGUF vocabulary."""
    return sentencepiece_model("llama-spm")


_TEST_SEPARATOR = "\n__ggml_vocab_test__\n"


def reference_ids(family: str) -> list[tuple[str, list[int]]]:
    """llama.cpp's test strings for `family` with the ids Hugging Face's
    tokenizer gave for them (`encode(text, add_special_tokens=False)`, as
    convert_hf_to_gguf_update.py wrote them). Raises ValueError when the
    `.inp` and `.out` files do not pair up."""
    inp = llama_cpp_file(f"ggml-vocab-{family}.gguf.inp").read_text(encoding="utf-8")
    out = llama_cpp_file(f"ggml-vocab-{family}.gguf.out").read_text(encoding="utf-8")
    texts = inp.split(_TEST_SEPARATOR)
    if texts[-1] == "":  # convert_hf_to_gguf_update.py ends each string with a separator;
        texts.pop()      # some files (Gemma 4's) end the last one at the end of the file
    lines = out.split("\n")
    if lines[-1] == "":
        lines.pop()
    if len(lines) != len(texts):
        raise ValueError(f"ggml-vocab-{family}.gguf: {len(texts)} test strings but "
                         f"{len(lines)} lines of ids")
    pairs = []
    for n, (text, line) in enumerate(zip(texts, lines, strict=True)):
        if not re.fullmatch(r"[\d ]*", line):
            raise ValueError(f"ggml-vocab-{family}.gguf.out line {n + 1}: {line[:60]!r} is "
                             "not space-separated ids")
        pairs.append((text, [int(x) for x in line.split()]))
    return pairs


if __name__ == "__main__":
    for name in (*FAMILIES, "llama-spm", "phi-3", "gemma-4", "bert-bge"):
        print(converted(name))
    print(llama2_model())
