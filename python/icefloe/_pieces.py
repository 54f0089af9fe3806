"""Assembling consumer batches from the pieces nodes stream (docs/protocol.md).

Every record batch a node sends for a plan or row ticket is tagged with one
piece header (cpp/icefloe/protocol/piece.h; its constants come from
``_fields.json``): the batch, or span of consecutive batches, its rows go to,
and where. A piece's rows fill the positions its runs or positions name
(``Piece``); *whole* batches travel as one *chunk* (``Chunk``), split here
zero-copy, or turned into tensors at once and split (:class:`ChunkTransform`).
Every endpoint streams pieces in increasing batch order, so a batch is
complete when its rows have arrived, and it is yielded as soon as it is.
Every batch of a chunk is complete when it arrives, so a failover resumes
after the chunk exactly as after a batch.

An endpoint's rows of a window-mode *span* of batches (cut by the plan, the
same for every endpoint) come as one piece whose positions run over the
span's batches laid end to end. The pieces of every endpoint for a span are
put in place together and handed on as a chunk.
"""

from __future__ import annotations

import ctypes
import itertools
import queue
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from . import _native
from . import _protocol as protocol
from ._failover import is_break, named
from .errors import Error, InvalidArgument, StreamBroken, map_error

_PIECE = protocol.constants()["piece"]
POSITIONS, WHOLE, SPAN, BY_REFERENCE = (_PIECE["flags"][k] for k in (
    "positions", "whole", "span", "by_reference"))
SOURCE_RUN = np.dtype([("start", "<u8"), ("length", "<u4")])  # packed: 12 bytes
_DONE = object()
_JOIN_TIMEOUT_S = 10.0


class SourceRows:
    """A piece's rows left in a node's shared file until they are put in
    place: runs of the file's rows (``source``, packed u64 first row, u32
    length records, C-contiguous), in the piece's order. The native assembly
    reads them there; ``take`` copies them out for any other use."""

    __slots__ = ("file", "source", "num_rows", "_take")

    def __init__(self, file: pa.RecordBatch, source: np.ndarray, num_rows: int,
                 take: Callable[[], pa.RecordBatch]) -> None:
        self.file = file  # the file's batch, projected
        self.source = source
        self.num_rows = num_rows
        self._take = take

    @property
    def schema(self) -> pa.Schema:
        return self.file.schema

    def take(self) -> pa.RecordBatch:
        return self._take()


@dataclass
class Piece:
    batch: int  # a span's first
    batch_size: int  # in a span, every batch's but the last
    runs: np.ndarray | None  # (n, 2) uint32: offset, length
    data: pa.RecordBatch | SourceRows  # SourceRows: by reference, not yet taken
    scattered: np.ndarray | None = None  # uint32 position of each row (instead of runs)
    count: int = 1  # batches spanned (a span when above 1)
    last_size: int = 0  # a span's last batch's rows

    def span_rows(self) -> int:
        """Positions of the piece's batch, or of its span."""
        if self.count == 1:
            return self.batch_size
        return self.batch_size * (self.count - 1) + self.last_size

    def num_positions(self) -> int:
        """How many positions the piece names: one per row, when well formed."""
        if self.scattered is not None:
            return len(self.scattered)
        return int(self.runs[:, 1].sum()) if self.runs is not None and len(self.runs) else 0


@dataclass
class Chunk:
    """Whole batches batch, ..., batch + count - 1, in ``data``'s rows."""

    batch: int
    batch_size: int
    count: int
    last_size: int
    data: pa.RecordBatch
    # The row of ``data`` where each batch starts; None: one after another.
    # A chunk by reference of a rank's batches is a slice of the node's file
    # from its first batch to its last, the other ranks' rows between them.
    offsets: list[int] | None = None

    def sizes(self) -> list[int]:
        """Rows of each of the chunk's batches."""
        return [self.batch_size] * (self.count - 1) + [self.last_size]

    def split(self, transform: Callable[[pa.RecordBatch], Any] | None) -> list[Any]:
        """One item per batch: the batch (a zero-copy slice), or what
        ``transform`` makes of it (its ``many`` at once when it has one)."""
        if self.offsets is None:
            return apply_many(transform, self.data, self.sizes())
        return apply_at(transform, self.data, self.offsets, self.sizes())


class ChunkTransform:
    """A per-batch transform (``one``) that can also turn several whole
    batches at once: ``many(record_batch, sizes)`` returns one item per batch,
    equal to ``one`` of each of the ``sizes``-row slices, in order, but
    cheaper (e.g. one conversion to tensors, then views). Any transform with
    such a ``many`` attribute is used this way (icefloe.torch's
    ``batch_to_tensors`` has one). ``many_at(record_batch, offsets, sizes)``,
    when given, does the same for the ``sizes[k]``-row slices at rows
    ``offsets[k]`` (a rank's batches in a span of a node's shared file)."""

    def __init__(self, one: Callable[[pa.RecordBatch], Any],
                 many: Callable[[pa.RecordBatch, list[int]], list[Any]],
                 many_at: Callable[[pa.RecordBatch, list[int], list[int]], list[Any]] | None
                 = None) -> None:
        self.one = one
        self.many = many
        self.many_at = many_at

    def __call__(self, batch: pa.RecordBatch) -> Any:
        return self.one(batch)


def slices(data: pa.RecordBatch, sizes: list[int]) -> list[pa.RecordBatch]:
    """``data`` cut into consecutive zero-copy slices of ``sizes`` rows."""
    out, offset = [], 0
    for n in sizes:
        out.append(data.slice(offset, n))
        offset += n
    return out


def apply_many(transform: Callable[[pa.RecordBatch], Any] | None, data: pa.RecordBatch,
               sizes: list[int]) -> list[Any]:
    """``transform`` of each consecutive ``sizes``-row slice of ``data`` (the
    slices themselves without one), through its ``many`` when it has one."""
    many = getattr(transform, "many", None)
    if many is not None:
        return many(data, sizes)
    batches = slices(data, sizes)
    return batches if transform is None else [transform(b) for b in batches]


def apply_at(transform: Callable[[pa.RecordBatch], Any] | None, data: pa.RecordBatch,
             offsets: list[int], sizes: list[int]) -> list[Any]:
    """``transform`` of each ``sizes[k]``-row slice of ``data`` at row
    ``offsets[k]`` (the slices themselves without one), through its
    ``many_at`` when it has one."""
    many_at = getattr(transform, "many_at", None)
    if many_at is not None:
        return many_at(data, offsets, sizes)
    batches = [data.slice(o, n) for o, n in zip(offsets, sizes, strict=True)]
    return batches if transform is None else [transform(b) for b in batches]


class Header:
    """A piece's header, and its runs ((n, 2) u32 offset, length), positions
    (u32) and source runs (:data:`SOURCE_RUN` records), as views of the
    metadata it was read from (None where it has none)."""

    __slots__ = ("flags", "batch", "batch_size", "count", "last_size", "runs", "positions",
                 "source")

    def __init__(self, flags: int, batch: int, batch_size: int, count: int, last_size: int,
                 runs: np.ndarray | None, positions: np.ndarray | None,
                 source: np.ndarray | None) -> None:
        self.flags = flags
        self.batch = batch
        self.batch_size = batch_size
        self.count = count
        self.last_size = last_size
        self.runs = runs
        self.positions = positions
        self.source = source


def read_header(metadata: Any) -> Header:
    """The piece header of a message's metadata (a pyarrow Buffer, or bytes),
    parsed and checked by the nodes' own parser (protocol/piece.cc, through
    the native library); the arrays are views of the metadata."""
    if metadata is None:
        raise InvalidArgument("a node sent a batch without piece metadata")
    buffer = metadata if isinstance(metadata, pa.Buffer) else pa.py_buffer(metadata)
    h = _native.parse_piece(buffer.address, buffer.size)
    if isinstance(h, str):
        raise InvalidArgument(f"a node sent malformed piece metadata: {h}")
    runs = positions = source = None
    if h.flags & POSITIONS:
        positions = np.frombuffer(buffer, dtype="<u4", count=h.entries, offset=h.entry_offset)
    elif not h.flags & WHOLE:
        runs = np.frombuffer(buffer, dtype="<u4", count=2 * h.entries,
                             offset=h.entry_offset).reshape(h.entries, 2)
    if h.flags & BY_REFERENCE:
        source = np.frombuffer(buffer, dtype=SOURCE_RUN, count=h.sources,
                               offset=h.source_offset)
    return Header(h.flags, h.batch, h.batch_size, h.count, h.last_size, runs, positions, source)


def message_piece(message: Any) -> Piece | Chunk:
    """The piece or chunk a stream's message holds: a FlightStreamChunk
    (rows carried, header in its app_metadata), or what a
    :class:`icefloe._shared.SharedReader` makes of one (``header`` read,
    rows taken from the node's file, ``runs`` for a chunk in a span of it)."""
    header = getattr(message, "header", None)
    if header is None:
        header = read_header(message.app_metadata)
        if header.flags & BY_REFERENCE:
            raise InvalidArgument("a node sent a piece by reference on a stream that "
                                  "carries its rows")
    return parse_piece(message.data, header, getattr(message, "runs", None))


def parse_piece(data: pa.RecordBatch | SourceRows, header: Header,
                runs: tuple[list[int], list[int]] | None = None) -> Piece | Chunk:
    """The piece or chunk of ``data`` that ``header`` describes. ``runs``
    (starts, lengths in ``data``): a chunk by reference whose rows are those
    runs of ``data`` (a span of the node's file), not all of it."""
    if header.flags & WHOLE:
        return _parse_chunk(data, header, runs)  # type: ignore[arg-type]
    if runs is not None:
        raise InvalidArgument("a node sent runs of shared rows for a piece that is not a chunk")
    return Piece(header.batch, header.batch_size, header.runs, data, header.positions,
                 header.count, header.last_size)


def _parse_chunk(data: pa.RecordBatch, header: Header,
                 runs: tuple[list[int], list[int]] | None) -> Chunk:
    count, batch_size, last_size = header.count, header.batch_size, header.last_size
    rows = data.num_rows if runs is None else sum(runs[1])
    if rows != (count - 1) * batch_size + last_size:
        raise InvalidArgument(
            f"a node sent a chunk of {rows} rows for {count} batches of "
            f"{batch_size} rows (the last {last_size})")
    chunk = Chunk(header.batch, batch_size, count, last_size, data)
    if runs is not None:
        chunk.offsets = _batch_offsets(runs, chunk.sizes())
    return chunk


def _batch_offsets(runs: tuple[list[int], list[int]], sizes: list[int]) -> list[int]:
    """Where each batch of ``sizes`` starts when the batches fill ``runs``
    (starts, lengths) in order. Nodes merge only whole batches into a run,
    so a batch across two runs is malformed."""
    out: list[int] = []
    starts, lengths = runs
    i, at, left = -1, 0, 0
    for n in sizes:
        while left == 0 and i + 1 < len(starts):
            i += 1
            at, left = starts[i], lengths[i]
        if n > left:
            raise InvalidArgument(f"a node sent a chunk by reference whose batch {len(out)} "
                                  "runs across two runs of shared rows")
        out.append(at)
        at += n
        left -= n
    return out


def expand_runs(starts: np.ndarray, lengths: np.ndarray, dtype: Any = np.int64) -> np.ndarray:
    """Every position of the runs (``starts[i]``, ``lengths[i]``), in order, as ``dtype``."""
    firsts = np.cumsum(lengths) - lengths  # index of each run's first position
    return np.repeat((starts - firsts).astype(dtype), lengths) + \
        np.arange(int(lengths.sum()), dtype=dtype)


def assemble(pieces: list[Piece], bases: list[int] | None = None) -> pa.RecordBatch:
    """One consumer batch (or span) from its pieces, piece i's positions
    counted from ``bases[i]`` (0 without bases); zero-copy when a single piece
    fills it in order, else built by the native library in one pass per
    column (cpp/icefloe/client/assemble.h), which checks every position."""
    if any(p.num_positions() != p.data.num_rows for p in pieces):
        raise InvalidArgument("a node sent a piece whose positions do not match its rows")
    first = pieces[0]
    if len(pieces) == 1 and not bases and _in_order(first):
        return _taken(first)
    schema = first.data.schema
    if any(not p.data.schema.equals(schema) for p in pieces):
        raise InvalidArgument("nodes sent pieces of one batch with different schemas")
    n = sum(p.data.num_rows for p in pieces)
    bases = bases or [0] * len(pieces)
    exported = _exported_schema(schema)
    out = _native.ArrowArray()
    code, message = _native.assemble(n, exported.address, _c_pieces(pieces, bases), out)
    if code == _native.OK:
        return pa.RecordBatch._import_from_c(ctypes.addressof(out), schema)
    if code != _native.UNSUPPORTED:
        raise _assemble_error(code, message, n)
    # A column the library does not build (a dictionary, say): the rows by a
    # take of the inverse, which the library fills before it gives up.
    inverse = np.empty(n, dtype=np.int64)
    _native.assemble(n, exported.address, _c_pieces(pieces, bases), out, inverse.ctypes.data)
    return pa.concat_batches([_taken(p) for p in pieces]).take(pa.array(inverse))


def _c_pieces(pieces: list[Piece], bases: list[int]) -> ctypes.Array:
    """The pieces as the library takes them, each one's record batch (its
    node's file, by reference) exported through the C Data Interface. The
    arrays the pointers name stay alive on the pieces."""
    # From the wire, the library counts on Arrow's basic checks: all of them
    # before any export, so that a refusal leaves no exported array unreleased.
    for p in pieces:
        if not isinstance(p.data, SourceRows):
            try:
                p.data.validate()
            except pa.ArrowInvalid as exc:
                raise InvalidArgument(f"a node sent a malformed piece: {exc}") from None
    c = (_native.AssemblePiece * len(pieces))()
    arrays = (_native.ArrowArray * len(pieces))()
    for k, (p, base) in enumerate(zip(pieces, bases, strict=True)):
        shared = p.data if isinstance(p.data, SourceRows) else None
        data = p.data if shared is None else shared.file
        data._export_to_c(ctypes.addressof(arrays[k]))
        piece = c[k]
        piece.batch = ctypes.addressof(arrays[k])
        if p.scattered is not None:
            p.scattered = np.ascontiguousarray(p.scattered, dtype="<u4")
            piece.positions = p.scattered.ctypes.data
        else:
            assert p.runs is not None
            p.runs = np.ascontiguousarray(p.runs, dtype="<u4")
            piece.runs, piece.num_runs = p.runs.ctypes.data, len(p.runs)
        piece.rows, piece.base = data.num_rows if shared is None else shared.num_rows, base
        if shared is not None:
            piece.source_runs, piece.num_source_runs = shared.source.ctypes.data, \
                len(shared.source)
    c._arrays = arrays  # type: ignore[attr-defined]  # alive as long as the pieces
    return c


# Schemas exported for the library (an epoch's batches share one), found by
# equality (hashing a schema costs more than exporting it): the last few.
_SCHEMAS: list[tuple[pa.Schema, _native.ExportedSchema]] = []
_MAX_SCHEMAS = 8
_SCHEMAS_LOCK = threading.Lock()


def _exported_schema(schema: pa.Schema) -> _native.ExportedSchema:
    with _SCHEMAS_LOCK:
        for known, exported in _SCHEMAS:
            if known.equals(schema, check_metadata=True):
                return exported
        exported = _native.ExportedSchema(schema)
        _SCHEMAS.insert(0, (schema, exported))
        del _SCHEMAS[_MAX_SCHEMAS:]
        return exported


_ASSEMBLE_ERRORS = {
    _native.OUTSIDE: "a node sent piece positions outside their batch",
    _native.TWICE: "a node sent two pieces for one position",
    _native.OUTSIDE_SOURCE: "a node named rows outside its shared file",
}


def _assemble_error(code: int, message: str, n: int) -> Exception:
    """What a result of the native assembly other than OK says."""
    if code == _native.NO_MEMORY:
        return MemoryError(f"no memory to assemble a batch of {n} rows")
    if code == _native.BAD_OFFSETS:
        return InvalidArgument(f"a node sent a piece with bad offsets: {message}")
    if code == _native.MALFORMED and message:
        return InvalidArgument(f"a node sent a malformed piece: {message}")
    return InvalidArgument(_ASSEMBLE_ERRORS.get(
        code, "a node sent a piece whose positions do not match its rows"))


def _taken(piece: Piece) -> pa.RecordBatch:
    """The piece's rows as a record batch, taken out of the node's file once
    when it holds them by reference."""
    if isinstance(piece.data, SourceRows):
        piece.data = piece.data.take()
    return piece.data


def _in_order(piece: Piece) -> bool:
    """Whether ``piece``'s rows fill positions 0, 1, ... in order (one run
    from 0, or positions exactly 0..n-1: a take of rows in one place)."""
    if piece.runs is not None:
        return len(piece.runs) == 1 and piece.runs[0][0] == 0
    s, n = piece.scattered, piece.data.num_rows
    if s is None or len(s) != n:
        return False
    # First and last in place, then (for more than 2) every step +1: two
    # scalar reads decide the one-row take, the hot case, without arrays.
    return n == 0 or (s[0] == 0 and s[-1] == n - 1 and (n <= 2 or bool(np.all(np.diff(s) == 1))))


def _put(q: queue.Queue, item: object, stop: threading.Event) -> bool:
    """Puts into a bounded queue, giving up once ``stop`` is set."""
    while not stop.is_set():
        try:
            q.put(item, timeout=0.1)
            return True
        except queue.Full:
            continue
    return False


class _Stream:
    """One endpoint's pieces, read on the merging thread. gRPC receives in the
    background up to its flow-control window, so no thread per endpoint is
    needed (one measured no faster and stalled a training loop more).

    ``open_reader`` returns ``(reader, node location)``. Errors name the
    dataset and the node; a connection that died is a :class:`StreamBroken`."""

    def __init__(self, open_reader: Callable[[], Any], dataset: str = "") -> None:
        self._open = open_reader
        self._dataset = dataset
        self._reader: Any = None
        self.location = ""
        self.head: Piece | Chunk | None = None
        self.done = False
        self.cancelled = False

    def open(self) -> None:
        # Raises icefloe errors (Client._endpoint_reader), StreamBroken when
        # every replica is gone.
        self._reader, self.location = self._open()
        if self.cancelled:
            self._reader.cancel()

    @property
    def by_reference(self) -> bool:
        """Whether the stream, opened, names rows in shared memory (a
        :class:`icefloe._shared.SharedReader`) rather than carrying them."""
        return bool(getattr(self._reader, "by_reference", False))

    def cancel(self) -> None:
        """From another thread: ends a read that may be blocked in gRPC."""
        self.cancelled = True
        reader = self._reader
        if reader is not None:
            reader.cancel()

    def peek(self) -> Piece | Chunk | None:
        """The next piece or chunk, or None at the end of the stream."""
        if self.head is None and not self.done:
            if self._reader is None:
                self.open()
            try:
                chunk = self._reader.read_chunk()
            except StopIteration:
                self.done = True
                return None
            except BaseException as exc:  # noqa: BLE001 - raised as icefloe errors
                self.done = True
                raise self._error(exc)  # noqa: B904 - the error chains the cause
            self.head = message_piece(chunk)
        return self.head

    def _error(self, exc: BaseException) -> BaseException:
        mapped = map_error(exc)
        if not isinstance(mapped, Error):
            return mapped
        nodes = [self.location] if self.location else []
        if is_break(mapped) and not self.cancelled:
            broken = StreamBroken(str(mapped), nodes=nodes, dataset=self._dataset)
            broken.__cause__ = mapped  # which chains the Flight error
            mapped = broken
        return named(mapped, self._dataset, nodes) if self._dataset else mapped

    def take(self) -> Piece | Chunk:
        piece, self.head = self.head, None
        assert piece is not None
        return piece

    def close(self) -> None:
        self.done = True
        if self._reader is not None:
            self._reader.cancel()


# (first batch) -> one reader opener per endpoint, from a fresh FlightInfo.
OpenStreams = Callable[[int], list[Callable[[], Any]]]
# (the break, the batch reached, the stop event) -> returns to retry, or raises.
Recover = Callable[[BaseException, int, threading.Event], None]


def merged_batches(open_streams: OpenStreams, num_batches: int, first: int = 0,
                   transform: Callable[[pa.RecordBatch], Any] | None = None,
                   prefetch: int = 0, *, dataset: str = "",
                   recover: Recover | None = None) -> Iterator[Any]:
    """Batches first..num_batches-1, assembled from the pieces of every
    reader ``open_streams(first)`` gives (each passed through ``transform``
    when given).

    When a stream breaks (its node died) and ``recover`` is given, the
    batches already yielded stay yielded, the partial batch is dropped, and
    after ``recover`` returns every endpoint is opened again from
    ``open_streams(b)``, b being the first batch not yet complete: nothing
    is lost or repeated. ``recover`` raises to give up.

    With ``prefetch`` > 0 a background thread reads, assembles and transforms
    up to ``prefetch`` messages' worth of batches (a chunk's batches are
    handed over together, one queue entry) before the consumer asks: the
    consumer's thread only takes finished batches off a queue, which keeps a
    training loop's step free of input work. Unless a stream comes over the
    wire: when every stream is by reference (its rows already in this
    process's memory, a batch a slice of them), handing a batch between two
    Python threads costs more than making it (at batch 4096: 118 against
    66 us a batch through a DataLoader), so the first batch's streams
    decide, on the caller's thread, and such an epoch runs without the thread.
    """
    stop = threading.Event()
    current: list[_Stream] = []  # the streams being read, for cancel()
    merged = _merge(open_streams, num_batches, first, dataset, recover, stop, current)
    groups = _groups(merged, transform)
    if prefetch > 0:
        try:
            opened = next(groups, None)  # opens the streams, here
        except BaseException:
            stop.set()
            merged.close()
            raise
        if opened is None:
            return
        if current and all(s.by_reference for s in current):
            prefetch = 0
        groups = itertools.chain([opened], groups)
    if prefetch <= 0:
        try:
            for group in groups:
                yield from group
        finally:
            stop.set()
            merged.close()
        return
    ready: queue.Queue = queue.Queue(maxsize=prefetch)

    def produce() -> None:
        try:
            for group in groups:
                if not _put(ready, group, stop):
                    return
            _put(ready, _DONE, stop)
        except BaseException as exc:  # noqa: BLE001 - handed to the consumer
            _put(ready, exc, stop)
        finally:
            merged.close()

    thread = threading.Thread(target=produce, name="icefloe-assemble", daemon=True)
    thread.start()
    try:
        while True:
            item = ready.get()
            if item is _DONE:
                return
            if isinstance(item, BaseException):
                raise item
            yield from item
    finally:
        # Leaving early: unblock the thread (it may wait on the network) and
        # wait for it, so no thread is left inside gRPC when the process
        # exits (which aborts it).
        stop.set()
        for s in list(current):
            s.cancel()
        thread.join(timeout=_JOIN_TIMEOUT_S)


def _groups(merged: Iterator[pa.RecordBatch | Chunk],
            transform: Callable[[pa.RecordBatch], Any] | None) -> Iterator[list[Any]]:
    """Lists of finished items: one per batch, a chunk's batches together."""
    for item in merged:
        if isinstance(item, Chunk):
            yield item.split(transform)
        else:
            yield [item if transform is None else transform(item)]


def _merge(open_streams: OpenStreams, num_batches: int, first: int, dataset: str,
           recover: Recover | None, stop: threading.Event,
           current: list[_Stream]) -> Iterator[pa.RecordBatch | Chunk]:
    """Batches (and chunks of whole batches) from ``first`` on, in order."""
    b = first
    while b < num_batches and not stop.is_set():
        streams = [_Stream(r, dataset) for r in open_streams(b)]
        current[:] = streams
        try:
            for s in streams:
                if stop.is_set():
                    s.cancelled = True
                s.open()  # every endpoint starts sending at once
            while b < num_batches:
                item = _collect(streams, b, num_batches)
                yield item
                b += item.count if isinstance(item, Chunk) else 1
        except StreamBroken as exc:
            if recover is None or stop.is_set():
                raise
            recover(exc, b, stop)  # waits, bounded, or raises
        finally:
            for s in streams:
                s.close()


def _collect(streams: list[_Stream], b: int, num_batches: int) -> pa.RecordBatch | Chunk:
    """Batch b from its pieces, the span of batches starting at b from the
    span pieces (and any single-batch pieces) for it, or the chunk of whole
    batches starting at b: streams send in batch order, so one pass takes all
    of it."""
    heads = [s.peek() for s in streams]
    for i, head in enumerate(heads):
        if isinstance(head, Chunk) and head.batch == b:
            return _whole(streams, streams[i].take(), num_batches)
    span = next((h for h in heads if isinstance(h, Piece) and h.batch == b and h.count > 1),
                None)
    end = b + (span.count if span is not None else 1)
    pieces: list[Piece] = []
    for s in streams:
        piece = s.peek()
        while isinstance(piece, Piece) and piece.batch < end:
            if piece.batch + piece.count > end or piece.batch < b:
                raise _changed(f"a node sent rows of batches {piece.batch}.."
                               f"{piece.batch + piece.count - 1} across batch {b}'s span")
            pieces.append(s.take())  # type: ignore[arg-type]
            piece = s.peek()
        if isinstance(piece, Chunk) and piece.batch < end:
            raise _changed(f"a node sent batches {piece.batch}.. whole inside batch {b}'s span")
    if span is None:
        return one_batch(pieces, b)
    return Chunk(b, span.batch_size, span.count, span.last_size,
                 assemble(pieces, _span_bases(pieces, span)))


def one_batch(pieces: list[Piece | Chunk], b: int) -> pa.RecordBatch:
    """Batch b from every piece of it (all of them, from every endpoint)."""
    if any(not isinstance(p, Piece) or p.batch != b or p.count != 1 for p in pieces):
        raise _changed(f"a node sent rows of other batches than batch {b}")
    rows = sum(p.data.num_rows for p in pieces)
    need = pieces[0].batch_size if pieces else None
    if need is None or rows != need:
        raise _changed(f"batch {b} is incomplete: {rows} of {need} rows arrived")
    return assemble(pieces)  # type: ignore[arg-type]


def _span_bases(pieces: list[Piece], span: Piece) -> list[int]:
    """Where each piece's positions start in ``span``'s (batch b + i's at
    i * batch_size), checking that every piece agrees with the span's shape
    and that the span's rows all arrived."""
    bases = []
    for p in pieces:
        i = p.batch - span.batch
        if p.count > 1:
            agrees = (p.count, p.batch_size, p.last_size) == \
                (span.count, span.batch_size, span.last_size)
        else:
            agrees = p.batch_size == (span.last_size if i == span.count - 1 else span.batch_size)
        if not agrees:
            raise _changed(f"nodes disagree on the shape of batches {span.batch}.."
                           f"{span.batch + span.count - 1}")
        bases.append(i * span.batch_size)
    rows = sum(p.data.num_rows for p in pieces)
    if rows != span.span_rows():
        raise _changed(f"batches {span.batch}..{span.batch + span.count - 1} are incomplete: "
                       f"{rows} of {span.span_rows()} rows arrived")
    return bases


def _changed(what: str) -> InvalidArgument:
    return InvalidArgument(
        f"{what}; the cluster changed under this epoch (was the dataset reloaded?)")


def _whole(streams: list[_Stream], chunk: Chunk, num_batches: int) -> Chunk:
    """``chunk``, once no stream sends anything else for its batches."""
    end = chunk.batch + chunk.count
    clash = end > num_batches or any(
        (head := s.peek()) is not None and head.batch < end for s in streams)
    if clash:
        raise InvalidArgument(
            f"a node sent batches {chunk.batch}..{end - 1} whole while another sent rows of "
            f"them (or the epoch has {num_batches} batches); the cluster changed under this "
            "epoch (was the dataset reloaded?)")
    return chunk
