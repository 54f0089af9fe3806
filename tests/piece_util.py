"""Pieces written and read from Python, for tests that feed the client
messages no node would send (or stand in for a node) or look at what nodes
sent: the header of cpp/icefloe/protocol/piece.h, written here (checked
against the shared vectors by tests/test_piece_vectors.py so that it cannot
drift from the nodes' encoder) and read by the nodes' own parser in the
client library (icefloe_parse_piece)."""

from __future__ import annotations

import ctypes
import struct
from collections.abc import Sequence
from types import SimpleNamespace

import numpy as np

from icefloe import _native, _pieces, _protocol

_HEADER = struct.Struct("<4sBBHQIIIII")
_FLAGS = _protocol.constants()["piece"]["flags"]
POSITIONS, WHOLE, SPAN, BY_REFERENCE = (_FLAGS[k] for k in (
    "positions", "whole", "span", "by_reference"))


class _Parsed(ctypes.Structure):
    """protocol_abi.h's IcefloePieceHeader."""

    _fields_ = [("flags", ctypes.c_uint8), ("batch", ctypes.c_uint64),
                ("batch_size", ctypes.c_uint32), ("count", ctypes.c_uint32),
                ("last_size", ctypes.c_uint32), ("entries", ctypes.c_uint32),
                ("sources", ctypes.c_uint32), ("entry_offset", ctypes.c_int64),
                ("source_offset", ctypes.c_int64)]


_native.check_layout("IcefloePieceHeader", _Parsed, _native.LAYOUT)
_parse = _native._lib.icefloe_parse_piece
_parse.restype = ctypes.c_int32
_parse.argtypes = [ctypes.c_char_p, ctypes.c_int64, ctypes.POINTER(_Parsed)]
_error = _native._lib.icefloe_piece_error
_error.restype = ctypes.c_char_p
_error.argtypes = [ctypes.c_int32]


def decode(metadata: bytes) -> SimpleNamespace:
    """A piece header's fields, its runs ((n, 2) offset, length), positions
    and source ((n, 2) start, length) as lists (None where it has none), by
    the nodes' parser; raises ValueError with its words."""
    h = _Parsed()
    code = _parse(metadata, len(metadata), ctypes.byref(h))
    if code != 0:
        raise ValueError(_error(code).decode())
    runs = positions = source = None
    if h.flags & POSITIONS:
        positions = np.frombuffer(metadata, "<u4", h.entries, h.entry_offset).tolist()
    elif not h.flags & WHOLE:
        runs = np.frombuffer(metadata, "<u4", 2 * h.entries, h.entry_offset).reshape(-1, 2).tolist()
    if h.flags & BY_REFERENCE:
        packed = np.frombuffer(metadata, [("start", "<u8"), ("length", "<u4")], h.sources,
                               h.source_offset)
        source = [[int(a), int(n)] for a, n in packed.tolist()]
    return SimpleNamespace(flags=h.flags, batch=h.batch, batch_size=h.batch_size, count=h.count,
                           last_size=h.last_size, runs=runs, positions=positions, source=source)


def encode(batch: int, batch_size: int, *, runs: Sequence[tuple[int, int]] = (),
           positions: Sequence[int] | None = None, count: int = 1, last_size: int | None = None,
           whole: bool = False, source: Sequence[tuple[int, int]] | None = None,
           flags: int | None = None) -> bytes:
    """A piece's metadata: ``runs`` or ``positions`` of ``count`` batches
    (``whole``: none), by reference when ``source`` is given; ``flags``
    overrides the flags the other arguments imply (to write what no node does)."""
    implied = (POSITIONS if positions is not None else 0) | (WHOLE if whole else 0) | \
        (SPAN if count > 1 else 0) | (BY_REFERENCE if source is not None else 0)
    entries = b"".join(struct.pack("<I", p) for p in positions) if positions is not None else \
        b"".join(struct.pack("<II", o, n) for o, n in runs)
    sources = b"".join(struct.pack("<QI", s, n) for s, n in source or ())
    return _HEADER.pack(b"IFPC", 1, implied if flags is None else flags, 0, batch, batch_size,
                        count, batch_size if last_size is None else last_size,
                        len(positions) if positions is not None else len(runs),
                        len(source or ())) + entries + sources


def kind(metadata: bytes) -> str:
    """What a message is: "chunk" (whole batches), "span" (rows of several
    batches) or "piece" (rows of one batch)."""
    header = decode(metadata)
    if header.flags & WHOLE:
        return "chunk"
    return "span" if header.count > 1 else "piece"


class Message:
    """A message as a stream hands it to the merge: rows and piece metadata;
    with ``rows``, a message by reference: ``data`` is the node's file and
    the header's source runs name ``rows`` rows in it."""

    def __init__(self, data, app_metadata: bytes, rows: int | None = None) -> None:
        self.data = data
        self.app_metadata = app_metadata
        self.holds = _native.ROWS_CARRIED if rows is None else _native.ROWS_IN_FILE
        self.rows = rows


def merged(*messages, first: int = 0, count: int = 1):
    """The batch (``count`` > 1: the span of batches) that the client's merge
    and assembly make of ``messages`` (:class:`Message`, a stream's, or
    (rows, metadata) pairs), each its own stream's."""
    left = [[Message(*m) if isinstance(m, tuple) else m] for m in messages]
    merger = _native.Merger(len(left), first, first + count)
    return next(_pieces.merge_steps(merger, len(left),
                                    lambda k: left[k].pop() if left[k] else None)).data
