"""Measured peers, run by the interpreter of the peers' own environment
(benchmarks/peers.py), never the project's: it imports nothing of icefloe.

    <peers-venv>/bin/python benchmarks/peer_workers.py NAME '{"arg": ...}'

prints one JSON line, in the shape of benchmarks.workers.epoch. For a fair
comparison every batch becomes tensors exactly as icefloe's benchmark worker
makes them (icefloe.torch.batch_to_tensors): one tensor per column that shares
the Arrow buffer through DLPack, no copy. Only the branch of that conversion
this table needs is repeated here (fixed-width integers and floats without
nulls); any other column is refused rather than converted differently. Ray
Data is the exception, measured as its users read it: ``iter_torch_batches``,
Ray's own conversion (also a tensor per column, from its numpy batch).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any


def batch_to_tensors(batch: Any) -> dict[str, Any]:
    """icefloe.torch.batch_to_tensors for fixed-width numeric columns without nulls."""
    import pyarrow as pa
    import torch

    out = {}
    for name, col in zip(batch.schema.names, batch.columns, strict=True):
        t = col.type
        if col.null_count or not (pa.types.is_integer(t) or pa.types.is_floating(t)):
            raise TypeError(f"column {name!r} ({t}, {col.null_count} nulls): the peers' "
                            "conversion covers fixed-width numbers without nulls only")
        out[name] = torch.utils.dlpack.from_dlpack(col)
    return out


def _load_measure() -> Any:
    """benchmarks/measure.py, loaded by path (this interpreter runs with -P and
    has no `benchmarks` package)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "icefloe_bench_measure", Path(__file__).resolve().with_name("measure.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_MEASURE = _load_measure()
_measure = _MEASURE.measure


# -- Lance ---------------------------------------------------------------------------


def lance_write(paths: list[str], uri: str) -> dict[str, Any]:
    """The table's Parquet files written once as a Lance dataset on local disk."""
    import lance
    import pyarrow.dataset as ds

    t0 = time.perf_counter()
    source = ds.dataset(paths, format="parquet")
    lance.write_dataset(source.scanner().to_reader(), uri, mode="overwrite")
    rows = lance.dataset(uri).count_rows()
    return {"rows": rows, "seconds": time.perf_counter() - t0,
            "bytes_on_disk": sum(p.stat().st_size for p in Path(uri).rglob("*") if p.is_file())}


def lance_epoch(uri: str, batch_size: int, columns: list[str] | None = None,
                **_: Any) -> dict[str, Any]:
    """One scan of the Lance dataset (files in the page cache) into tensors."""
    import lance
    import torch  # noqa: F401 - imported before the clock starts

    dataset = lance.dataset(uri)

    def source() -> Iterator[dict[str, Any]]:
        for batch in dataset.to_batches(batch_size=batch_size, columns=columns):
            if batch.num_rows:
                yield batch_to_tensors(batch)

    return _measure(source())


def lance_take(uri: str, rows: int, sizes: list[int], calls: list[int],
               seed: int = 0) -> dict[str, Any]:
    """Median milliseconds of ``dataset.take`` of n uniformly random rows."""
    import lance
    import numpy as np

    dataset = lance.dataset(uri)
    rng = np.random.default_rng(seed)
    dataset.take([0])  # open files and metadata before the clock
    out = {}
    for n, k in zip(sizes, calls, strict=True):
        times = []
        for _ in range(k):
            idx = rng.integers(0, rows, n).tolist()
            t0 = time.perf_counter()
            got = dataset.take(idx)
            times.append((time.perf_counter() - t0) * 1e3)
            assert got.num_rows == n, (got.num_rows, n)
        out[str(n)] = times
    return out


# -- Ray Data -------------------------------------------------------------------------


def ray_epoch(paths: list[str], batch_size: int, columns: list[str] | None = None,
              num_cpus: int = 2, **_: Any) -> dict[str, Any]:
    """Ray Data on a local Ray instance: the Parquet files read and materialized in
    Ray's object store (untimed), then one timed epoch of iter_torch_batches."""
    import ray

    ray.init(num_cpus=num_cpus, include_dashboard=False, log_to_driver=False,
             configure_logging=False)
    try:
        ctx = ray.data.DataContext.get_current()
        ctx.enable_progress_bars = False
        t0 = time.perf_counter()
        data = ray.data.read_parquet(paths, columns=columns).materialize()
        materialize_s = time.perf_counter() - t0
        res = _measure(iter(data.iter_torch_batches(batch_size=batch_size)))
        res["materialize_s"] = materialize_s
        return res
    finally:
        ray.shutdown()


if __name__ == "__main__":
    _MEASURE.worker_main(globals())
