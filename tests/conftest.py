"""Shared fixtures: generated Parquet files and running servers."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest


@pytest.fixture(scope="session")
def small_parquet(tmp_path_factory) -> tuple[str, pa.Table]:
    """A 50,000-row Parquet file with several row groups and mixed types."""
    rows = 50_000
    rng = np.random.default_rng(1234)
    table = pa.table(
        {
            "id": np.arange(rows, dtype=np.int64),
            "x": rng.standard_normal(rows),
            "label": rng.integers(0, 10, rows, dtype=np.int32),
            "name": pa.array([f"row-{i}" if i % 7 else None for i in range(rows)]),
        }
    )
    path = tmp_path_factory.mktemp("parquet") / "small.parquet"
    pq.write_table(table, path, row_group_size=12_000)
    return str(path), table
