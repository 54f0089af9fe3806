"""Pieces written from Python, for tests that feed the client messages no
node would send (or stand in for a node): the header of
cpp/icefloe/protocol/piece.h, checked against the shared vectors by
tests/test_piece_vectors.py so that it cannot drift from the nodes' encoder."""

from __future__ import annotations

import struct
from collections.abc import Sequence

from icefloe import _pieces

_HEADER = struct.Struct("<4sBBHQIIIII")


def encode(batch: int, batch_size: int, *, runs: Sequence[tuple[int, int]] = (),
           positions: Sequence[int] | None = None, count: int = 1, last_size: int | None = None,
           whole: bool = False, source: Sequence[tuple[int, int]] | None = None,
           flags: int | None = None) -> bytes:
    """A piece's metadata: ``runs`` or ``positions`` of ``count`` batches
    (``whole``: none), by reference when ``source`` is given; ``flags``
    overrides the flags the other arguments imply (to write what no node does)."""
    implied = (_pieces.POSITIONS if positions is not None else 0) | \
        (_pieces.WHOLE if whole else 0) | (_pieces.SPAN if count > 1 else 0) | \
        (_pieces.BY_REFERENCE if source is not None else 0)
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
    header = _pieces.read_header(metadata)
    if header.flags & _pieces.WHOLE:
        return "chunk"
    return "span" if header.count > 1 else "piece"


class Message:
    """A message as a stream hands it to the merge: rows and piece metadata
    (``holds``: how a stream by reference holds them, _native.ROWS_*)."""

    def __init__(self, data, app_metadata: bytes, holds: int = 0) -> None:
        self.data = data
        self.app_metadata = app_metadata
        self.holds = holds


def merged(*messages, first: int = 0, count: int = 1):
    """The batch (``count`` > 1: the span of batches) that the client's merge
    and assembly make of ``messages`` (:class:`Message`, or (rows, metadata)
    pairs), each its own stream's."""
    from icefloe import _native

    left = [[m if isinstance(m, Message) else Message(*m)] for m in messages]
    merger = _native.Merger(len(left), first, first + count)
    out = next(_pieces.merge_steps(merger, len(left), lambda k: left[k].pop() if left[k] else None))
    return out.data if isinstance(out, _pieces.Chunk) else out
