"""Reading a node's rows from shared memory (docs/protocol.md, "Shared memory").

A node started with ``--share-memory`` holds each copy as segments, each an
Arrow IPC file of one record batch in a sealed memfd (a refresh reuses the
segments of the tasks it keeps), or, for rows on its disk tier, one record
batch (or rows of one) of a tier file, an Arrow IPC file of many batches that
the node holds open read-only (its inode and size are checked like a memfd's,
so a replaced file is refused; its CRC-32 is not: that would read every byte
of it, and nothing but the node writes its --disk-dir). Asked by reference (DoGet header
``icefloe-shared``), it names the file's segments in the stream's schema
("shared file") and each piece's header names its rows in the file (the
segments laid end to end) instead of carrying them. The reader maps each
``/proc/<pid>/fd/<fd>`` private and copy-on-write (what a training loop writes
into its zero-copy tensors stays in its own pages; the rows outlive the node's
copy until the last view goes) and hands the merge each piece with the
segment that holds its rows, its source runs counted from the segment's first
row, or, where they cross segments (a window span's rows of a copy on the
tier), with the whole file, its segments' batches exported to the native
library once (:data:`FILES`); the merge decides how the rows are read. A range
read's messages are slices of the segments, in order
(:meth:`SharedReader.read_range`).
"""

from __future__ import annotations

import bisect
import collections
import collections.abc
import mmap
import os
import struct
import threading
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from . import _native, _protocol
from .errors import InvalidArgument, ProtocolError

# Version 3: this reader takes a piece whose rows cross segments whole and
# assembles it from the whole file in one call (SharedReader.read_chunk), so
# nodes answer window epochs over tier rows by reference too; a node cuts
# pieces at segments for version 1 readers.
HEADER = (b"icefloe-shared", b"3")
_KEY = b"icefloe.shared"  # the stream's schema metadata: a "shared file" message


class Unshareable(Exception):
    """The stream names a file this process cannot map (another host or pid
    namespace, another user): read the endpoint over the wire instead."""


def _map(pid: int, fd: int, inode: int, size: int,
         writable: bool = True) -> tuple[str, mmap.mmap]:
    """A node's file ``/proc/<pid>/fd/<fd>``, checked to be the one named
    and mapped private (copy-on-write, or read-only): its path and mapping."""
    path = f"/proc/{pid}/fd/{fd}"
    try:
        handle = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError as exc:
        raise Unshareable(f"cannot open {path}: {exc}") from exc
    try:
        st = os.fstat(handle)
        if st.st_ino != inode or st.st_size != size:
            raise Unshareable(f"{path} is not the node's file (inode {st.st_ino}, "
                              f"{st.st_size} bytes; expected {inode}, {size})")
        view = mmap.mmap(handle, size, flags=mmap.MAP_PRIVATE,
                         prot=mmap.PROT_READ | (mmap.PROT_WRITE if writable else 0))
    finally:
        os.close(handle)
    return path, view


def _segment_batch(path: str, reader: Any, where: tuple[int, int, int] | None) -> pa.RecordBatch:
    """A segment's rows in its mapped file: the file's one record batch
    (``where`` None: a memory segment), or rows ``[first, first + rows)`` of
    record batch ``batch`` of a tier file (``where``: (batch, first, rows))."""
    count = reader.num_record_batches
    if where is None:
        if count != 1:  # nodes write each memory segment as one batch
            raise InvalidArgument(f"{path}: a node's shared file holds {count} record "
                                  "batches, not 1")
        return reader.get_batch(0)
    batch, first, rows = where
    if batch >= count:
        raise ProtocolError(f"{path}: a node named record batch {batch} of a file of {count}")
    whole = reader.get_batch(batch)
    if rows == 0 or first + rows > whole.num_rows:
        raise ProtocolError(f"{path}: a node named rows [{first}, {first + rows}) of record "
                            f"batch {batch}, which has {whole.num_rows}")
    return whole if (first, rows) == (0, whole.num_rows) else whole.slice(first, rows)


class _Lazy(collections.abc.Sequence):
    """A list whose items are made on first use (``make(k)``) and kept."""

    def __init__(self, n: int, make: Any) -> None:
        self._items: list[Any] = [None] * n
        self._make = make

    def __len__(self) -> int:
        return len(self._items)

    def __getitem__(self, k: Any) -> Any:
        item = self._items[k]  # an IndexError ends iteration
        if item is None:
            item = self._items[k] = self._make(k)
        return item


class Export:
    """One node's shared file, its segments mapped (private, copy-on-write)
    for one stream and read as record batches, zero-copy: the file's rows
    are its segments' laid end to end. ``dataset``, ``generation`` and
    ``held`` (the global rows the file holds, in its order, as (start, stop)
    ranges) say which rows it is, for takes from it later (:meth:`take`)."""

    dataset = ""
    generation = -1
    held: tuple[tuple[int, int], ...] = ()
    _SMALL_TAKE = 16  # rows up to which a take copies row slices (a take kernel costs ~70 us)

    def __init__(self, pid: int, fd: int, inode: int, size: int,
                 segments: tuple[tuple[int, int, int], ...] = (),
                 batches: tuple[tuple[int, int, int], ...] = (), writable: bool = True) -> None:
        files = ((fd, inode, size), *segments)
        if batches and len(batches) != len(files):
            raise ProtocolError(f"a node named {len(batches)} segments' batches for a shared "
                                f"file of {len(files)} segments")
        # A tier file holds many segments' rows: each file is mapped once,
        # and its IPC footer and each segment's record batch are read when
        # first needed (a stream whose pieces the library assembles from a
        # kept file, FILES, reads few of them).
        opened: dict[tuple[int, int, int], tuple[str, mmap.mmap]] = {}
        for f in files:
            if f not in opened:
                opened[f] = _map(pid, *f, writable=writable)
        self._paths = [(opened[f][0], f[1]) for f in files]
        self._views = [view for _, view in opened.values()]
        readers: dict[tuple[int, int, int], Any] = {}

        def segment(i: int) -> pa.RecordBatch:
            f = files[i]
            path, view = opened[f]
            if f not in readers:
                readers[f] = pa.ipc.open_file(pa.py_buffer(view))
            return _segment_batch(path, readers[f], batches[i] if batches else None)

        self.batches: _Lazy = _Lazy(len(files), segment)
        # The node names each segment's rows where any is in a tier file.
        sizes = [rows for _, _, rows in batches] if batches else \
            [b.num_rows for b in self.batches]
        self.starts = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        self._start_list = self.starts.tolist()
        self.num_rows = int(self.starts[-1])
        self._index = np.int32 if self.num_rows < 2**31 else np.int64  # take indices
        self._projected: dict[tuple[int, ...], _Lazy] = {(): self.batches}

    @property
    def batch(self) -> pa.RecordBatch:
        """The first segment's record batch."""
        return self.batches[0]

    def prefault(self) -> None:
        """Maps every page of the file into this process now (one read per
        page: the kernel maps its neighbours too), so that takes of random
        rows later do not pay a page fault per row and column."""
        for view in self._views:
            np.frombuffer(view, dtype=np.uint8)[::mmap.PAGESIZE].max(initial=0)

    def alive(self) -> bool:
        """Whether the node still holds this file (a stat per segment: it has
        not died or dropped every copy that holds one)."""
        try:
            return all(os.stat(path).st_ino == inode for path, inode in set(self._paths))
        except OSError:
            return False

    def name_rows(self, dataset: str, generation: int,
                  held: tuple[tuple[int, int], ...]) -> None:
        """Which copy's global rows the file holds, in its order (the node's word)."""
        self.dataset, self.generation, self.held = dataset, generation, held
        self._held_start_list = [a for a, _ in held]
        self._held_starts = np.array(self._held_start_list, dtype=np.int64)
        self._held_stops = np.array([z for _, z in held], dtype=np.int64)
        sizes = self._held_stops - self._held_starts
        self._held_bases = np.cumsum(sizes) - sizes  # file row of each range's start

    def local_rows(self, ids: np.ndarray) -> np.ndarray | None:
        """The file's rows of global ``ids``, or None unless it holds them all."""
        if not self.held:
            return None
        starts, stops = self._held_starts, self._held_stops
        if len(ids) == 1:  # the one-row take: no array work
            row = int(ids[0])
            i = bisect.bisect_right(self._held_start_list, row) - 1
            if i < 0 or not starts[i] <= row < stops[i]:
                return None
            return np.array([int(self._held_bases[i]) + row - int(starts[i])])
        where = np.searchsorted(starts, ids, side="right") - 1
        if len(ids) and (int(where.min()) < 0 or bool(np.any(ids >= stops[where]))):
            return None
        return self._held_bases[where] + (ids - starts[where])

    def take(self, rows: np.ndarray, columns: list[str] | None) -> pa.RecordBatch:
        """The file's ``rows`` (as :meth:`local_rows` gives them), copied (a
        take's rows are the caller's to write into: the mapping is kept for
        later takes), with ``columns`` (names; None: all)."""
        names = self.batch.schema.names
        batches = self.view(() if columns is None else tuple(names.index(c) for c in columns))
        if len(batches) == 1:
            return self._take(batches[0], rows)
        segment = np.searchsorted(self.starts, rows, side="right") - 1
        order = np.argsort(segment, kind="stable")
        parts = []
        for k in np.unique(segment).tolist():
            mine = rows[order[segment[order] == k]] - self.starts[k]
            parts.append(self._take(batches[k], mine))
        if len(parts) == 1:
            return parts[0]
        grouped = pa.concat_batches(parts)  # rows by segment; put back in order
        return grouped.take(pa.array(np.argsort(order, kind="stable").astype(self._index)))

    def _take(self, batch: pa.RecordBatch, rows: np.ndarray) -> pa.RecordBatch:
        if 0 < len(rows) <= self._SMALL_TAKE:  # a copy of row slices
            return pa.concat_batches([batch.slice(r, 1) for r in rows.tolist()])
        return pc.take(batch, pa.array(rows.astype(self._index, copy=False)), boundscheck=False)

    def view(self, columns: tuple[int, ...]) -> _Lazy:
        """Each segment's batch with ``columns`` (indices; empty: all), kept."""
        got = self._projected.get(columns)
        if got is None:
            batches, picked = self.batches, list(columns)
            got = self._projected[columns] = _Lazy(len(batches),
                                                   lambda k: batches[k].select(picked))
        return got

    def segment_of(self, row: int) -> int:
        """The segment holding the file's row ``row``."""
        return bisect.bisect_right(self._start_list, row) - 1


class _Files:
    """The files a piece across segments is assembled from, kept between
    streams: each a node's shared file mapped read-only (nothing of it is
    ever handed out: the assembly copies its rows) and its segments exported
    to the native library (:class:`_native.File`). A window epoch over a copy
    on the tier reads from every page of it; a new mapping per stream cost
    each stream a page fault per 64 KiB and the export of every segment
    again. At most ``_MAX`` files (the least recently used go first, and, at
    the next :meth:`get`, any the node no longer holds: :meth:`Export.alive`),
    by the node's process, the file's segments and the projection."""

    _MAX = 4

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: collections.OrderedDict[tuple, tuple[Export, _native.File]] = \
            collections.OrderedDict()

    def get(self, key: tuple, columns: tuple[int, ...]) -> _native.File:
        """The file of ``key`` (the node's pid, its first segment's (fd,
        inode, size), the others', their batches) with ``columns``."""
        with self._lock:
            held = self._held.pop((key, columns), None)
            if held is not None and held[0].alive():
                self._held[(key, columns)] = held
                return held[1]
            for k in [k for k, (export, _) in self._held.items() if not export.alive()]:
                del self._held[k]
        pid, first, segments, batches = key
        export = Export(pid, *first, segments, batches, writable=False)
        file = _native.File(export.view(columns))
        with self._lock:
            self._held[(key, columns)] = (export, file)
            while len(self._held) > self._MAX:
                self._held.popitem(last=False)
        return file

    def clear(self) -> None:
        with self._lock:
            self._held.clear()  # unmapped once no batch refers to them


FILES = _Files()

_RUN = np.dtype([("start", "<u8"), ("length", "<u4")])  # a source run (docs/protocol.md)
_HEADER_BYTES = 36  # a piece header's fixed part


class _Chunk:
    """What ``FlightStreamReader.read_chunk`` returns, for pieces by reference:
    the node's file's segment that holds its rows (``data``, projected), the
    piece's metadata (source runs counted from that segment's first row), and
    the rows it holds there (``rows``), which its header's source runs name."""

    __slots__ = ("data", "app_metadata", "rows")
    holds = _native.ROWS_IN_FILE  # how the merge reads them
    file = None

    def __init__(self, data: pa.RecordBatch, app_metadata: Any, rows: int) -> None:
        self.data = data
        self.app_metadata = app_metadata
        self.rows = rows


class _FileChunk:
    """A piece by reference whose rows lie in several segments of the node's
    file (a window span's rows of a copy on the disk tier: its units are
    segments of their own): ``data`` and ``file`` are the whole file, its
    segments laid end to end (:class:`_native.File`, exported once and kept:
    :data:`FILES`), and the piece's source runs count from its first row. The
    merge assembles it in one call, however many segments it crosses."""

    __slots__ = ("data", "app_metadata", "rows")
    holds = _native.ROWS_IN_FILE

    def __init__(self, data: _native.File, app_metadata: Any, rows: int) -> None:
        self.data = data  # the whole file, segments laid end to end
        self.app_metadata = app_metadata
        self.rows = rows

    @property
    def file(self) -> _native.File:
        return self.data


class SharedReader:
    """A plan stream by reference, read like the stream it stands for:
    ``read_chunk`` returns each piece with the node's segment its rows are
    in, or the whole file where they cross segments."""

    by_reference = True  # what merged_batches asks a stream

    def __init__(self, reader: Any, export: Export, columns: tuple[int, ...],
                 key: tuple | None = None) -> None:
        self._reader = reader
        self.export = export
        self._columns = columns
        self._files = export.view(columns)
        self._key = key  # the file's, for FILES (None: this stream's own mapping)
        self._file: _native.File | None = None  # the segments for the library, once needed

    def read_chunk(self) -> _Chunk | _FileChunk:
        chunk = self._reader.read_chunk()
        metadata = chunk.app_metadata
        rows = chunk.data.num_rows
        if len(self._files) == 1 or metadata is None:
            return _Chunk(self._files[0], metadata, rows)
        segment, metadata = self._in_segment(metadata)
        if segment >= 0:
            return _Chunk(self._files[segment], metadata, rows)
        if self._file is None:
            try:
                self._file = None if self._key is None else FILES.get(self._key, self._columns)
            except Unshareable:  # let go since this stream mapped it: its own mapping
                pass
            self._file = self._file or _native.File(self._files)
        return _FileChunk(self._file, metadata, rows)

    def _in_segment(self, metadata: Any) -> tuple[int, Any]:
        """The segment that holds all of a piece's rows and its header with
        the source runs counted from that segment's first row; or -1 and the
        header as it is where they cross segments (the version 2 reader's
        part, docs/protocol.md "Shared memory": the library assembles it from
        the whole file). A header the merge will refuse anyway (too short,
        runs that do not add up, rows outside the file) goes as it is, in
        segment 0."""
        raw = bytes(metadata)
        if len(raw) < _HEADER_BYTES:
            return 0, metadata
        flags = raw[5]
        entries, sources = struct.unpack_from("<II", raw, 28)
        at = _HEADER_BYTES + entries * (4 if flags & 1 else 8)
        if sources == 0 or len(raw) != at + 12 * sources:
            return 0, metadata
        runs = np.frombuffer(raw, dtype=_RUN, count=sources, offset=at)
        starts = runs["start"].astype(np.int64)
        lengths = runs["length"].astype(np.int64)
        ends = starts + lengths
        bounds = self.export.starts
        if int(starts.min()) < 0 or int(lengths.min()) == 0 or \
                int(ends.max()) > self.export.num_rows:
            return 0, metadata
        first = np.searchsorted(bounds, starts, side="right") - 1
        last = np.searchsorted(bounds, ends - 1, side="right") - 1
        if int(first[0]) == int(last.max()) == int(first.min()):  # one segment: rebase
            base = int(bounds[first[0]])
            if base == 0:
                return int(first[0]), metadata
            moved = runs.copy()
            moved["start"] -= np.uint64(base)
            return int(first[0]), pa.py_buffer(raw[:at] + moved.tobytes())
        if flags & 2:  # whole batches in order: a node never cuts one across segments
            raise ProtocolError("a node sent a chunk by reference whose rows lie in more than "
                                "one segment of its shared file")
        return -1, metadata

    def read_range(self) -> pa.Table:
        """A range stream by reference read whole (docs/protocol.md, "Range
        reads by reference"): each message names the range's next rows, in
        one segment; the table is slices of the mapped segments (no copy).
        ProtocolError for a message that is not the next rows of the range."""
        slices: list[pa.RecordBatch] = []
        done = 0
        for chunk in self:
            first, rows, (start, length) = _range_piece(chunk.app_metadata)
            if first != done or rows != chunk.rows or length != rows or \
                    start + length > chunk.data.num_rows:
                raise ProtocolError(f"a node sent rows [{first}, {first + rows}) of a range by "
                                    f"reference after {done} of its rows (or outside its "
                                    "segment)")
            slices.append(chunk.data.slice(start, length))
            done += rows
        return pa.Table.from_batches(slices, schema=self._files[0].schema)

    def __iter__(self) -> Any:
        while True:
            try:
                yield self.read_chunk()
            except StopIteration:
                return

    def cancel(self) -> None:
        self._reader.cancel()


def _range_piece(metadata: Any) -> tuple[int, int, tuple[int, int]]:
    """A range read's piece by reference (whole, one batch, one source run
    counted from its segment's first row): its first row in the range, its
    rows and its run. ProtocolError for anything else."""
    raw = b"" if metadata is None else bytes(metadata)
    if len(raw) != _HEADER_BYTES + 12 or raw[:4] != b"IFPC" or raw[4] != 1 or raw[5] != 10:
        raise ProtocolError("a node answered a range read by reference with a message that "
                            "is not a whole piece of one source run")
    first, rows, count, last, entries, sources = struct.unpack_from("<QIIIII", raw, 8)
    if count != 1 or last != rows or entries != 0 or sources != 1:
        raise ProtocolError("a node answered a range read by reference with a piece of "
                            f"{count} batches, {entries} entries and {sources} source runs")
    start, length = struct.unpack_from("<QI", raw, _HEADER_BYTES)
    return first, rows, (start, length)


def shared_reader(reader: Any) -> Any:
    """``reader`` as a :class:`SharedReader` when the node answered by
    reference (its schema names a shared file), else ``reader`` itself.
    Raises :class:`Unshareable` when the file cannot be mapped here."""
    text = (reader.schema.metadata or {}).get(_KEY)
    if text is None:
        return reader
    desc = _protocol.decode("shared file", text)
    held = tuple(zip(desc["held"][::2], desc["held"][1::2], strict=True))
    more = desc["segments"]  # triples: checked by decode
    segments = tuple(zip(more[::3], more[1::3], more[2::3], strict=True))
    where = desc.get("batches") or []  # triples: checked by decode
    batches = tuple(zip(where[::3], where[1::3], where[2::3], strict=True))
    export = Export(desc["pid"], desc["fd"], desc["inode"], desc["size"], segments, batches)
    if held and sum(z - a for a, z in held) != export.num_rows:
        raise ProtocolError(f"a node's shared file holds {export.num_rows} rows, not the "
                            f"{sum(z - a for a, z in held)} it named")
    export.name_rows(desc["dataset"], desc["generation"], held)
    key = (desc["pid"], (desc["fd"], desc["inode"], desc["size"]), segments, batches)
    return SharedReader(reader, export, tuple(desc["columns"]), key)


def is_local(uri: str) -> bool:
    """Whether a node's location is on this host's loopback (where a shared
    file may be mappable; the stream's schema decides)."""
    rest = uri.split("://", 1)[-1]
    if uri.startswith("grpc+unix"):
        return True
    host = rest.rsplit(":", 1)[0].strip("[]")
    return host in ("127.0.0.1", "localhost", "::1") or host.startswith("127.")
