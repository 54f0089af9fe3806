"""The README's main job, small: S3 table -> cluster -> load -> DDP training over
Parquet from S3, Parquet on local disk and icefloe -> one table side by side."""

from __future__ import annotations

import re
import subprocess
import sys

SOURCES = ("parquet-s3", "parquet-local", "icefloe")


def test_demo_compares_icefloe_with_parquet_from_s3_and_local_disk(tmp_path):
    # Output goes to files, not pipes: DataLoader's forkserver may outlive the
    # demo by a moment and would hold a pipe open.
    log = tmp_path / "demo.out"
    with open(log, "w") as out, open(tmp_path / "demo.err", "w") as err:
        code = subprocess.run(
            [sys.executable, "-m", "icefloe.demo", "--size-mb", "3", "--files", "4",
             "--epochs", "2", "--batch-size", "256", "--nodes", "1", "--workers", "1"],
            stdout=out, stderr=err, stdin=subprocess.DEVNULL, timeout=600).returncode
    assert code == 0, (tmp_path / "demo.err").read_text()[-3000:]
    lines = log.read_text().replace("\r", "\n").splitlines()
    assert any(line.startswith("loaded 'demo'") for line in lines)
    header = next(line for line in lines if line.startswith("source "))
    assert header.split() == ["source", "epoch", "rows", "seconds", "MB/s", "rows/s",
                              "waiting", "loss"]
    # Every source has a warm-up row, an epoch-1 row and a steady row, each
    # with rows read, a non-zero MB/s and a waiting share.
    row = re.compile(r"^(\S+) +(warm-up|1|steady) +([\d,]+) +[\d.]+ +([\d,.]+) +[\d,]+ "
                     r"+([\d.]+)% +[\d.]+$")
    seen: dict[str, set[str]] = {s: set() for s in SOURCES}
    for line in lines:
        m = row.match(line)
        if m and m.group(1) in seen:
            seen[m.group(1)].add(m.group(2))
            assert int(m.group(3).replace(",", "")) > 0, line
            assert float(m.group(4).replace(",", "")) > 0, line
            assert 0 <= float(m.group(5)) <= 100, line
    assert all(epochs == {"warm-up", "1", "steady"} for epochs in seen.values()), seen
    assert any(line.startswith("icefloe: ") and "Parquet from S3" in line for line in lines)
    assert any(line.startswith("icefloe: ") and "Parquet on local disk" in line
               for line in lines)
