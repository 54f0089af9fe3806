"""The quick-start demo: an Iceberg table cached by a local cluster.

Writes an Iceberg table with pyiceberg (SQL catalog on sqlite, local
warehouse), starts a head and three data nodes on loopback, loads the table
with a projection and a filter, reads it back over Arrow Flight, checks it
against pyiceberg's own scan and prints a summary.
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

from .local import LocalCluster

FILTER = "label < 8"
COLUMNS = ["id", "label", "feature"]


def write_table(root: Path, rows: int, files: int, seed: int = 0):
    """An Iceberg table of `rows` rows in `files` appends, written by pyiceberg."""
    from pyiceberg.catalog.sql import SqlCatalog

    catalog = SqlCatalog("demo", uri=f"sqlite:///{root / 'catalog.db'}",
                         warehouse=(root / "warehouse").as_uri())
    catalog.create_namespace_if_not_exists("demo")
    rng = np.random.default_rng(seed)
    per_file = max(1, rows // files)
    table = None
    for k in range(files):
        n = per_file if k < files - 1 else rows - per_file * (files - 1)
        ids = np.arange(k * per_file, k * per_file + n, dtype=np.int64)
        data = pa.table({
            "id": ids,
            "label": rng.integers(0, 10, n, dtype=np.int32),
            "feature": rng.standard_normal(n, dtype=np.float32),
            "text": pa.array([f"sample-{i}" for i in ids]),
        })
        if table is None:
            table = catalog.create_table("demo.samples", schema=data.schema)
        table.append(data)
    return table


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=1_000_000, help="rows to generate")
    parser.add_argument("--files", type=int, default=8, help="data files (appends)")
    parser.add_argument("--nodes", type=int, default=3, help="data nodes")
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="icefloe-demo-") as tmp:
        t0 = time.perf_counter()
        table = write_table(Path(tmp), args.rows, args.files)
        print(f"wrote Iceberg table: {args.rows:,} rows in {args.files} files "
              f"({time.perf_counter() - t0:.1f}s) at {table.metadata_location}")
        with LocalCluster(num_nodes=args.nodes, memory_limit="2GiB") as cluster:
            print(f"cluster up: head {cluster.head_uri}, {args.nodes} data nodes")
            with cluster.client() as client:
                t1 = time.perf_counter()
                desc = client.load("samples", table.metadata_location, columns=COLUMNS,
                                   filter=FILTER)
                load_s = time.perf_counter() - t1
                print(f"loaded 'samples' ({', '.join(COLUMNS)} where {FILTER}): "
                      f"{desc['rows']:,} rows, {desc['bytes'] / 1e6:.1f} MB in RAM, "
                      f"{load_s:.2f}s, {len(desc['slices'])} slices on "
                      f"{len({s['nodes'][0] for s in desc['slices']})} nodes")
                t2 = time.perf_counter()
                got = client.read("samples")
                read_s = time.perf_counter() - t2
        expected = table.scan(row_filter=FILTER, selected_fields=tuple(COLUMNS)).to_arrow()
        same = got.sort_by("id").equals(expected.select(COLUMNS).sort_by("id").cast(got.schema))
        print(f"read {got.num_rows:,} rows, {got.nbytes / 1e6:.1f} MB in {read_s * 1e3:.0f} ms "
              f"({got.nbytes / read_s / 1e9:.2f} GB/s)")
        labels = got.column("label").to_numpy()
        print(f"label histogram: {np.bincount(labels, minlength=8).tolist()}")
        print(f"feature mean: {pc.mean(got.column('feature')).as_py():+.4f}")
        print(f"identical to pyiceberg's scan: {same}")
        return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
