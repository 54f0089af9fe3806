"""The quick-start demo: a local cluster serving a generated table.

Generates a Parquet file, starts a head and a data node on loopback, loads the
file into the node's memory, reads it back through the head with a Flight
client, checks it against the file and prints a summary.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from .client import Client
from .local import LocalCluster


def generate(path: Path, rows: int, seed: int = 0) -> pa.Table:
    rng = np.random.default_rng(seed)
    table = pa.table(
        {
            "id": np.arange(rows, dtype=np.int64),
            "label": rng.integers(0, 10, rows, dtype=np.int32),
            "feature": rng.standard_normal(rows, dtype=np.float32),
            "text": pa.array([f"sample-{i}" for i in range(rows)]),
        }
    )
    pq.write_table(table, path, row_group_size=max(1, rows // 8))
    return table


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=1_000_000, help="rows to generate")
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="icefloe-demo-") as tmp:
        path = Path(tmp) / "demo.parquet"
        print(f"generating {args.rows:,} rows -> {path}")
        expected = generate(path, args.rows)
        node_args = [["--parquet", str(path), "--name", "demo"]]
        t0 = time.perf_counter()
        with LocalCluster(num_nodes=1, node_args=node_args) as cluster:
            started = time.perf_counter() - t0
            print(
                f"cluster up in {started:.2f}s: "
                f"head {cluster.head_uri}, node {cluster.node_uris[0]}"
            )
            with Client(cluster.head_uri) as client:
                print(f"datasets: {client.datasets()}")
                t1 = time.perf_counter()
                table = client.read("demo")
                elapsed = time.perf_counter() - t1
        ok = table.equals(expected)
        nbytes = table.nbytes
        print(
            f"read {table.num_rows:,} rows, {nbytes / 1e6:.1f} MB in {elapsed * 1e3:.1f} ms "
            f"({nbytes / elapsed / 1e9:.2f} GB/s)"
        )
        labels = table.column("label").to_numpy()
        print(f"label histogram: {np.bincount(labels, minlength=10).tolist()}")
        print(f"feature mean: {pc.mean(table.column('feature')).as_py():+.4f}")
        print(f"identical to the Parquet file: {ok}")
        return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
