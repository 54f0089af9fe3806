"""The README's main job, small: table -> cluster -> load -> DDP training -> summary."""

from __future__ import annotations

import subprocess
import sys


def test_demo_trains_from_the_cache_and_compares_with_parquet(tmp_path):
    # Output goes to files, not pipes: DataLoader's forkserver may outlive the
    # demo by a moment and would hold a pipe open.
    log = tmp_path / "demo.out"
    with open(log, "w") as out, open(tmp_path / "demo.err", "w") as err:
        code = subprocess.run(
            [sys.executable, "-m", "icefloe.demo", "--size-mb", "3", "--files", "4",
             "--epochs", "1", "--batch-size", "256"],
            stdout=out, stderr=err, stdin=subprocess.DEVNULL, timeout=600).returncode
    assert code == 0, (tmp_path / "demo.err").read_text()[-3000:]
    lines = log.read_text().replace("\r", "\n").splitlines()
    assert any(line.startswith("loaded 'demo'") for line in lines)
    icefloe_row = next(line for line in lines if line.startswith("icefloe  "))
    parquet_row = next(line for line in lines if line.startswith("parquet  "))
    # Both loops saw the same filtered data, less each one's partial batches.
    assert int(icefloe_row.split()[2].replace(",", "")) > 0
    assert int(parquet_row.split()[2].replace(",", "")) > 0
    assert "faster" in lines[-1]
