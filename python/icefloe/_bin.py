"""Locating and launching the C++ executables shipped inside the package."""

from __future__ import annotations

import os
import sys
from pathlib import Path

_HERE = Path(__file__).resolve().parent


def bin_path(name: str) -> str:
    """Absolute path of an icefloe executable (``icefloe-head`` or ``icefloe-node``).

    ``ICEFLOE_BIN_DIR`` overrides the packaged location (useful for debug builds).
    """
    override = os.environ.get("ICEFLOE_BIN_DIR")
    candidates = [Path(override)] if override else []
    candidates.append(_HERE / "bin")
    for directory in candidates:
        path = directory / name
        if path.is_file() and os.access(path, os.X_OK):
            return str(path)
    raise FileNotFoundError(
        f"{name} not found in {', '.join(str(c) for c in candidates)}; "
        "is icefloe installed with its C++ executables?"
    )


def _exec(name: str) -> None:
    path = bin_path(name)
    os.execv(path, [name, *sys.argv[1:]])


def head_main() -> None:
    """Entry point of the ``icefloe-head`` console script."""
    _exec("icefloe-head")


def node_main() -> None:
    """Entry point of the ``icefloe-node`` console script."""
    _exec("icefloe-node")
