"""One pass of a training loop's input over an iterator of tensor dicts: the
figures every epoch worker reports; and the workers' command line. Standard
library only, so that the peers' interpreter (benchmarks/peer_workers.py,
another environment) loads it by path as the project's workers import it."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator
from typing import Any


def tensor_bytes(tensors: dict[str, Any]) -> tuple[int, int]:
    """(rows, bytes) of a dict of tensors; entries that are not tensors count nothing."""
    rows, nbytes = 0, 0
    for t in tensors.values():
        if hasattr(t, "element_size"):
            nbytes += t.element_size() * t.nelement()
            rows = len(t)
    return rows, nbytes


class BatchCounter:
    """Rows, tensor bytes and batches of a stream of tensor dicts. A batch's
    bytes are its rows times the bytes a row takes in batches with the same
    keys, found once with :func:`tensor_bytes` (which costs ~16 µs a dict of 18
    tensors, a fifth of a 1024-row batch's time here): counting is not what is
    measured, and every column's bytes per row are fixed."""

    def __init__(self) -> None:
        self.rows = self.batches = 0
        self._bytes = 0.0
        self._row_bytes: dict[tuple[str, ...], float] = {}

    def add(self, tensors: dict[str, Any]) -> None:
        keys = tuple(tensors)
        per_row = self._row_bytes.get(keys)
        if per_row is None:
            r, b = tensor_bytes(tensors)
            per_row = self._row_bytes[keys] = b / r if r else 0.0
        r = len(next(iter(tensors.values()), ()))
        self.rows += r
        self._bytes += r * per_row
        self.batches += 1

    @property
    def bytes(self) -> int:
        return round(self._bytes)


def measure(source: Iterator[dict[str, Any]], max_batches: int | None = None) -> dict[str, Any]:
    """Rows/s, GB/s of tensor bytes, first-batch time and CPU of one pass over
    ``source`` (or its first ``max_batches`` batches); the clock starts here."""
    count = BatchCounter()
    first = None
    cpu0 = time.process_time()
    wall0 = time.time()
    t0 = time.perf_counter()
    for tensors in source:
        if first is None:
            first = time.perf_counter() - t0
        count.add(tensors)
        if max_batches is not None and count.batches >= max_batches:
            break
    dt = time.perf_counter() - t0
    cpu = time.process_time() - cpu0
    rows, nbytes = count.rows, count.bytes
    return {"rows": rows, "bytes": nbytes, "batches": count.batches, "seconds": dt,
            "rows_per_s": rows / dt, "gbps": nbytes / dt / 1e9, "first_batch_s": first,
            "cpu_seconds": cpu, "cpu_s_per_gb": cpu / (nbytes / 1e9), "start_wall": wall0,
            "end_wall": wall0 + dt}


def worker_main(functions: dict[str, Any]) -> None:
    """``prog NAME '{"arg": ...}'``: runs ``functions[NAME](**args)`` and prints
    its result as the last line, one JSON object."""
    name, args = sys.argv[1], json.loads(sys.argv[2]) if len(sys.argv) > 2 else {}
    result = functions[name](**args)
    sys.stdout.write("\n" + json.dumps(result, default=float) + "\n")
    sys.stdout.flush()
