"""The README's main job, small: table -> cluster -> load -> DDP training -> summary."""

from __future__ import annotations

import subprocess
import sys


def test_demo_trains_from_the_cache_and_compares_with_parquet():
    out = subprocess.run(
        [sys.executable, "-m", "icefloe.demo", "--size-mb", "3", "--files", "4", "--epochs", "1",
         "--batch-size", "256"],
        capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    lines = out.stdout.splitlines()
    assert any(line.startswith("loaded 'demo'") for line in lines)
    icefloe_row = next(line for line in lines if line.startswith("icefloe  "))
    parquet_row = next(line for line in lines if line.startswith("parquet  "))
    # Both loops saw the same filtered data, less each one's partial batches.
    assert int(icefloe_row.split()[2].replace(",", "")) > 0
    assert int(parquet_row.split()[2].replace(",", "")) > 0
    assert "faster" in lines[-1]
