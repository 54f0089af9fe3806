"""Reading an epoch's streams into batches (docs/protocol.md, "Pieces").

Each message a node sends carries a piece header (protocol/piece.h). The
client library's merge (client/merge.h) reads them all: which stream to read
next, which messages make each batch or span of batches, how rows left in a
node's shared file are read; its assembly puts the rows in place. Here the
streams are read, a span's batches split zero-copy (or turned into tensors
at once by a batch conversion's ``many``, :func:`apply_many`), and broken streams resumed
after the last whole batch. The batch conversion (``convert`` here) is the callable
``Client.iter_epoch(transform=)`` takes; the word transform is kept for the load spec
(ARCHITECTURE.md, glossary).
"""

from __future__ import annotations

import collections
import ctypes
import itertools
import queue
import threading
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

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


class Span(NamedTuple):
    """Batches in ``data``'s rows, of ``sizes[k]`` rows each, one after
    another or (a rank's batches in a span of a node's file) at ``offsets[k]``."""

    data: pa.RecordBatch
    sizes: list[int]
    offsets: list[int] | None = None

    def split(self, convert: Callable[[pa.RecordBatch], Any] | None) -> list[Any]:
        """One item per batch: the batch (a zero-copy slice), or what
        ``convert`` makes of it (its ``many`` at once when it has one)."""
        if len(self.sizes) == 1 and self.offsets is None:
            return [self.data if convert is None else convert(self.data)]
        return apply_many(convert, self.data, self.sizes, self.offsets)


def starts(sizes: list[int], offsets: list[int] | None) -> list[int]:
    """Each batch's first row: ``offsets``, or, None, the batches' one after another."""
    return offsets if offsets is not None else list(itertools.accumulate(sizes[:-1], initial=0))


def apply_many(convert: Callable[[pa.RecordBatch], Any] | None, data: pa.RecordBatch,
               sizes: list[int], offsets: list[int] | None = None) -> list[Any]:
    """``convert`` of each ``sizes[k]``-row slice of ``data``, one after
    another or at row ``offsets[k]`` (the slices themselves without a
    conversion), through its ``many`` when it has one: ``many(data, sizes)``
    or ``many(data, sizes, offsets)``, one item per batch, equal to the
    conversion of each (icefloe.torch's ``batch_to_tensors`` has one)."""
    many = getattr(convert, "many", None)
    if many is not None:
        return many(data, sizes) if offsets is None else many(data, sizes, offsets)
    at = zip(starts(sizes, offsets), sizes, strict=True)
    batches = [data.slice(o, n) for o, n in at]
    return batches if convert is None else [convert(b) for b in batches]


def _in_file(message: Any) -> bool:
    return getattr(message, "holds", _native.ROWS_CARRIED) == _native.ROWS_IN_FILE


def _push(merger: _native.Merger, k: int, message: Any) -> None:
    """Hands stream ``k``'s message to ``merger``: a FlightStreamChunk (rows
    carried, header in its app_metadata), a message by reference (its
    ``rows`` in ``data``, a segment of the node's file, or in its ``file``,
    the whole file, where they cross segments) or :class:`Rows` (carried).
    The merger reads the header where it is until the batch is assembled:
    the caller keeps the message until then."""
    if type(message) is Rows:
        merger.push_rows(k, message.batch_size, message.positions)
        return
    metadata = message.app_metadata
    if metadata is None:
        raise InvalidArgument("a node sent a batch without piece metadata")
    buffer = metadata if type(metadata) is pa.Buffer else pa.py_buffer(metadata)
    if _in_file(message):
        file = getattr(message, "file", None)
        if file is not None:
            merger.push_file(k, buffer.address, buffer.size, message.rows, file)
            return
        merger.push(k, buffer.address, buffer.size, message.rows, _native.ROWS_IN_FILE,
                    message.data.num_rows)
    else:
        merger.push(k, buffer.address, buffer.size, message.data.num_rows)


def merge_steps(merger: _native.Merger, streams: int,
                read: Callable[[int], Any]) -> Iterator[Span]:
    """The batches (one, or several in a :class:`Span`) ``merger`` makes of
    the messages ``read(k)`` returns for stream k of ``streams`` (None at its
    end), in order."""
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
        count = step.count
        sizes = [step.batch_size] * (count - 1) + [step.last_size]
        offsets = step.offsets[:count] if kind == _native.MERGE_CHUNK and step.offsets else None
        if kind == _native.MERGE_CHUNK:
            data = held[step.stream].popleft().data
        else:
            messages = [held[k].popleft() for k in step.streams[:step.num_pieces]]
            data = messages[0].data if step.in_order else _assembled(merger, messages)
        yield Span(data.slice(step.start, step.rows) if step.in_file else data, sizes, offsets)
        merger.next()


def take_batch(sources: list[list[Any]]) -> pa.RecordBatch:
    """A take's rows, from every source's messages (or :class:`Rows`): one
    batch, checked and assembled as an epoch's."""
    merger = _native.Merger(len(sources), 0, 1, copy=True)  # the rows are the caller's
    feeds = [iter(s) for s in sources]
    return next(merge_steps(merger, len(sources), lambda k: next(feeds[k], None))).data


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
    exported = _native.exported_schema(schema)
    out = _native.ArrowArray()
    code, message = merger.assemble(exported, _exported(messages), out)
    if code == _native.OK:
        return pa.RecordBatch._import_from_c(ctypes.addressof(out), schema)
    if code != _native.UNSUPPORTED:  # the library's words
        raise (MemoryError if code == _native.NO_MEMORY else InvalidArgument)(message)
    rows = [m.rows if _in_file(m) else m.data.num_rows for m in messages]
    # A column the library does not build (a dictionary, say): the rows by a
    # take of the inverse, which the library fills before it gives up.
    inverse = np.empty(sum(rows), dtype=np.int64)
    merger.assemble(exported, _exported(messages), out, inverse.ctypes.data)
    taken = [m.data.take(pa.array(merger.piece_rows(k, n))) if _in_file(m) else m.data
             for k, (m, n) in enumerate(zip(messages, rows, strict=True))]
    return pa.concat_batches(taken).take(pa.array(inverse))


def _exported(messages: list[Any]) -> ctypes.Array:
    """Each message's rows (its segment of the node's file, by reference)
    exported through the C Data Interface, for the library to consume; none
    for a message whose rows are in a whole file (the library holds it)."""
    arrays = (_native.ArrowArray * len(messages))()
    for k, m in enumerate(messages):
        if getattr(m, "file", None) is None:
            m.data._export_to_c(ctypes.addressof(arrays[k]))
    return arrays


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
    """One endpoint's pieces, read on the merging thread (gRPC receives in the
    background up to its flow-control window; a thread per endpoint measured
    no faster). ``open_reader`` returns ``(reader, node location)``. Errors
    name the dataset and the node; a connection that died is a
    :class:`StreamBroken`."""

    def __init__(self, open_reader: Callable[[], Any], dataset: str = "") -> None:
        self._open = open_reader
        self._dataset = dataset
        self.reader: Any = None
        self.location = ""
        self.done = self.cancelled = False

    def open(self) -> None:
        # Raises icefloe errors (Client._endpoint_reader), StreamBroken when
        # every replica is gone.
        self.reader, self.location = self._open()
        if self.cancelled:
            self.reader.cancel()

    def cancel(self) -> None:
        """From another thread: ends a read that may be blocked in gRPC."""
        self.cancelled = True
        if self.reader is not None:
            self.reader.cancel()

    def read(self) -> Any:
        """The stream's next message, or None at its end."""
        if self.done:
            return None
        try:
            return self.reader.read_chunk()
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
        if self.reader is not None:
            self.reader.cancel()


# (first batch) -> one reader opener per endpoint, from a fresh FlightInfo.
OpenStreams = Callable[[int], list[Callable[[], Any]]]
# (the break, the batch reached, the stop event) -> returns to retry, or raises.
Recover = Callable[[BaseException, int, threading.Event], None]


def merged_batches(open_streams: OpenStreams, num_batches: int, first: int = 0,
                   convert: Callable[[pa.RecordBatch], Any] | None = None,
                   prefetch: int = 0, *, dataset: str = "",
                   recover: Recover | None = None) -> Iterator[Any]:
    """Batches first..num_batches-1 of the streams ``open_streams(first)``
    opens (each through ``convert`` when given).

    When a stream breaks and ``recover`` is given (it raises to give up),
    the batches yielded stay yielded, the partial one is dropped, and every
    endpoint is opened again from ``open_streams(b)``, b the first batch not
    yet complete: nothing is lost or repeated.

    With ``prefetch`` > 0 a thread reads, assembles and converts up to
    ``prefetch`` messages' worth of batches ahead, so a training loop's step
    only takes finished ones off a queue; unless every stream of the first
    batch is by reference, whose batches cost less to make than to hand
    between threads (at batch 4096: 66 against 118 us through a DataLoader).
    """
    stop = threading.Event()
    current: list[_Stream] = []  # the streams being read, for cancel()
    merged = _merge(open_streams, num_batches, first, dataset, recover, stop, current)
    groups = (span.split(convert) for span in merged)  # a span's batches together
    if prefetch > 0:
        try:
            opened = next(groups, None)  # opens the streams, here
        except BaseException:
            stop.set()
            merged.close()
            raise
        if opened is None:
            return
        if current and all(getattr(s.reader, "by_reference", False) for s in current):
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
        while (item := ready.get()) is not _DONE:
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


def _merge(open_streams: OpenStreams, num_batches: int, first: int, dataset: str,
           recover: Recover | None, stop: threading.Event,
           current: list[_Stream]) -> Iterator[Span]:
    """Batches from ``first`` on, in order."""
    b = first
    while b < num_batches and not stop.is_set():
        streams = [_Stream(r, dataset) for r in open_streams(b)]
        current[:] = streams
        try:
            for s in streams:
                s.cancelled = stop.is_set()
                s.open()  # every endpoint starts sending at once
            merger = _native.Merger(len(streams), b, num_batches)
            for span in merge_steps(merger, len(streams), lambda k, s=streams: s[k].read()):
                yield span
                b += len(span.sizes)
        except StreamBroken as exc:
            if recover is None or stop.is_set():
                raise
            recover(exc, b, stop)  # waits, bounded, or raises
        finally:
            for s in streams:
                s.close()
