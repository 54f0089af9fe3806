"""Bad tokenizer.json files (issue 43 item 6): each refused by the head before
anything loads, the load failing with InvalidArgument that names the file's
location and the JSON path (or the byte where the JSON breaks); the cluster
then serves a good load. Where the `tokenizers` package refuses a file, so
does the cache; where it ignores a field (an unknown component option, a
special id outside the vocabulary), the cache refuses it, naming the path.
A model rewritten after a load fails the nodes' loads of that copy: each
re-checks the SHA-256 the head planned with."""

from __future__ import annotations

import hashlib
import json
import re
import time

import pyarrow as pa
import pytest
from iceberg_util import Warehouse
from test_hf_bpe import gpt2_like
from test_hf_tokenizer import _set, bert_like, reference, refused_then_loads

import icefloe

tk = pytest.importorskip("tokenizers")


PADDING = {"strategy": "BatchLongest", "direction": "Right", "pad_to_multiple_of": None,
           "pad_id": 0, "pad_type_id": 0, "pad_token": "[PAD]"}


def _template(special_tokens) -> dict:
    return {"type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}},
                       {"Sequence": {"id": "A", "type_id": 0}}],
            "pair": [], "special_tokens": special_tokens}


def _nested(depth: int) -> str:
    """A normalizer Sequence `depth` Sequences deep, as text (2 JSON levels each)."""
    return ('{"type": "Sequence", "normalizers": [' * depth + '{"type": "NFC"}' +
            "]}" * depth)


def _replace_normalizer(doc: dict, text: str) -> str:
    doc["normalizer"] = "NORMALIZER"
    return json.dumps(doc).replace('"NORMALIZER"', text)


def gpt2(tmp_path, edit) -> str:
    """test_hf_bpe's small byte-level BPE file, changed by `edit(doc)` (which
    may return the file's text)."""
    path = gpt2_like(tmp_path, lambda d: None)
    doc = json.loads(open(path).read())
    text = edit(doc)
    with open(path, "w") as f:
        f.write(text if isinstance(text, str) else json.dumps(doc))
    return path


def _replace_merge(doc: dict, text: str) -> str:
    doc["model"]["merges"][1] = "MERGE"
    return json.dumps(doc).replace('"MERGE"', text)


# (file, edit, JSON path (or where the JSON breaks), message): the refusal
# reads "tokenizer model '<location>': <path>: <message>".
CASES = {
    # Not a tokenizer.json at all.
    "not JSON": (bert_like, lambda d: '{"version": "1.0", "model": }', None,
                 r" is not valid JSON \(byte 29\): .*syntax error"),
    "truncated": (bert_like, lambda d: json.dumps(d)[:300], None,
                  r" is not valid JSON \(byte 301\): .*line 1, column 301"),
    "a JSON list": (bert_like, lambda d: "[1, 2]", None,
                    r" is JSON but not a Hugging Face tokenizer.json \(no \"model\" object\)"),
    "a byte-order mark": (bert_like, lambda d: "\ufeff" + json.dumps(d), None,
                          r" starts with a UTF-8 byte-order mark"),
    # Nested deeper than serde_json (the library's parser) allows: 128 levels.
    "nested too deep": (bert_like, lambda d: _replace_normalizer(d, _nested(63)), None,
                        r" is nested deeper than 127 levels \(at byte \d+\)"),
    # (A merge of 100,000 nested lists: its message would print it, recursing.)
    "nested deep in a value": (gpt2, lambda d: _replace_merge(d, "[" * 100_000 +
                                                                   "]" * 100_000),
                               None, r" is nested deeper than 127 levels \(at byte \d+\)"),
    # Sections the library refuses.
    "unknown section": (bert_like, lambda d: _set(d, ["extra"], {}), "extra",
                        "section not supported"),
    "another version": (bert_like, lambda d: _set(d, ["version"], "2.0"), "version",
                        r'"2.0" is not "1.0", the only tokenizer.json version'),
    "a null version": (bert_like, lambda d: _set(d, ["version"], None), "version",
                       r'null is not "1.0"'),
    "null added tokens": (bert_like, lambda d: _set(d, ["added_tokens"], None), "added_tokens",
                          "must be a list, got null"),
    "truncation not an object": (bert_like, lambda d: _set(d, ["truncation"], 5), "truncation",
                                 r"must be an object or null"),
    "padding not an object": (bert_like, lambda d: _set(d, ["padding"], 5), "padding",
                              r"must be an object"),
    "unknown decoder": (bert_like, lambda d: _set(d, ["decoder"], {"type": "Nope"}),
                        "decoder", "Nope is not a decoder the tokenizers library knows"),
    "unknown decoder in a sequence": (
        bert_like, lambda d: _set(d, ["decoder"], {"type": "Sequence", "decoders": [
            {"type": "WordPiece", "prefix": "##", "cleanup": True}, {"type": "Nope"}]}),
        r"decoder.decoders\[1\]", "Nope is not a decoder the tokenizers library knows"),
    "decoder not an object": (bert_like, lambda d: _set(d, ["decoder"], []), "decoder",
                              r"must be an object or null"),
    # Components and options.
    "unknown pre-tokenizer": (bert_like, lambda d: _set(d, ["pre_tokenizer"],
                                                        {"type": "UnicodeScripts"}),
                              "pre_tokenizer", "UnicodeScripts is not supported"),
    "unknown model": (bert_like, lambda d: _set(d, ["model", "type"], "Nope"), "model",
                      "Nope is not supported"),
    "a BertNormalizer without lowercase": (
        bert_like, lambda d: d["normalizer"].pop("lowercase") and None, "normalizer.lowercase",
        r"missing \(the tokenizers library needs it\)"),
    "a ByteLevel pre-tokenizer without add_prefix_space": (
        gpt2, lambda d: d["pre_tokenizer"]["pretokenizers"][1].pop("add_prefix_space") or None,
        r"pre_tokenizer.pretokenizers\[1\].add_prefix_space",
        r"missing \(the tokenizers library needs it\)"),
    "a Split without invert": (
        gpt2, lambda d: d["pre_tokenizer"]["pretokenizers"][0].pop("invert") or None,
        r"pre_tokenizer.pretokenizers\[0\].invert", r"missing \(the tokenizers library needs it\)"),
    "a WordPiece without max_input_chars_per_word": (
        bert_like, lambda d: d["model"].pop("max_input_chars_per_word") and None,
        "model.max_input_chars_per_word", r"missing \(the tokenizers library needs it\)"),
    "unknown normalizer option": (bert_like, lambda d: _set(d, ["normalizer", "foo"], 1),
                                  "normalizer.foo", "option not supported"),
    "unknown added-token option": (bert_like, lambda d: _set(d, ["added_tokens", 2, "foo"], 1),
                                   r"added_tokens\[2\].foo", "option not supported"),
    "a pattern Oniguruma refuses": (
        gpt2, lambda d: _set(d, ["pre_tokenizer", "pretokenizers", 0, "pattern"],
                                  {"Regex": "[a-"}),
        r"pre_tokenizer.pretokenizers\[0\].pattern.Regex", "Oniguruma refuses the pattern"),
    # Vocabularies and merges.
    "a merge naming a token not in the vocabulary": (
        gpt2, lambda d: _set(d, ["model", "merges", 3], ["hell", "foo"]),
        r"model.merges\[3\]", "token 'foo' is not in the vocabulary"),
    "a vocabulary with a hole": (
        bert_like, lambda d: _set(d, ["model", "vocab"], {"[UNK]": 0, "[CLS]": 1, "[SEP]": 2,
                                                          "[PAD]": 3, "[MASK]": 4, "hello": 5,
                                                          "world": 7}),
        r'model.vocab\["world"\]', r"id 7 is outside 0..6"),
    "a vocabulary with a duplicate id": (
        bert_like, lambda d: _set(d, ["model", "vocab", "world"], 4),
        r'model.vocab\["(world|\[MASK\])"\]', r"id 4 is also the id of"),
    "an added token without its flags": (
        bert_like, lambda d: d["added_tokens"][3].pop("normalized"),
        r"added_tokens\[3\].normalized", r"missing \(true or false is needed\)"),
    "an added token with a null flag": (
        bert_like, lambda d: _set(d, ["added_tokens", 1, "lstrip"], None),
        r"added_tokens\[1\].lstrip", r"missing \(true or false is needed\)"),
    "an added token clashing with a vocabulary token": (
        bert_like, lambda d: d["added_tokens"].append(
            {"id": 5, "content": "<ent>", "single_word": False, "lstrip": False,
             "rstrip": False, "normalized": False, "special": True}),
        r"added_tokens\[5\].id", r"'<ent>' has id 5 but the tokenizers library gives it 8"),
    # Special ids the library takes as they are; ids outside the vocabulary.
    "a BertProcessing id outside the vocabulary": (
        bert_like, lambda d: _set(d, ["post_processor", "cls"], ["[CLS]", 99]),
        "post_processor.cls", r"id 99 is not a token of the vocabulary \(8 ids\)"),
    "a template's special token not an object": (
        bert_like, lambda d: _set(d, ["post_processor"], _template({"[CLS]": 5})),
        r'post_processor.special_tokens\["\[CLS\]"\]', "must be an object"),
    "a template's special token without ids": (
        bert_like, lambda d: _set(d, ["post_processor"], _template({"[CLS]": {"id": "[CLS]"}})),
        r'post_processor.special_tokens\["\[CLS\]"\]', "'ids' must be a list"),
    "a template's special id outside the vocabulary": (
        bert_like, lambda d: _set(d, ["post_processor"], _template(
            {"[CLS]": {"id": "[CLS]", "ids": [999], "tokens": ["[CLS]"]}})),
        r'post_processor.special_tokens\["\[CLS\]"\]',
        r"id 999 is not a token of the vocabulary \(8 ids\)"),
    "padding without pad_token": (
        bert_like, lambda d: _set(d, ["padding"], {k: v for k, v in PADDING.items()
                                                   if k != "pad_token"}),
        "padding.pad_token", r"missing \(the tokenizers library needs it\)"),
    "truncation without max_length": (
        bert_like, lambda d: _set(d, ["truncation"], {"direction": "Right", "strategy":
                                                      "LongestFirst", "stride": 0}),
        "truncation.max_length", r"missing \(the tokenizers library needs it\)"),
    "a ByteLevel post-processor without trim_offsets": (
        gpt2, lambda d: d["post_processor"].pop("trim_offsets") and None,
        "post_processor.trim_offsets", r"missing \(the tokenizers library needs it\)"),
    "a template without pair": (
        bert_like, lambda d: _set(d, ["post_processor"], {
            k: v for k, v in _template({"[CLS]": {"id": "[CLS]", "ids": [1], "tokens": ["[CLS]"]}})
            .items() if k != "pair"}),
        "post_processor.pair", r"missing \(the tokenizers library needs it\)"),
    "a template's pair not a template": (
        bert_like, lambda d: _set(d, ["post_processor"], _template(
            {"[CLS]": {"id": "[CLS]", "ids": [1], "tokens": ["[CLS]"]}}) | {"pair": [1]}),
        r"post_processor.pair\[0\]", r'must be \{"SpecialToken": ...\} or \{"Sequence": ...\}'),
    "a template piece without type_id": (
        bert_like, lambda d: _set(d, ["post_processor"], _template(
            {"[CLS]": {"id": "[CLS]", "ids": [1], "tokens": ["[CLS]"]}}) | {"single": [
                {"SpecialToken": {"id": "[CLS]"}}, {"Sequence": {"id": "A", "type_id": 0}}]}),
        r"post_processor.single\[0\].SpecialToken.type_id", "must be a type id"),
    "a template's special token without tokens": (
        bert_like, lambda d: _set(d, ["post_processor"], _template(
            {"[CLS]": {"id": "[CLS]", "ids": [1]}})),
        r'post_processor.special_tokens\["\[CLS\]"\].tokens', "must be a list of strings"),
    "a pad id outside the vocabulary": (
        bert_like, lambda d: _set(d, ["padding"], PADDING | {"pad_id": 999}),
        "padding.pad_id", r"id 999 is not a token of the vocabulary \(8 ids\)"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_bad_file_is_refused_naming_its_location_and_json_path(tmp_path, case):
    make, edit, path, message = CASES[case]
    bad = make(tmp_path, edit)
    where = "tokenizer model '" + re.escape(bad) + "'"
    match = where + (message if path is None else f": {path}: {message}")
    text = "hello worlds hello"
    got, good = refused_then_loads(tmp_path, text, bad, {}, match,
                                   lambda: make(tmp_path, lambda d: None))
    assert got == reference(good, [text])


def test_the_library_agrees_where_it_refuses():
    """The cases above the tokenizers package refuses too (so the cache
    mirrors it) and those it takes (so the cache is stricter, never laxer)."""
    import tempfile
    from pathlib import Path

    refused = {"not JSON", "truncated", "a JSON list", "a byte-order mark", "nested too deep",
               "nested deep in a value", "unknown section", "another version",
               "truncation not an object", "padding not an object", "unknown decoder",
               "unknown decoder in a sequence", "decoder not an object",
               "unknown model", "a pattern Oniguruma refuses",
               "a merge naming a token not in the vocabulary",
               "a template's special token not an object",
               "a template's special token without ids", "an added token without its flags",
               "an added token with a null flag", "padding without pad_token",
               "truncation without max_length", "a ByteLevel post-processor without trim_offsets",
               "a template without pair", "a template piece without type_id",
               "a template's special token without tokens", "a null version",
               "null added tokens", "a template's pair not a template",
               "a BertNormalizer without lowercase",
               "a ByteLevel pre-tokenizer without add_prefix_space", "a Split without invert",
               "a WordPiece without max_input_chars_per_word"}
    took = {}
    with tempfile.TemporaryDirectory() as d:
        for case, (make, edit, _, _) in CASES.items():
            text = Path(make(Path(d), edit)).read_text()
            try:
                tk.Tokenizer.from_str(text).encode("hello worlds hello")
                took[case] = True
            except BaseException:  # noqa: BLE001 - the library also panics (PanicException)
                took[case] = False
    assert {c for c, ok in took.items() if not ok} == refused


def test_a_model_rewritten_after_a_load_fails_the_heal_naming_both_hashes(tmp_path):
    """The head hashes each model as it plans a load and sends the hash with
    every node.load, a heal's too; a node whose read differs refuses. So when
    the file is rewritten after a load, the rows lost with a node are never
    tokenized with the new model into the old copy: the heal fails, naming
    the model and both hashes. Loading the name again makes a copy with the
    new model's ids."""
    texts = [f"hello worlds {i}" for i in range(2000)]
    t = Warehouse(tmp_path / "wh").create("t", pa.table({"text": texts}))
    model = bert_like(tmp_path, lambda d: None)
    spec = {"columns": [{"name": "ids", "tokenize": {"column": "text", "model": model}}]}
    old_ids = reference(model, texts)
    with icefloe.LocalCluster(num_nodes=2, head_args=["--heartbeat-timeout-ms", "1000"],
                              log_dir=tmp_path / "logs") as cluster, cluster.client() as client:
        loaded = client.load("a", t.metadata_location, transform=spec)
        assert client.read("a")["ids"].to_pylist() == old_ids

        def swap(d):  # "hello" and "world" trade ids
            v = d["model"]["vocab"]
            v["hello"], v["world"] = v["world"], v["hello"]
        bert_like(tmp_path, swap)
        new_sha = hashlib.sha256(open(model, "rb").read()).hexdigest()
        new_ids = reference(model, texts)
        assert new_ids != old_ids

        lost = client.describe("a")["slices"][0]["nodes"][0]
        cluster.kill_node(cluster.node_uris.index(lost))
        deadline = time.monotonic() + 60
        while "heal_error" not in (desc := client.describe("a")):
            assert time.monotonic() < deadline, f"no heal failed: {desc}"
            time.sleep(0.05)
        error = desc["heal_error"]
        assert desc["state"] != "ready"
        assert f"tokenizer model '{model}'" in error, error
        assert loaded["model_sha256"][0] in error and new_sha in error, error

        again = client.load("a", t.metadata_location, transform=spec)
        assert again["model_sha256"] == [new_sha]
        assert again["generation"] != loaded["generation"]
        assert client.read("a")["ids"].to_pylist() == new_ids


def test_an_adopted_copy_whose_model_was_rewritten_says_so_when_it_heals(tmp_path):
    """After a head restart the copy is adopted from the nodes' records (with
    the model hashes it was loaded with); its heal re-plans the snapshot and
    binds the transform again, reading the rewritten file: refused, naming
    the model and both hashes, not as "another table"."""
    texts = [f"hello worlds {i}" for i in range(2000)]
    t = Warehouse(tmp_path / "wh").create("t", pa.table({"text": texts}))
    model = bert_like(tmp_path, lambda d: None)
    spec = {"columns": [{"name": "ids", "tokenize": {"column": "text", "model": model}}]}
    with icefloe.LocalCluster(num_nodes=2, head_args=["--heartbeat-timeout-ms", "1000"],
                              log_dir=tmp_path / "logs") as cluster:
        with cluster.client() as client:
            loaded = client.load("a", t.metadata_location, transform=spec)
        bert_like(tmp_path, lambda d: _set(d, ["model", "max_input_chars_per_word"], 99))
        new_sha = hashlib.sha256(open(model, "rb").read()).hexdigest()
        cluster.kill_head()
        cluster.restart_head()
        with cluster.client() as client:
            desc = client.describe("a")
            assert desc["model_sha256"] == loaded["model_sha256"]
            lost = desc["slices"][0]["nodes"][0]
            cluster.kill_node(cluster.node_uris.index(lost))
            deadline = time.monotonic() + 60
            while "heal_error" not in (desc := client.describe("a")):
                assert time.monotonic() < deadline, f"no heal failed: {desc}"
                time.sleep(0.05)
            error = desc["heal_error"]
            assert f"tokenizer model '{model}'" in error, error
            assert loaded["model_sha256"][0] in error and new_sha in error, error
