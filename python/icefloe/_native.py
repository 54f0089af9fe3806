"""The package's native helpers (cpp/icefloe/client), loaded with ctypes.

A C ABI library with no dependencies: ``icefloe_scatter`` puts the pieces of
a window span in place in one pass (cpp/icefloe/client/scatter.h). When the
library is absent (a source tree without a build) or ``ICEFLOE_NATIVE=0``,
``scatter`` is None and callers take their pure Python path, which gives the
same result.

A span of 1 MiB or more is scattered by two threads, half the columns each
(the caller's and one helper thread per process): reading rows from random
places is memory latency, and a second core has its own misses in flight
(the window shuffle by reference on the benchmark's 12M-row table: 0.58
against 0.43 GB/s with one thread). ``ICEFLOE_SCATTER_THREADS=1`` keeps it
to the caller's thread.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

_LIB = Path(__file__).resolve().parent / "lib" / "libicefloe_client.so"

OK, MALFORMED, OUTSIDE, TWICE, COUNT, NO_MEMORY, OUTSIDE_SOURCE = range(7)  # scatter.h


class _Piece(ctypes.Structure):
    _fields_ = [("positions", ctypes.c_void_p), ("runs", ctypes.c_void_p),
                ("num_runs", ctypes.c_int64), ("rows", ctypes.c_int64),
                ("base", ctypes.c_int64), ("columns", ctypes.c_void_p),
                ("source_runs", ctypes.c_void_p), ("num_source_runs", ctypes.c_int64),
                ("source_rows", ctypes.c_int64)]


class ScatterPiece:
    """One piece's side of a scatter: its rows' positions (u32 positions or
    (n, 2) u32 runs, C-contiguous), counted from ``base``, and the address of
    each column's first value; by reference, ``source``: the runs of those
    columns' ``source_rows`` rows that are the piece's (packed 12-byte u64
    first row, u32 length records, as nodes send them). Holds the arrays
    alive for the call."""

    __slots__ = ("positions", "runs", "rows", "base", "columns", "source", "source_rows")

    def __init__(self, positions: np.ndarray | None, runs: np.ndarray | None, rows: int,
                 base: int, columns: Sequence[int], source: np.ndarray | None = None,
                 source_rows: int = 0) -> None:
        self.positions = positions
        self.runs = runs
        self.rows = rows
        self.base = base
        self.columns = np.asarray(columns, dtype=np.uintp)
        self.source = source
        self.source_rows = source_rows


def _load() -> Callable[[int, Sequence[int], Sequence[int], Sequence[ScatterPiece]], int] | None:
    if os.environ.get("ICEFLOE_NATIVE", "1") == "0":
        return None
    try:
        lib = ctypes.CDLL(str(_LIB))
    except OSError:
        return None
    fn = lib.icefloe_scatter
    fn.restype = ctypes.c_int32
    fn.argtypes = [ctypes.c_int64, ctypes.c_int32, ctypes.c_void_p, ctypes.c_void_p,
                   ctypes.c_int32, ctypes.c_void_p]

    def call(span_rows: int, widths: np.ndarray, out: np.ndarray,
             pieces: Sequence[ScatterPiece], columns: np.ndarray) -> int:
        """icefloe_scatter of ``columns`` (indices) of the pieces."""
        c_pieces = (_Piece * len(pieces))()
        alive = []  # the column address arrays c_pieces point into
        for c, p in zip(c_pieces, pieces, strict=True):
            if p.positions is not None:
                c.positions = p.positions.ctypes.data
            else:
                assert p.runs is not None
                c.runs = p.runs.ctypes.data
                c.num_runs = len(p.runs)
            addresses = np.ascontiguousarray(p.columns[columns])
            alive.append(addresses)
            c.rows, c.base, c.columns = p.rows, p.base, addresses.ctypes.data
            if p.source is not None:
                c.source_runs = p.source.ctypes.data
                c.num_source_runs, c.source_rows = len(p.source), p.source_rows
        c_widths = np.ascontiguousarray(widths[columns])
        c_out = np.ascontiguousarray(out[columns])
        return fn(span_rows, len(columns), c_widths.ctypes.data, c_out.ctypes.data,
                  len(pieces), ctypes.addressof(c_pieces))

    def scatter(span_rows: int, widths: Sequence[int], out: Sequence[int],
                pieces: Sequence[ScatterPiece]) -> int:
        """Writes every piece's rows to their positions in the ``out``
        columns (addresses of span_rows values of ``widths`` bytes each); one
        of the result codes above, and nothing written unless OK."""
        if any(p.positions is not None and len(p.positions) != p.rows for p in pieces):
            return COUNT  # the library reads `rows` positions
        w = np.asarray(widths, dtype=np.int64)
        o = np.asarray(out, dtype=np.uintp)
        everything = np.arange(len(w))
        if len(w) < 2 or span_rows * int(w.sum()) < _PARALLEL_BYTES or not _THREADS:
            return call(span_rows, w, o, pieces, everything)
        # Two halves of the bytes, the second on the helper thread (ctypes
        # lets go of the GIL): random reads are memory latency, and another
        # core has its own misses in flight.
        half = int(np.searchsorted(np.cumsum(w), w.sum() / 2))
        first, second = everything[:half + 1], everything[half + 1:]
        if not len(second):
            return call(span_rows, w, o, pieces, everything)
        helper = _pool().submit(call, span_rows, w, o, pieces, second)
        try:
            mine = call(span_rows, w, o, pieces, first)
        finally:
            # It writes into the caller's buffers: wait for it, whatever
            # happened here (the call is bounded work, no I/O).
            theirs = helper.result()
        return mine if mine != OK else theirs

    return scatter


_PARALLEL_BYTES = 1 << 20  # a span's bytes from which two threads scatter it
_THREADS = os.environ.get("ICEFLOE_SCATTER_THREADS", "2") != "1"
_POOL: tuple[int, ThreadPoolExecutor] | None = None


def _pool() -> ThreadPoolExecutor:
    """The helper thread's executor, made again in a forked child (which
    inherits the executor but not its thread)."""
    global _POOL
    if _POOL is None or _POOL[0] != os.getpid():
        _POOL = (os.getpid(), ThreadPoolExecutor(1, thread_name_prefix="icefloe-scatter"))
    return _POOL[1]


scatter = _load()
