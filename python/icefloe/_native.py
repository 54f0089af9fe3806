"""The package's native helpers (cpp/icefloe/client), loaded with ctypes.

A C ABI library with no dependencies beyond the C++ runtime (no Arrow, so it
works beside any pyarrow): ``parse_piece`` reads a piece header with the
nodes' own parser (protocol/piece.h), and ``scatter`` puts the pieces of a
batch or window span in place in one pass (cpp/icefloe/client/scatter.h), and
``group_rows`` groups a take's rows by the replica set holding them and writes
their rows-ticket bodies with the head's own code (protocol/row_groups.h).
The library ships in the package; importing icefloe without it is an error
(ImportError naming the file), never a slower path.

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


class PieceHeader(ctypes.Structure):
    """A parsed piece header (piece_abi.h): its runs or positions start at
    byte ``entry_offset`` of the bytes parsed, its source runs at
    ``source_offset``."""

    _fields_ = [("flags", ctypes.c_uint8), ("batch", ctypes.c_uint64),
                ("batch_size", ctypes.c_uint32), ("count", ctypes.c_uint32),
                ("last_size", ctypes.c_uint32), ("entries", ctypes.c_uint32),
                ("sources", ctypes.c_uint32), ("entry_offset", ctypes.c_int64),
                ("source_offset", ctypes.c_int64)]


def _open() -> ctypes.CDLL:
    try:
        return ctypes.CDLL(str(_LIB))
    except OSError as exc:
        raise ImportError(f"icefloe's native client library {_LIB} cannot be loaded ({exc}); "
                          "reinstall the package") from exc


_lib = _open()
_lib.icefloe_parse_piece.restype = ctypes.c_int32
_lib.icefloe_parse_piece.argtypes = [ctypes.c_void_p, ctypes.c_int64,
                                     ctypes.POINTER(PieceHeader)]
_lib.icefloe_piece_error.restype = ctypes.c_char_p
_lib.icefloe_piece_error.argtypes = [ctypes.c_int32]


def parse_piece(address: int, size: int) -> PieceHeader | str:
    """The piece header in ``size`` bytes at ``address`` (kept alive by the
    caller), or the words that refuse them (protocol/piece.h's PieceErrorText)."""
    header = PieceHeader()
    code = _lib.icefloe_parse_piece(address, size, ctypes.byref(header))
    return header if code == 0 else _lib.icefloe_piece_error(code).decode()


_lib.icefloe_group_rows.restype = ctypes.c_int32
_lib.icefloe_group_rows.argtypes = [ctypes.c_int64, ctypes.c_void_p, ctypes.c_void_p,
                                    ctypes.c_uint32, ctypes.c_uint32] + [ctypes.c_void_p] * 5


class SliceTable:
    """A slice map's slices as the library reads them (row_groups.h): the
    arrays kept alive, their addresses looked up once."""

    __slots__ = ("stops", "groups", "num_groups", "_args")

    def __init__(self, stops: np.ndarray, group_of_slice: np.ndarray, num_groups: int) -> None:
        self.stops = np.ascontiguousarray(stops, dtype=np.uint64)
        self.groups = np.ascontiguousarray(group_of_slice, dtype=np.uint32)
        self.num_groups = num_groups
        self._args = (len(self.stops), self.stops.ctypes.data, self.groups.ctypes.data,
                      num_groups)

    def group_rows(self, ids: np.ndarray
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The rows-ticket body of each replica set holding any of ``ids``
        (C-contiguous uint64, each below the last stop): the bytes, each set's
        offset and length in them (0: none), and each row's set. Raises ValueError on a row
        the library refuses (callers check rows first). One allocation and
        two address lookups: a one-row take calls this too."""
        n, g = len(ids), self.num_groups
        # offsets and lengths (u64 per set), the scratch (u32 per row), the bodies.
        table, scratch = 16 * g, 4 * n
        work = np.empty(table + scratch + 8 * g + 12 * n, dtype=np.uint8)
        base = work.ctypes.data
        code = _lib.icefloe_group_rows(*self._args, n, ids.ctypes.data, base + table,
                                       base + table + scratch, base, base + 8 * g)
        if code != 0:
            raise ValueError("a row outside the slice map" if code == 1 else
                             "a malformed slice map")
        counts = work[:table].view(np.uint64)
        return (work[table + scratch:], counts[:g], counts[g:],
                work[table:table + scratch].view(np.uint32))


def _load() -> Callable[[int, Sequence[int], Sequence[int], Sequence[ScatterPiece]], int]:
    fn = _lib.icefloe_scatter
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
