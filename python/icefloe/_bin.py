"""Locating the servers' executables (the ``icefloe-server`` wheel)."""

from __future__ import annotations

import os
from pathlib import Path


def bin_path(name: str) -> str:
    """Absolute path of an icefloe executable (``icefloe-head`` or ``icefloe-node``).

    ``ICEFLOE_BIN_DIR`` overrides the installed ``icefloe-server`` wheel's
    folder (useful for debug builds).
    """
    candidates: list[Path] = []
    override = os.environ.get("ICEFLOE_BIN_DIR")
    if override:
        candidates.append(Path(override))
    try:
        import icefloe_server
    except ImportError:
        pass
    else:
        candidates.append(icefloe_server.bin_dir())
    for directory in candidates:
        path = directory / name
        if path.is_file() and os.access(path, os.X_OK):
            return str(path)
    where = f" (looked in {', '.join(str(c) for c in candidates)})" if candidates else ""
    raise FileNotFoundError(
        f"{name} not found{where}: the servers are the icefloe-server wheel "
        "(pip install 'icefloe[server]'), or set ICEFLOE_BIN_DIR to a folder holding them"
    )
