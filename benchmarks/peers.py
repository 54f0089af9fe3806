"""The peers a user would pick instead of icefloe (Lance, Ray Data), installed into a
separate virtual environment that the benchmarks create, never into the project's own.

The environment lives beside the test tables (``<tmp>/icefloe-bench-peers``, or
``$ICEFLOE_BENCH_PEERS``), is created once and reused while its marker file names
the same pinned versions. Peer workers (benchmarks/peer_workers.py) run as
subprocesses of its interpreter. When it cannot be made (no index reachable, a
wheel missing), ``Peers.python`` is None and ``Peers.reason`` says why: the peer
variants are reported as skipped, and every other variant still runs.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# Versions seen on the index when this was written (`pip index versions ...`); the
# same pyarrow and torch as the project's own environment, so the comparison is of
# readers, not of Arrow or torch builds.
# aiohttp: Ray Data's read_parquet imports fsspec's HTTP filesystem, which needs it,
# even for local paths, and ray[data] does not require it.
PINS = ["pylance==14.0.2", "ray[data]==2.60.0", "torch==2.13.0", "pyarrow==26.0.1",
        "numpy==2.4.6", "aiohttp==3.14.5"]
INSTALL_TIMEOUT_S = 1800


@dataclass
class Peers:
    """The peers' interpreter, or why there is none."""

    python: str | None
    reason: str = ""
    versions: dict[str, str] | None = None


def venv_dir() -> Path:
    env = os.environ.get("ICEFLOE_BENCH_PEERS")
    return Path(env) if env else Path(tempfile.gettempdir()) / "icefloe-bench-peers"


def ensure(log: Callable[[str], None] = print, pins: Sequence[str] = PINS) -> Peers:
    """The peers' virtual environment: reused when its marker matches `pins`,
    otherwise (re)created with ``python -m venv`` and ``pip install``."""
    root = venv_dir()
    python = root / "bin" / "python"
    marker = root / "icefloe-peers.json"
    if marker.exists() and python.exists():
        try:
            saved = json.loads(marker.read_text())
        except ValueError:
            saved = {}
        if saved.get("pins") == list(pins):
            return Peers(str(python), versions=saved.get("versions"))
    log(f"peers: creating {root} ({', '.join(pins)}); once, several minutes")
    t0 = time.perf_counter()
    shutil.rmtree(root, ignore_errors=True)
    try:
        subprocess.run([sys.executable, "-m", "venv", str(root)], check=True,
                       capture_output=True, text=True, timeout=300)
        out = subprocess.run([str(python), "-m", "pip", "install", "--quiet", *pins],
                             capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S)
    except subprocess.CalledProcessError as exc:
        return Peers(None, reason=f"python -m venv {root} failed ({exc.returncode}): "
                                  f"{(exc.stderr or '').strip()[-300:]}")
    except (OSError, subprocess.SubprocessError) as exc:
        return Peers(None, reason=f"creating the peers' venv at {root} failed: {exc}")
    if out.returncode != 0:
        tail = (out.stderr or out.stdout).strip().splitlines()[-3:]
        return Peers(None, reason=f"pip install {' '.join(pins)} into {root} failed "
                                  f"({out.returncode}): {' | '.join(tail)}")
    versions = _versions(str(python))
    marker.write_text(json.dumps({"pins": list(pins), "versions": versions}, indent=2) + "\n")
    log(f"peers: ready in {time.perf_counter() - t0:.0f} s: {versions}")
    return Peers(str(python), versions=versions)


def _versions(python: str) -> dict[str, str]:
    code = ("import json, importlib.metadata as m; print(json.dumps({p: m.version(p) for p in "
            "('pylance', 'ray', 'torch', 'pyarrow', 'numpy')}))")
    out = subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=120)
    return json.loads(out.stdout) if out.returncode == 0 else {}


def run(peers: Peers, name: str, args: dict[str, Any], *, timeout_s: float = 900) -> Any:
    """benchmarks/peer_workers.<name>(**args) in a fresh interpreter of the peers'
    venv (it imports nothing of icefloe's); its JSON answer."""
    if peers.python is None:
        raise RuntimeError(f"peers unavailable: {peers.reason}")
    script = Path(__file__).resolve().parent / "peer_workers.py"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.setdefault("OMP_NUM_THREADS", "1")
    env["RAY_DISABLE_USAGE_STATS"] = "1"
    # -P: benchmarks/ (common.py, memory.py, ...) must not shadow the peers' modules.
    out = subprocess.run([peers.python, "-P", str(script), name, json.dumps(args)], env=env,
                         capture_output=True, text=True, timeout=timeout_s)
    if out.returncode != 0:
        raise RuntimeError(f"peer worker {name} failed ({out.returncode}):\n"
                           f"{out.stderr[-4000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


if __name__ == "__main__":  # make (or check) the environment ahead of a run
    result = ensure()
    print(result)
    sys.exit(0 if result.python else 1)
