"""Reading an epoch's streams into batches (docs/protocol.md, "Pieces").

Every record batch a node sends for a plan or row ticket is tagged with one
piece header (cpp/icefloe/protocol/piece.h): the batch, or span of
consecutive batches, its rows go to, and where. The client library's merge
(cpp/icefloe/client/merge.h) sees every stream's headers and says which
stream to read next and which messages make each batch, span or chunk, and
refuses streams that disagree; it also decides how rows a node left in its
shared file are read (a zero-copy slice of the file, or assembled from it).
A piece's rows fill the positions its runs or positions name, put there by
the library's assembly; *whole* batches travel as one *chunk* (``Chunk``),
split here zero-copy, or turned into tensors at once and split
(:class:`ChunkTransform`). Every batch of a chunk is complete when it
arrives, so a failover resumes after the chunk exactly as after a batch.
"""

from __future__ import annotations

import collections
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
from ._failover import is_break, named
from .errors import Error, InvalidArgument, StreamBroken, map_error

_DONE = object()
_JOIN_TIMEOUT_S = 10.0


class Rows:
    """A take's rows this process took itself (from a node's shared file it
    keeps): ``data`` goes to ``positions`` (u32, C-contiguous) of a batch of
    ``batch_size``; merged with the nodes' messages as one more stream's."""

    __slots__ = ("data", "batch_size", "positions")

    def __init__(self, data: pa.RecordBatch, batch_size: int, positions: np.ndarray) -> None:
        self.data = data
        self.batch_size = batch_size
        self.positions = np.ascontiguousarray(positions, dtype=np.uint32)


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
        return apply_many(transform, self.data, self.sizes(), self.offsets)


class ChunkTransform:
    """A per-batch transform (``one``) that can also turn several whole
    batches at once: ``many(record_batch, sizes)`` returns one item per
    batch, equal to ``one`` of each consecutive ``sizes[k]``-row slice, in
    order, but cheaper (e.g. one conversion to tensors, then views), and
    ``many(record_batch, sizes, offsets)`` the same of the slices at rows
    ``offsets[k]`` (a rank's batches in a span of a node's shared file). Any
    transform with such a ``many`` attribute is used this way (icefloe.torch's
    ``batch_to_tensors`` has one)."""

    def __init__(self, one: Callable[[pa.RecordBatch], Any],
                 many: Callable[[pa.RecordBatch, list[int], list[int] | None], list[Any]]
                 ) -> None:
        self.one = one
        self.many = many

    def __call__(self, batch: pa.RecordBatch) -> Any:
        return self.one(batch)


def starts(sizes: list[int], offsets: list[int] | None) -> list[int]:
    """Each batch's first row: ``offsets``, or, None, the batches' one after another."""
    return offsets if offsets is not None else list(itertools.accumulate(sizes[:-1], initial=0))


def apply_many(transform: Callable[[pa.RecordBatch], Any] | None, data: pa.RecordBatch,
               sizes: list[int], offsets: list[int] | None = None) -> list[Any]:
    """``transform`` of each ``sizes[k]``-row slice of ``data``, one after
    another or at row ``offsets[k]`` (the slices themselves without a
    transform), through its ``many`` when it has one."""
    many = getattr(transform, "many", None)
    if many is not None:
        return many(data, sizes) if offsets is None else many(data, sizes, offsets)
    at = zip(starts(sizes, offsets), sizes, strict=True)
    batches = [data.slice(o, n) for o, n in at]
    return batches if transform is None else [transform(b) for b in batches]


def _buffer(metadata: Any) -> pa.Buffer:
    if metadata is None:
        raise InvalidArgument("a node sent a batch without piece metadata")
    return metadata if isinstance(metadata, pa.Buffer) else pa.py_buffer(metadata)


def _push(merger: _native.Merger, k: int, message: Any) -> None:
    """Hands stream ``k``'s message to ``merger``: a FlightStreamChunk (rows
    carried, header in its app_metadata), a :class:`icefloe._shared.SharedReader`'s
    (its ``rows`` in the node's file, its ``data``), or :class:`Rows`. The
    merger reads the header's runs or positions where they are until the
    batch is assembled: the caller keeps the message until then."""
    if type(message) is Rows:
        merger.push_rows(k, 0, message.batch_size, message.positions)
        return
    metadata = message.app_metadata
    buffer = metadata if type(metadata) is pa.Buffer else _buffer(metadata)
    if getattr(message, "holds", _native.ROWS_CARRIED) == _native.ROWS_CARRIED:
        merger.push(k, buffer.address, buffer.size, message.data.num_rows)
    else:
        merger.push(k, buffer.address, buffer.size, message.rows, _native.ROWS_IN_FILE,
                    message.data.num_rows)


def merge_steps(merger: _native.Merger, streams: int,
                read: Callable[[int], Any]) -> Iterator[pa.RecordBatch | Chunk]:
    """The batches (and chunks) ``merger`` makes of the messages ``read(k)``
    returns for stream k of ``streams`` (None at its end), in order."""
    held = [collections.deque() for _ in range(streams)]  # each stream's messages, pushed
    step = merger.next()
    while (kind := step.kind) != _native.MERGE_DONE:
        if kind == _native.MERGE_NEED:  # the push (or end) sets the next step
            k = step.stream
            message = read(k)
            if message is None:
                merger.end(k)
            else:
                held[k].append(message)
                _push(merger, k, message)
            continue
        if kind == _native.MERGE_CHUNK:
            offsets = step.offsets[:step.count] if step.offsets else None
            data = held[step.stream].popleft().data
            yield Chunk(step.batch, step.batch_size, step.count, step.last_size,
                        data.slice(step.start, step.rows) if step.in_file else data, offsets)
        else:
            batch, count, batch_size, last_size = \
                step.batch, step.count, step.batch_size, step.last_size
            messages = [held[k].popleft() for k in step.streams[:step.num_pieces]]
            if step.in_order:  # the one piece's rows as they are
                data = messages[0].data
                if step.in_file:
                    data = data.slice(step.start, step.rows)
            else:
                data = _assembled(merger, messages)
            yield data if count == 1 else Chunk(batch, batch_size, count, last_size, data)
        merger.next()


def take_batch(sources: list[list[Any]]) -> pa.RecordBatch:
    """A take's rows, from every source's messages (or :class:`Rows`): one
    batch, checked and assembled as an epoch's."""
    merger = _native.Merger(len(sources), 0, 1, copy=True)  # the rows are the caller's
    feeds = [iter(s) for s in sources]
    return next(merge_steps(merger, len(sources), lambda k: next(feeds[k], None)))  # type: ignore[return-value]


def _in_file(message: Any) -> bool:
    return getattr(message, "holds", _native.ROWS_CARRIED) == _native.ROWS_IN_FILE


def _assembled(merger: _native.Merger, messages: list[Any]) -> pa.RecordBatch:
    """The batch (or span) of ``merger``'s last step, from its pieces' rows
    (in the messages, or in a node's file): built by the native library in
    one pass per column (cpp/icefloe/client/assemble.h), which checks every
    position and source row."""
    pieces = [m.data for m in messages]
    schema = pieces[0].schema
    if any(not p.schema.equals(schema) for p in pieces):
        raise InvalidArgument("nodes sent pieces of one batch with different schemas")
    # From the wire, the library counts on Arrow's basic checks.
    for m in messages:
        if not _in_file(m):
            try:
                m.data.validate()
            except pa.ArrowInvalid as exc:
                raise InvalidArgument(f"a node sent a malformed piece: {exc}") from None
    exported = _exported_schema(schema)
    out = _native.ArrowArray()
    code, message = merger.assemble(exported.address, _exported(pieces), out)
    if code == _native.OK:
        return pa.RecordBatch._import_from_c(ctypes.addressof(out), schema)
    if code != _native.UNSUPPORTED:  # the library's words
        raise (MemoryError if code == _native.NO_MEMORY else InvalidArgument)(message)
    rows = [m.rows if _in_file(m) else m.data.num_rows for m in messages]
    # A column the library does not build (a dictionary, say): the rows by a
    # take of the inverse, which the library fills before it gives up.
    inverse = np.empty(sum(rows), dtype=np.int64)
    merger.assemble(exported.address, _exported(pieces), out, inverse.ctypes.data)
    taken = [m.data.take(pa.array(merger.piece_rows(k, n))) if _in_file(m) else m.data
             for k, (m, n) in enumerate(zip(messages, rows, strict=True))]
    return pa.concat_batches(taken).take(pa.array(inverse))


def _exported(pieces: list[pa.RecordBatch]) -> ctypes.Array:
    """Each piece's rows (its node's file, by reference) exported through the
    C Data Interface, for the library to consume."""
    arrays = (_native.ArrowArray * len(pieces))()
    for k, p in enumerate(pieces):
        p._export_to_c(ctypes.addressof(arrays[k]))
    return arrays


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

    def read(self) -> Any:
        """The stream's next message, or None at its end."""
        if self.done:
            return None
        if self._reader is None:
            self.open()
        try:
            return self._reader.read_chunk()
        except StopIteration:
            self.done = True
            return None
        except BaseException as exc:  # noqa: BLE001 - raised as icefloe errors
            self.done = True
            raise self._error(exc)  # noqa: B904 - the error chains the cause

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
            merger = _native.Merger(len(streams), b, num_batches)
            for item in merge_steps(merger, len(streams), lambda k, s=streams: s[k].read()):
                yield item
                b += item.count if isinstance(item, Chunk) else 1
        except StreamBroken as exc:
            if recover is None or stop.is_set():
                raise
            recover(exc, b, stop)  # waits, bounded, or raises
        finally:
            for s in streams:
                s.close()
