"""The package's native library (cpp/icefloe/client), loaded with ctypes.

A C ABI with no dependencies beyond the C++ runtime (no Arrow, so it works
beside any pyarrow): ``Merger`` merges an epoch's streams with the nodes' own
piece parser and assembles batches, handed back through the Arrow C Data
Interface (merge.h, assemble.h); ``SliceTable`` groups a take's rows with the
head's own code (protocol/row_groups.h). Importing icefloe without it is an
ImportError naming the file, never a slower path.
"""

from __future__ import annotations

import ctypes
import json
from pathlib import Path
from typing import Any

import numpy as np

from ._protocol import constants
from .errors import InvalidArgument

_LIB = Path(__file__).resolve().parent / "lib" / "libicefloe_client.so"

# The library's constants, from their C++ definitions (through _fields.json).
_C = constants()["client"]
OK, NO_MEMORY, UNSUPPORTED = (_C["assemble_results"][k] for k in ("ok", "no_memory",
                                                                  "unsupported"))
MERGE_ERROR, MERGE_NEED, MERGE_BATCH, MERGE_CHUNK, MERGE_DONE = (
    _C["merge_steps"][k] for k in ("error", "need", "batch", "chunk", "done"))
ROWS_CARRIED, ROWS_IN_FILE = _C["rows"]["carried"], _C["rows"]["in_file"]
MERGE_COPY = _C["merge_flags"]["copy"]


class ArrowArray(ctypes.Structure):
    """The Arrow C Data Interface's ArrowArray (arrow_c_abi.h)."""

    _fields_ = [(name, ctypes.c_int64) for name in
                ("length", "null_count", "offset", "n_buffers", "n_children")] + \
        [(name, ctypes.c_void_p) for name in
         ("buffers", "children", "dictionary", "release", "private_data")]


def _open() -> ctypes.CDLL:
    try:
        return ctypes.CDLL(str(_LIB))
    except OSError as exc:
        raise ImportError(f"icefloe's native client library {_LIB} cannot be loaded ({exc}); "
                          "reinstall the package") from exc


_lib = _open()


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


_ERROR_BYTES = 512
_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.restype = ctypes.c_void_p
_capsule_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
# Schemas exported for the library (an epoch's batches share one), found by
# equality (hashing a schema costs more than exporting it): the last few.
_schemas: list[tuple[object, object, int]] = []


def exported_schema(schema: object) -> int:
    """The address of ``schema`` exported through the C Data Interface (a
    capsule, released when it goes; kept while among the last 8 asked for)."""
    global _schemas
    known = _schemas  # replaced whole below: a racing thread sees one list or the other
    for s, _, address in known:
        if s.equals(schema, check_metadata=True):  # type: ignore[attr-defined]
            return address
    capsule = schema.__arrow_c_schema__()  # type: ignore[attr-defined]
    address = _capsule_pointer(capsule, b"arrow_schema")
    _schemas = [(schema, capsule, address)] + known[:7]
    return address


class MergeStep(ctypes.Structure):
    """What to do next (merge.h's IcefloeMergeStep); its arrays stay valid
    until the merger's next call."""

    _fields_ = [("kind", ctypes.c_int32), ("stream", ctypes.c_int32), ("batch", ctypes.c_uint64),
                ("count", ctypes.c_uint32), ("batch_size", ctypes.c_uint32),
                ("last_size", ctypes.c_uint32), ("num_pieces", ctypes.c_int32),
                ("streams", ctypes.POINTER(ctypes.c_int32)),
                ("bases", ctypes.POINTER(ctypes.c_int64)),
                ("offsets", ctypes.POINTER(ctypes.c_int64)), ("in_order", ctypes.c_int32),
                ("in_file", ctypes.c_int32), ("start", ctypes.c_int64), ("rows", ctypes.c_int64)]


def check_layout(name: str, mirror: type[ctypes.Structure], layout: dict[str, Any]) -> None:
    """Refuses a ctypes mirror of the library's struct ``name`` whose size,
    fields, or any field's offset or size differ from the library's own
    (``layout``: icefloe_abi_layout's JSON): an ImportError naming the struct
    and the field, never a struct read at the wrong offsets."""
    want = layout.get(name)
    where = f"icefloe._native's mirror of {name} ({mirror.__name__})"
    if want is None:
        raise ImportError(f"{where}: the native library {_LIB} describes no struct {name}")
    have = {field[0]: getattr(mirror, field[0]) for field in mirror._fields_}
    for field, (offset, size) in want["fields"].items():
        got = have.pop(field, None)
        if got is None:
            raise ImportError(f"{where} has no field {name}.{field} (offset {offset}, {size} "
                              f"bytes in the native library {_LIB})")
        if (got.offset, got.size) != (offset, size):
            raise ImportError(f"{where}: {name}.{field} is at offset {got.offset}, {got.size} "
                              f"bytes; the native library {_LIB} has it at offset {offset}, "
                              f"{size} bytes")
    if have:
        raise ImportError(f"{where} has field {name}.{next(iter(have))}, which the native "
                          f"library {_LIB} does not")
    if ctypes.sizeof(mirror) != want["size"]:
        raise ImportError(f"{where} is {ctypes.sizeof(mirror)} bytes; the native library "
                          f"{_LIB} has {want['size']}")


_lib.icefloe_abi_layout.restype = ctypes.c_char_p
_lib.icefloe_abi_layout.argtypes = []
# The structs this module reads and writes through the library, checked
# against its own layout of them (protocol_abi.h) before any is used.
LAYOUT: dict[str, Any] = json.loads(_lib.icefloe_abi_layout())
MIRRORS: dict[str, type[ctypes.Structure]] = {"IcefloeMergeStep": MergeStep,
                                              "ArrowArray": ArrowArray}
for _struct, _mirror in MIRRORS.items():
    check_layout(_struct, _mirror, LAYOUT)

_STEP = ctypes.POINTER(MergeStep)
_i32, _i64, _u64, _p = ctypes.c_int32, ctypes.c_int64, ctypes.c_uint64, ctypes.c_void_p
for _name, _result, _args in (
        ("merger_new", _p, [_i32, _u64, _u64, _i32]),
        ("merger_free", None, [_p]),
        ("merger_push", _i32, [_p, _i32, _p, _i64, _i64, _i32, _i64, _STEP]),
        ("merger_push_file", _i32, [_p, _i32, _p, _i64, _i64, _p, _STEP]),
        ("merger_push_rows", _i32, [_p, _i32, _u64, ctypes.c_uint32, _i64, _p, _STEP]),
        ("file_new", _p, [_i32, _p]),
        ("file_free", None, [_p]),
        ("file_rows", _i64, [_p]),
        ("merger_assemble", _i32, [_p, _p, _p, _p, _p, ctypes.c_char_p, _i64]),
        ("merger_end", _i32, [_p, _i32, _STEP]),
        ("merger_next", _i32, [_p, _STEP]),
        ("merger_piece_rows", _i32, [_p, _i32, _p]),
        ("merger_error", ctypes.c_char_p, [_p]),
        ("group_rows", _i32, [_i64, _p, _p, ctypes.c_uint32, ctypes.c_uint32] + [_p] * 5)):
    getattr(_lib, "icefloe_" + _name).restype = _result
    getattr(_lib, "icefloe_" + _name).argtypes = _args


class File:
    """A node's shared file for the library (assemble.h's IcefloeFile): the
    record batches of its segments, of one schema, exported once and laid
    end to end, so that a piece whose source runs cross segments is
    assembled in one call. ``schema`` and ``num_rows`` are the batches';
    :meth:`take` reads rows of it in Python (a column the library does not
    build)."""

    __slots__ = ("_f", "schema", "num_rows", "_batches")

    def __init__(self, batches: list[Any]) -> None:
        self._f = None
        self._batches = batches
        self.schema = batches[0].schema
        arrays = (ArrowArray * len(batches))()
        for k, b in enumerate(batches):
            b._export_to_c(ctypes.addressof(arrays[k]))
        self._f = _lib.icefloe_file_new(len(batches), ctypes.addressof(arrays))
        if not self._f:
            raise MemoryError("no memory for a node's shared file of "
                              f"{len(batches)} segments")
        self.num_rows = int(_lib.icefloe_file_rows(self._f))

    def __del__(self) -> None:
        if getattr(self, "_f", None):
            _lib.icefloe_file_free(self._f)

    @property
    def address(self) -> int:
        return self._f

    def take(self, rows: Any) -> Any:
        """The file's ``rows`` (an int64 pyarrow array), copied, as one record batch."""
        import pyarrow as pa

        table = pa.Table.from_batches(self._batches, schema=self.schema).take(rows)
        batches = table.combine_chunks().to_batches()
        return batches[0] if batches else pa.RecordBatch.from_pylist([], schema=self.schema)


class Merger:
    """icefloe_merger (merge.h): which pieces make each batch of an epoch's
    streams from batch ``first`` to ``num_batches`` (``copy``: every row
    copied out of the nodes' files, never a slice of one). Every method
    returns the step to take next (one struct, overwritten by the next call);
    a refusal raises InvalidArgument with the library's words."""

    __slots__ = ("_m", "_step", "_out")

    def __init__(self, streams: int, first: int, num_batches: int, copy: bool = False) -> None:
        self._m = _lib.icefloe_merger_new(streams, first, num_batches, MERGE_COPY if copy else 0)
        if not self._m:
            raise MemoryError("no memory for a merge of the epoch's streams")
        self._step = MergeStep()
        self._out = ctypes.byref(self._step)

    def __del__(self) -> None:
        if getattr(self, "_m", None):
            _lib.icefloe_merger_free(self._m)

    def _stepped(self, kind: int) -> MergeStep:
        if kind == MERGE_ERROR:
            raise InvalidArgument(_lib.icefloe_merger_error(self._m).decode(errors="replace"))
        return self._step

    def next(self) -> MergeStep:
        return self._stepped(_lib.icefloe_merger_next(self._m, self._out))

    def push(self, stream: int, address: int, size: int, rows: int, holds: int = ROWS_CARRIED,
             file_rows: int = 0) -> MergeStep:
        """Stream ``stream``'s next message of ``rows`` rows: its header's
        ``size`` bytes at ``address`` (kept alive by the caller until its
        batch is assembled); ``holds``: ROWS_*; ``file_rows``: the rows of
        the node's file, for rows in it."""
        return self._stepped(_lib.icefloe_merger_push(self._m, stream, address, size, rows,
                                                      holds, file_rows, self._out))

    def push_file(self, stream: int, address: int, size: int, rows: int, file: File) -> MergeStep:
        """Stream ``stream``'s next message by reference, whose source runs
        name rows of ``file`` across its segments (kept alive by the caller
        until its batch is assembled)."""
        return self._stepped(_lib.icefloe_merger_push_file(self._m, stream, address, size, rows,
                                                           file.address, self._out))

    def push_rows(self, stream: int, batch_size: int, positions: np.ndarray) -> MergeStep:
        """Stream ``stream``'s next message, made by the caller: rows of batch
        0 (of ``batch_size`` positions) at ``positions`` (C-contiguous uint32,
        copied)."""
        return self._stepped(_lib.icefloe_merger_push_rows(
            self._m, stream, 0, batch_size, len(positions), positions.ctypes.data, self._out))

    def end(self, stream: int) -> MergeStep:
        return self._stepped(_lib.icefloe_merger_end(self._m, stream, self._out))

    def piece_rows(self, piece: int, rows: int) -> np.ndarray:
        """The ``rows`` rows of the last BATCH's piece ``piece`` in what was
        exported for it (its rows in the node's file, by reference)."""
        out = np.empty(rows, dtype=np.int64)
        if _lib.icefloe_merger_piece_rows(self._m, piece, out.ctypes.data) != 0:
            raise InvalidArgument(f"the merge has no piece {piece} to read rows of")
        return out

    def assemble(self, schema: int, batches: ctypes.Array, out: ArrowArray,
                 inverse: int | None = None) -> tuple[int, str]:
        """The last step's batch (a BATCH) from ``batches`` (its pieces'
        exported arrays, which the library releases) of the exported
        ``schema`` (an address) into ``out``: assemble.h's result code and
        the words of the error it means (the column, for UNSUPPORTED)."""
        error = ctypes.create_string_buffer(_ERROR_BYTES)
        code = _lib.icefloe_merger_assemble(self._m, schema, ctypes.addressof(batches),
                                            ctypes.addressof(out), inverse, error, _ERROR_BYTES)
        return code, error.value.decode(errors="replace")
