"""The `chat` column (issue 45, items 1, 2 and 5): conversations and Alpaca
instruction rows rendered by the data nodes with a built-in template,
tokenized whole, and labelled, compared row by row with `transformers`:

- ids: `PreTrainedTokenizerFast(tokenizer_file=...).apply_chat_template(
  messages, chat_template=<the model's real Jinja template>, tokenize=True)`
  (templates from llama.cpp's models/templates, as the models ship them);
- labels: prefix rendering, as SFT recipes compute them: an assistant turn
  trains the tokens from those of the conversation rendered up to it (with
  the generation prompt) to those of the conversation rendered through its
  end-of-turn token; -100 elsewhere. Checked against a second reference:
  `return_assistant_tokens_mask` on the real template with TRL's
  `{% generation %}` markers around what is trained.

The tokenizers are real: for chatml Qwen2's vocabulary (Qwen2 and Qwen2.5
share it; rebuilt from llama.cpp's GGUF file by icefloe_demo.gguf_tokenizer,
checked there against Hugging Face's ids), whose added tokens include
<|im_start|> and <|im_end|>; for llama3 Llama-3's tokenizer.json; for mistral
the same Llama-3 file with Mistral's markers added as special tokens (a
Mistral tokenizer is not fetched offline yet). Rows a template cannot
render are dropped and counted in describe's scan.transform_rows_dropped."""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

import pyarrow as pa
import pytest
from fetch_tokenizers import llama3, llama_cpp_file
from iceberg_util import Warehouse

import icefloe
from icefloe_demo.gguf_tokenizer import qwen2

os.environ.setdefault("HF_HUB_OFFLINE", "1")
transformers = pytest.importorskip("transformers")

TEMPLATES = {  # ours -> the real template file it reproduces
    "chatml": "Qwen-Qwen2.5-7B-Instruct.jinja",
    "llama3": "meta-llama-Llama-3.1-8B-Instruct.jinja",
    "mistral": "mistralai-Mistral-Nemo-Instruct-2407.jinja",
}
ADDED = {"chatml": ["<|im_start|>", "<|im_end|>"], "mistral": ["<s>", "</s>", "[INST]", "[/INST]"]}
BOS_EOS = {"chatml": (None, "<|im_end|>"), "llama3": ("<|begin_of_text|>", "<|eot_id|>"),
           "mistral": ("<s>", "</s>")}
# What is trained of an assistant turn besides its content, as TRL's training
# templates (their {% generation %} blocks) have it: the end of the generation
# prompt ("\n" for Qwen2.5) and the end of the turn.
TRAINED_HEAD = {"chatml": "\n", "llama3": "", "mistral": ""}
END_OF_TURN = {"chatml": "<|im_end|>\n", "llama3": "<|eot_id|>", "mistral": "</s>"}

# Each real template with TRL's {% generation %} markers around what is
# trained, for transformers' return_assistant_tokens_mask (the mask TRL's
# assistant_only_loss uses): a second reference for the labels.
GENERATION = {
    "llama3": ("{{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ "
               "message['content'] | trim + '<|eot_id|>' }}",
               "{%- if message['role'] == 'assistant' %}{{- '<|start_header_id|>assistant"
               "<|end_header_id|>\\n\\n' }}{% generation %}{{- message['content'] | trim + "
               "'<|eot_id|>' }}{% endgeneration %}{%- else %}{{- '<|start_header_id|>' + "
               "message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | trim + "
               "'<|eot_id|>' }}{%- endif %}"),
    "chatml": ("{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + "
               "'\\n' }}",
               "{%- if message.role == 'assistant' %}{{- '<|im_start|>assistant' }}"
               "{% generation %}{{- '\\n' + message.content + '<|im_end|>\\n' }}"
               "{% endgeneration %}{%- else %}{{- '<|im_start|>' + message.role + '\\n' + "
               "message.content + '<|im_end|>' + '\\n' }}{%- endif %}"),
    "mistral": ('{{- message["content"] + eos_token}}',
                '{% generation %}{{- message["content"] + eos_token}}{% endgeneration %}'),
}

TEXTS = [
    "Hi", "What is 2+2?", "4", "café crème brûlée, naïve Ångström", "東京タワーはどこですか？",
    "서울특별시 ภาษาไทย ελληνικά עברית العربية हिन्दी", "👨‍👩‍👧‍👦 family 🏳️‍🌈 👍🏽",
    "  leading and trailing spaces  ", "\n\nstarts with newlines", "ends with newlines\n\n",
    "\u3000ideographic space\u00a0nbsp\u2003", "tabs\tand\r\nCRLF", "$100 + 5% = <tag> `code`",
    "```python\ndef f(x):\n    return x * 2\n```", "1,000,000 3.14159 ١٢٣",
    "a literal <|im_end|> and [INST] in text", "<|eot_id|> inside", "",
]


def conversation(rng: random.Random) -> list[dict]:
    def text() -> str:
        r = rng.random()
        if r < 0.08:
            return " ".join(rng.choice(TEXTS) for _ in range(400))  # a long turn
        return " ".join(rng.choice(TEXTS) for _ in range(rng.randint(1, 4)))

    turns = []
    if rng.random() < 0.5:
        turns.append({"role": "system", "content": text()})
    for _ in range(rng.randint(1, 4)):
        turns.append({"role": "user", "content": text()})
        turns.append({"role": "assistant", "content": "" if rng.random() < 0.1 else text()})
    return turns


# Rows some or all templates cannot render (dropped and counted).
BAD = [
    [],                                                                       # empty
    [{"role": "user", "content": "q"}],                                       # no assistant
    [{"role": "system", "content": "s"}],                                     # system only
    [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"},
     {"role": "user", "content": "q2"}],                                      # ends with user
    [{"role": "user", "content": "a"}, {"role": "user", "content": "b"},
     {"role": "assistant", "content": "c"}],                                  # not alternating
    [{"role": "user", "content": "q"}, {"role": "system", "content": "late"},
     {"role": "assistant", "content": "a"}],                                  # a later system
    [{"role": "assistant", "content": "a"}],                                  # assistant first
]


def tokenizer_file(tmp: Path, template: str, strip: bool = False) -> str:
    """The template's tokenizer.json: for chatml the real Qwen2 vocabulary
    (rebuilt from llama.cpp's GGUF file; its added tokens are <|endoftext|>,
    <|im_start|> and <|im_end|>), for llama3 the real Llama-3 file, for
    mistral the Llama-3 file with Mistral's markers added as special tokens (a
    Mistral tokenizer is not fetched offline yet). `strip`: the markers take
    the whitespace after them (rstrip)."""
    if template == "chatml":
        path = Path(qwen2())
        if not strip:
            return str(path)
        doc = json.loads(path.read_text())
        for token in doc["added_tokens"]:
            token["rstrip"] = token["content"] in ADDED["chatml"]
    else:
        path = Path(llama3())
        if template not in ADDED:
            return str(path)
        doc = json.loads(path.read_text())
        next_id = max(t["id"] for t in doc["added_tokens"]) + 1
        for k, content in enumerate(ADDED[template]):
            doc["added_tokens"].append({"id": next_id + k, "content": content,
                                        "single_word": False, "lstrip": False, "rstrip": strip,
                                        "normalized": False, "special": True})
    out = tmp / f"{template}{'.strip' if strip else ''}.tokenizer.json"
    out.write_text(json.dumps(doc, ensure_ascii=False))
    return str(out)


class Reference:
    """transformers' rendering and tokenization of one template."""

    def __init__(self, template: str, model: str):
        bos, eos = BOS_EOS[template]
        self.tok = transformers.PreTrainedTokenizerFast(tokenizer_file=model, bos_token=bos,
                                                        eos_token=eos)
        self.source = Path(llama_cpp_file("templates/" + TEMPLATES[template])).read_text()
        self.head, self.end = TRAINED_HEAD[template], END_OF_TURN[template]
        plain, marked = GENERATION[template]
        assert self.source.count(plain) == 1
        self.marked = self.source.replace(plain, marked)
        self.template = template

    def render(self, turns: list[dict], generation: bool = False) -> str:
        return self.tok.apply_chat_template(turns, chat_template=self.source, tokenize=False,
                                            add_generation_prompt=generation)

    def tokens(self, text: str) -> list[int]:
        return self.tok(text, add_special_tokens=False)["input_ids"]

    def dropped(self, turns: list[dict], train_on: str) -> bool:
        if not turns or all(t["role"] == "system" for t in turns):
            return True
        if train_on == "assistant" and turns[-1]["role"] != "assistant":
            return True
        if self.template == "mistral":
            if turns[0]["role"] == "system" and turns[-1]["role"] != "user":
                return True  # Nemo's template would leave the system prompt out
            try:
                self.render(turns)
            except Exception:  # noqa: BLE001 - the template's raise_exception
                return True
        return False

    def example(self, turns: list[dict], train_on: str, max_tokens: int | None):
        """(ids, labels), or None when the row is dropped."""
        if self.dropped(turns, train_on):
            return None
        ids = self.tok.apply_chat_template(turns, chat_template=self.source, tokenize=True)
        ids = list(ids["input_ids"] if hasattr(ids, "keys") else ids)
        text = self.render(turns)
        assert self.tokens(text) == ids
        if train_on == "all":
            labels = list(ids)
        else:
            labels = [-100] * len(ids)
            for i, turn in enumerate(turns):
                if turn["role"] != "assistant":
                    continue
                through = self.render(turns[: i + 1])
                assert through.endswith(self.end)
                if i > 0 and self.template != "mistral":
                    before = self.render(turns[:i], generation=True)
                    assert before.endswith(self.head)
                    before = before[: len(before) - len(self.head)]
                else:  # no generation prompt: the turn rendered empty, less what is trained
                    empty = self.render([*turns[:i], {"role": "assistant", "content": ""}])
                    assert empty.endswith(self.head + self.end)
                    before = empty[: len(empty) - len(self.head + self.end)]
                assert text.startswith(before) and text.startswith(through)
                start, end = len(self.tokens(before)), len(self.tokens(through))
                assert ids[:end] == self.tokens(through)
                labels[start:end] = ids[start:end]
            marked = self.tok.apply_chat_template(turns, chat_template=self.marked,
                                                  tokenize=True, return_dict=True,
                                                  return_assistant_tokens_mask=True)
            assert list(marked["input_ids"]) == ids
            assert labels == [i if m else -100 for i, m in
                              zip(ids, marked["assistant_masks"], strict=True)]
        if max_tokens is not None:
            ids, labels = ids[:max_tokens], labels[:max_tokens]
        if all(x == -100 for x in labels):
            return None
        return ids, labels


def messages_table(rows: list[list[dict] | None]) -> pa.Table:
    turn = pa.struct([("role", pa.string()), ("content", pa.string())])
    return pa.table({"id": pa.array(range(len(rows)), pa.int64()),
                     "messages": pa.array(rows, pa.list_(turn))})


@pytest.fixture(scope="module")
def conversations() -> list[list[dict] | None]:
    rng = random.Random(45)
    return [conversation(rng) for _ in range(240)] + BAD + [None]


# ("chatml", True): markers that take the newline after them, so the text
# does not tokenize apart at them (the nodes then label by whole prefixes).
@pytest.mark.parametrize("template,strip", [("chatml", False), ("llama3", False),
                                            ("mistral", False), ("chatml", True)])
def test_ids_and_labels_equal_transformers_with_the_real_template(tmp_path, template, strip,
                                                                   conversations):
    model = tokenizer_file(tmp_path, template, strip)
    ref = Reference(template, model)
    rows = conversations
    table = Warehouse(tmp_path / "wh").create("chats", messages_table(rows))
    variants = [("assistant", None), ("all", None), ("assistant", 48)]
    with icefloe.LocalCluster(num_nodes=2, log_dir=tmp_path / "logs") as cluster, \
            cluster.client() as client:
        for k, (train_on, max_tokens) in enumerate(variants):
            chat = {"template": template, "messages": "messages", "model": model,
                    "train_on": train_on}
            if max_tokens is not None:
                chat["max_tokens"] = max_tokens
            spec = {"keep": ["id"], "columns": [{"name": "input_ids", "chat": chat}]}
            # The first on both nodes: each replica's drops counted once.
            desc = client.load(f"chat{k}", table.metadata_location, transform=spec,
                               batch_rows=50, replication=2 if k == 0 else 1)
            got = client.read(f"chat{k}").sort_by("id")
            want = {i: ref.example(turns or [], train_on, max_tokens)
                    for i, turns in enumerate(rows)}
            kept = [i for i, w in want.items() if w is not None]
            assert got["id"].to_pylist() == kept, (train_on, max_tokens)
            ids, labels = got["input_ids"].to_pylist(), got["labels"].to_pylist()
            bad_ids = [i for i, x in zip(kept, ids, strict=True) if x != want[i][0]]
            bad_labels = [i for i, x in zip(kept, labels, strict=True) if x != want[i][1]]
            assert not bad_ids, f"{len(bad_ids)} rows' ids differ, e.g. {rows[bad_ids[0]]}"
            if bad_labels:
                first = bad_labels[0]
                pytest.fail(f"{len(bad_labels)} rows' labels differ, e.g. {rows[first]}: ours "
                            f"{labels[kept.index(first)]} theirs {want[first][1]}")
            assert desc["scan"]["transform_rows_dropped"] == len(rows) - len(kept)
            trained = sum(sum(x != -100 for x in want[i][1]) for i in kept)
            print(f"\n{template} strip={strip} train_on={train_on} max_tokens={max_tokens}: "
                  f"{len(kept)} rows, {sum(len(want[i][0]) for i in kept)} ids, {trained} "
                  f"trained, 0 mismatches, {len(rows) - len(kept)} dropped")


ALPACA_INPUT = ("Below is an instruction that describes a task, paired with an input that "
                "provides further context. Write a response that appropriately completes the "
                "request.\n\n### Instruction:\n{instruction}\n\n### Input:\n{input}\n\n"
                "### Response:\n")
ALPACA_NO_INPUT = ("Below is an instruction that describes a task. Write a response that "
                   "appropriately completes the request.\n\n### Instruction:\n{instruction}\n\n"
                   "### Response:\n")


def instruction_rows(rng: random.Random, n: int) -> list[dict]:
    """`n` Alpaca-shaped rows: an instruction, an input that may be null or
    empty, an output of 0 to 30 phrases."""
    return [{"instruction": " ".join(rng.choice(TEXTS) for _ in range(rng.randint(1, 3))),
             "input": rng.choice([None, "", rng.choice(TEXTS)]),
             "output": " ".join(rng.choice(TEXTS) for _ in range(rng.randint(0, 30)))}
            for _ in range(n)]


def test_alpaca_trains_on_the_response_and_eos_as_torchtune(tmp_path):
    """torchtune's alpaca_dataset(train_on_input=False): the Stanford prompt
    (with or without input), the response and the EOS trained; ids of the
    whole text."""
    model = tokenizer_file(tmp_path, "llama3")
    tok = transformers.PreTrainedTokenizerFast(tokenizer_file=model)
    rng = random.Random(46)
    rows = instruction_rows(rng, 200)
    rows += [{"instruction": None, "input": "", "output": "x"},
             {"instruction": "x", "input": "", "output": None}]
    bos, eos = "<|begin_of_text|>", "<|end_of_text|>"

    def expected(r, max_tokens):
        if r["instruction"] is None or r["output"] is None:
            return None
        prompt = (ALPACA_INPUT if r["input"] else ALPACA_NO_INPUT).format(**r)
        ids = tok(bos + prompt + r["output"] + eos, add_special_tokens=False)["input_ids"]
        start = len(tok(bos + prompt, add_special_tokens=False)["input_ids"])
        labels = [-100] * start + ids[start:]
        ids, labels = ids[:max_tokens], labels[:max_tokens]
        return None if all(x == -100 for x in labels) else (ids, labels)

    data = pa.table({"id": pa.array(range(len(rows)), pa.int64()),
                     **{k: pa.array([r[k] for r in rows], pa.string())
                        for k in ("instruction", "input", "output")}})
    table = Warehouse(tmp_path / "wh").create("alpaca", data)
    with icefloe.LocalCluster(num_nodes=1, log_dir=tmp_path / "logs") as cluster, \
            cluster.client() as client:
        for max_tokens in (4096, 60):
            chat = {"template": "alpaca", "instruction": "instruction", "input": "input",
                    "output": "output", "model": model, "bos": bos, "eos": eos,
                    "max_tokens": max_tokens}
            # A second chat column (train_on all, its own labels): rows kept by both.
            spec = {"keep": ["id"], "columns": [
                {"name": "input_ids", "chat": chat},
                {"name": "all_ids", "chat": {**chat, "train_on": "all", "labels": "all_labels"}}]}
            desc = client.load(f"a{max_tokens}", table.metadata_location, transform=spec)
            got = client.read(f"a{max_tokens}").sort_by("id")
            assert got.column_names == ["id", "input_ids", "labels", "all_ids", "all_labels"]
            want = {i: expected(r, max_tokens) for i, r in enumerate(rows)}
            kept = [i for i, w in want.items() if w is not None]
            assert got["id"].to_pylist() == kept
            assert got["input_ids"].to_pylist() == [want[i][0] for i in kept]
            assert got["labels"].to_pylist() == [want[i][1] for i in kept]
            assert got["all_ids"].to_pylist() == got["input_ids"].to_pylist()
            assert got["all_labels"].to_pylist() == got["input_ids"].to_pylist()
            assert desc["scan"]["transform_rows_dropped"] == len(rows) - len(kept)
            assert len(rows) - len(kept) >= 2


def torchtune_llama3(tok, r: dict, train_on_input: bool, max_seq_len: int | None):
    """torchtune's alpaca_dataset with the Llama-3 tokenizer, written from its
    logic (AlpacaToMessages, Llama3Tokenizer.tokenize_messages, truncate;
    pytorch/torchtune torchtune/models/llama3/_tokenizer.py): [bos], then per
    message [start_header] + encode(role) + [end_header] + encode("\\n\\n") +
    encode(content.strip()) + [eot], each message's tokens trained unless it
    is masked, then [eos]; bos and eos never trained; max_seq_len cuts and
    makes the last token eos (not trained). Each piece encoded on its own."""
    if r["instruction"] is None or r["output"] is None:
        return None
    def enc(text):
        return tok(text, add_special_tokens=False)["input_ids"]
    special = {t: tok.convert_tokens_to_ids(t) for t in (
        "<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>",
        "<|eot_id|>")}
    prompt = (ALPACA_INPUT if r["input"] else ALPACA_NO_INPUT).format(**r)
    ids, mask = [special["<|begin_of_text|>"]], [True]
    for role, content, masked in (("user", prompt, not train_on_input),
                                  ("assistant", r["output"], False)):
        message = ([special["<|start_header_id|>"]] + enc(role) + [special["<|end_header_id|>"]]
                   + enc("\n\n") + enc(content.strip()) + [special["<|eot_id|>"]])
        ids, mask = ids + message, mask + [masked] * len(message)
    ids, mask = ids + [special["<|end_of_text|>"]], mask + [True]
    if max_seq_len and len(ids) > max_seq_len:
        ids, mask = ids[:max_seq_len], mask[:max_seq_len]
        ids[-1], mask[-1] = special["<|end_of_text|>"], True
    labels = [-100 if m else t for t, m in zip(ids, mask, strict=True)]
    return None if all(x == -100 for x in labels) else (ids, labels)


def test_llama3_instruction_rows_equal_torchtunes_alpaca_dataset(tmp_path):
    """llama3 with instruction columns: what Kubeflow Trainer's torchtune
    runtimes train Llama-3.2 on (alpaca_dataset, train_on_input False; True for
    train_on all), ids and labels row by row, truncation included."""
    model = tokenizer_file(tmp_path, "llama3")
    tok = transformers.PreTrainedTokenizerFast(tokenizer_file=model)
    rng = random.Random(47)
    rows = instruction_rows(rng, 200)
    rows += [{"instruction": None, "input": "", "output": "x"},
             {"instruction": "x", "input": "", "output": None},
             {"instruction": "x", "input": "", "output": " \n "}]
    data = pa.table({"id": pa.array(range(len(rows)), pa.int64()),
                     **{k: pa.array([r[k] for r in rows], pa.string())
                        for k in ("instruction", "input", "output")}})
    table = Warehouse(tmp_path / "wh").create("tune", data)
    with icefloe.LocalCluster(num_nodes=1, log_dir=tmp_path / "logs") as cluster, \
            cluster.client() as client:
        for max_tokens in (None, 80):
            chat = {"template": "llama3", "instruction": "instruction", "input": "input",
                    "output": "output", "model": model}
            if max_tokens:
                chat["max_tokens"] = max_tokens
            spec = {"keep": ["id"], "columns": [
                {"name": "input_ids", "chat": chat},
                {"name": "all_ids", "chat": {**chat, "train_on": "all", "labels": "all_labels"}}]}
            name = f"t{max_tokens}"
            desc = client.load(name, table.metadata_location, transform=spec)
            got = client.read(name).sort_by("id")
            want = {i: torchtune_llama3(tok, r, False, max_tokens) for i, r in enumerate(rows)}
            want_all = {i: torchtune_llama3(tok, r, True, max_tokens) for i, r in enumerate(rows)}
            kept = [i for i in want if want[i] is not None and want_all[i] is not None]
            assert got["id"].to_pylist() == kept
            assert got["input_ids"].to_pylist() == [want[i][0] for i in kept]
            assert got["labels"].to_pylist() == [want[i][1] for i in kept]
            assert got["all_ids"].to_pylist() == [want_all[i][0] for i in kept]
            assert got["all_labels"].to_pylist() == [want_all[i][1] for i in kept]
            assert desc["scan"]["transform_rows_dropped"] == len(rows) - len(kept)
            assert len(kept) > 100
            if max_tokens:  # torchtune's truncate ran: cut rows end with an untrained EOS
                cut = [i for i in kept if len(want[i][0]) == max_tokens]
                assert cut and all(want[i][1][-1] == -100 for i in cut)
                assert len(rows) - len(kept) > 2  # responses cut away entirely


BAD_SPECS = [
    ({"template": "chatml2"}, "'template'"),
    ({"template": "chatml", "messages": "text"}, "'messages': column 'text' must be list<struct"),
    ({"template": "chatml", "messages": "nope"}, "'messages': unknown column 'nope'"),
    ({"template": "chatml"}, "needs 'messages'"),
    ({"template": "alpaca", "instruction": "text"}, "'alpaca' needs 'output'"),
    ({"template": "alpaca", "instruction": "text", "output": "text"}, "'alpaca' needs 'eos'"),
    ({"template": "alpaca", "messages": "messages"}, "'messages' is for the chat templates"),
    ({"template": "llama3", "messages": "messages", "eos": "</s>"}, "'eos' is for 'alpaca'"),
    ({"template": "llama3", "messages": "messages", "instruction": "text"},
     "either 'messages' or instruction columns"),
    ({"template": "chatml", "instruction": "text", "output": "text"},
     "instruction columns are rendered by 'alpaca' and 'llama3'"),
    ({"template": "llama3", "instruction": "text"}, "'llama3' needs 'output'"),
    ({"template": "chatml", "messages": "messages", "train_on": "user"}, "'train_on'"),
    ({"template": "chatml", "messages": "messages", "max_tokens": 0}, "'max_tokens'"),
    ({"template": "chatml", "messages": "messages"}, "needs '<|im_start|>' to be one token"),
    ({"template": "llama3", "messages": "messages", "labels": "id"}, "named twice"),
]


def test_bad_chat_specs_are_refused_by_the_head_naming_the_field(tmp_path):
    model = tokenizer_file(tmp_path, "llama3")  # no chatml markers: refused
    spm = pytest.importorskip("sentencepiece")
    sample = tmp_path / "sample.txt"
    sample.write_text("\n".join(f"turn {i} of the chat was fine" for i in range(300)))
    spm.SentencePieceTrainer.train(input=str(sample), model_prefix=str(tmp_path / "spm"),
                                   vocab_size=40, hard_vocab_limit=False, minloglevel=2)
    sentencepiece = {"template": "llama3", "messages": "messages",
                     "model": str(tmp_path / "spm.model")}
    table = Warehouse(tmp_path / "wh").create("t", pa.table({
        "id": pa.array([1], pa.int64()), "text": pa.array(["x"]),
        "messages": messages_table([[{"role": "user", "content": "q"}]])["messages"]}))
    with icefloe.LocalCluster(num_nodes=1, log_dir=tmp_path / "logs") as cluster, \
            cluster.client() as client:
        for chat, match in [*BAD_SPECS, (sentencepiece, "is a SentencePiece model; chat")]:
            spec = {"keep": ["id"],
                    "columns": [{"name": "input_ids", "chat": {"model": model, **chat}}]}
            with pytest.raises(icefloe.InvalidArgument, match=match.replace("|", r"\|")):
                client.load("bad", table.metadata_location, transform=spec)
        assert client.datasets() == []


def test_an_unknown_role_fails_the_load_naming_the_row(tmp_path):
    model = tokenizer_file(tmp_path, "llama3")
    rows = [[{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}],
            [{"role": "human", "content": "q"}, {"role": "gpt", "content": "a"}]]
    table = Warehouse(tmp_path / "wh").create("t", messages_table(rows))
    spec = {"columns": [{"name": "input_ids", "chat": {
        "template": "llama3", "messages": "messages", "model": model}}]}
    with icefloe.LocalCluster(num_nodes=1, log_dir=tmp_path / "logs") as cluster, \
            cluster.client() as client:
        with pytest.raises(icefloe.InvalidArgument,
                           match="'messages' column 'messages' row 1: message 0 has role 'human'"):
            client.load("bad", table.metadata_location, transform=spec)
