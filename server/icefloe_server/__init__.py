"""icefloe's servers: the ``icefloe-head`` and ``icefloe-node`` executables.

They link the Arrow C++ libraries bundled beside them (``lib/``), never the
``pyarrow`` of the environment they are installed in, so this wheel and the
``icefloe`` client install beside any supported pyarrow. ``icefloe.LocalCluster``
and the ``icefloe`` CLI find them through :func:`bin_dir`.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

__all__ = ["bin_dir", "head_main", "node_main"]


def bin_dir() -> Path:
    """The folder holding ``icefloe-head`` and ``icefloe-node``."""
    return Path(__file__).resolve().parent / "bin"


def _exec(name: str) -> None:
    path = bin_dir() / name
    os.execv(path, [name, *sys.argv[1:]])


def head_main() -> None:
    """Entry point of the ``icefloe-head`` console script."""
    _exec("icefloe-head")


def node_main() -> None:
    """Entry point of the ``icefloe-node`` console script."""
    _exec("icefloe-node")
