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
copy until the last view goes), cuts a piece whose rows cross segments into
one piece per segment, and hands the merge each with its segment, its source
runs counted from the segment's first row; the merge decides how the rows are
read. A range read's messages are slices of the segments, in order
(:meth:`SharedReader.read_range`).
"""

from __future__ import annotations

import bisect
import collections
import mmap
import os
import struct
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from . import _native, _protocol
from .errors import InvalidArgument, ProtocolError

# Version 2: this reader cuts a piece whose rows cross segments itself
# (SharedReader._in_segments); a node cuts them for version 1 readers.
HEADER = (b"icefloe-shared", b"2")
_KEY = b"icefloe.shared"  # the stream's schema metadata: a "shared file" message


class Unshareable(Exception):
    """The stream names a file this process cannot map (another host or pid
    namespace, another user): read the endpoint over the wire instead."""


def _map(pid: int, fd: int, inode: int, size: int) -> tuple[str, mmap.mmap, Any]:
    """A node's file ``/proc/<pid>/fd/<fd>``, checked to be the one named
    and mapped private: its path, mapping and IPC file reader."""
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
                         prot=mmap.PROT_READ | mmap.PROT_WRITE)
    finally:
        os.close(handle)
    return path, view, pa.ipc.open_file(pa.py_buffer(view))


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
                 batches: tuple[tuple[int, int, int], ...] = ()) -> None:
        files = ((fd, inode, size), *segments)
        if batches and len(batches) != len(files):
            raise ProtocolError(f"a node named {len(batches)} segments' batches for a shared "
                                f"file of {len(files)} segments")
        # A tier file holds many segments' rows: each file is mapped once.
        opened: dict[tuple[int, int, int], tuple[str, mmap.mmap, Any]] = {}
        for f in files:
            if f not in opened:
                opened[f] = _map(pid, *f)
        self._paths = [(opened[f][0], f[1]) for f in files]
        self._views = [view for _, view, _ in opened.values()]
        self.batches = [_segment_batch(opened[f][0], opened[f][2], batches[i] if batches else None)
                        for i, f in enumerate(files)]
        self.batch = self.batches[0]
        sizes = [b.num_rows for b in self.batches]
        self.starts = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        self._start_list = self.starts.tolist()
        self.num_rows = int(self.starts[-1])
        self._index = np.int32 if self.num_rows < 2**31 else np.int64  # take indices
        self._projected: dict[tuple[int, ...], list[pa.RecordBatch]] = {(): self.batches}

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

    def view(self, columns: tuple[int, ...]) -> list[pa.RecordBatch]:
        """Each segment's batch with ``columns`` (indices; empty: all), kept."""
        got = self._projected.get(columns)
        if got is None:
            got = self._projected[columns] = [b.select(list(columns)) for b in self.batches]
        return got

    def segment_of(self, row: int) -> int:
        """The segment holding the file's row ``row``."""
        return bisect.bisect_right(self._start_list, row) - 1


_RUN = np.dtype([("start", "<u8"), ("length", "<u4")])  # a source run (docs/protocol.md)
_HEADER_BYTES = 36  # a piece header's fixed part


class _Chunk:
    """What ``FlightStreamReader.read_chunk`` returns, for pieces by reference:
    the node's file's segment that holds its rows (``data``, projected), the
    piece's metadata (source runs counted from that segment's first row), and
    the rows it holds there (``rows``), which its header's source runs name."""

    __slots__ = ("data", "app_metadata", "rows")
    holds = _native.ROWS_IN_FILE  # how the merge reads them

    def __init__(self, data: pa.RecordBatch, app_metadata: Any, rows: int) -> None:
        self.data = data
        self.app_metadata = app_metadata
        self.rows = rows


class SharedReader:
    """A plan stream by reference, read like the stream it stands for:
    ``read_chunk`` returns each piece with the node's segment its rows are in."""

    by_reference = True  # what merged_batches asks a stream

    def __init__(self, reader: Any, export: Export, columns: tuple[int, ...]) -> None:
        self._reader = reader
        self.export = export
        self._files = export.view(columns)
        self._parts: collections.deque[_Chunk] = collections.deque()  # a cut piece's others

    def read_chunk(self) -> _Chunk:
        if self._parts:
            return self._parts.popleft()
        chunk = self._reader.read_chunk()
        metadata = chunk.app_metadata
        if len(self._files) == 1 or metadata is None:
            return _Chunk(self._files[0], metadata, chunk.data.num_rows)
        parts = self._in_segments(metadata, chunk.data.num_rows)
        self._parts.extend(_Chunk(self._files[k], m, n) for k, m, n in parts[1:])
        k, m, n = parts[0]
        return _Chunk(self._files[k], m, n)

    def _in_segments(self, metadata: Any, rows: int) -> list[tuple[int, Any, int]]:
        """A piece as pieces whose source runs each lie in one segment: for
        each, the segment, its header with the runs counted from that
        segment's first row, and its rows. A piece whose rows cross segments
        (a window span's, from a copy with rows on the tier: its units are
        segments of their own) is cut here, where the node names its rows
        once (docs/protocol.md, "Shared memory"): each part keeps its rows'
        positions, in the piece's order, and the merge takes them as several
        pieces of the batch or span. A header the merge will refuse anyway
        (too short, lengths that do not add up, rows outside the file) goes
        as it is."""
        raw = bytes(metadata)
        if len(raw) < _HEADER_BYTES:
            return [(0, metadata, rows)]
        flags = raw[5]
        entries, sources = struct.unpack_from("<II", raw, 28)
        at = _HEADER_BYTES + entries * (4 if flags & 1 else 8)
        if sources == 0 or len(raw) != at + 12 * sources:
            return [(0, metadata, rows)]
        runs = np.frombuffer(raw, dtype=_RUN, count=sources, offset=at)
        starts = runs["start"].astype(np.int64)
        lengths = runs["length"].astype(np.int64)
        ends = starts + lengths
        bounds = self.export.starts
        if int(starts.min()) < 0 or int(lengths.min()) == 0 or \
                int(ends.max()) > self.export.num_rows:
            return [(0, metadata, rows)]
        first = np.searchsorted(bounds, starts, side="right") - 1
        last = np.searchsorted(bounds, ends - 1, side="right") - 1
        if int(first[0]) == int(last.max()) == int(first.min()):  # one segment: rebase
            base = int(bounds[first[0]])
            if base == 0:
                return [(int(first[0]), metadata, rows)]
            moved = runs.copy()
            moved["start"] -= np.uint64(base)
            return [(int(first[0]), pa.py_buffer(raw[:at] + moved.tobytes()), rows)]
        if flags & 2:  # whole batches in order: a node never cuts one across segments
            raise ProtocolError("a node sent a chunk by reference whose rows lie in more than "
                                "one segment of its shared file")
        total = int(lengths.sum())
        if flags & 1:
            positions = np.frombuffer(raw, dtype="<u4", count=entries, offset=_HEADER_BYTES)
        else:
            pairs = np.frombuffer(raw, dtype="<u4", count=2 * entries,
                                  offset=_HEADER_BYTES).reshape(-1, 2).astype(np.int64)
            before = np.cumsum(pairs[:, 1]) - pairs[:, 1]
            positions = (np.repeat(pairs[:, 0] - before, pairs[:, 1])
                         + np.arange(int(pairs[:, 1].sum()))).astype("<u4")
        if len(positions) != total or total != rows:
            raise ProtocolError(f"a node sent a piece by reference of {rows} rows whose header "
                                f"names {len(positions)} positions and {total} source rows")
        # Each run cut at the segments' ends, then the cut runs grouped by
        # segment (stably: each part's rows keep the piece's order).
        cuts = last - first + 1
        run = np.repeat(np.arange(len(first)), cuts)
        segment = first[run] + np.arange(len(run)) - np.repeat(np.cumsum(cuts) - cuts, cuts)
        cut_start = np.maximum(starts[run], bounds[segment])
        cut_length = np.minimum(ends[run], bounds[segment + 1]) - cut_start
        cut_row = np.cumsum(cut_length) - cut_length  # its first row in the piece
        order = np.argsort(segment, kind="stable")
        segment, cut_start, cut_length = segment[order], cut_start[order], cut_length[order]
        before = np.cumsum(cut_length) - cut_length
        rows_in_order = np.repeat(cut_row[order] - before, cut_length) + np.arange(total)
        placed = positions[rows_in_order].astype("<u4", copy=False)
        out_runs = np.empty(len(segment), dtype=_RUN)
        out_runs["start"] = cut_start - bounds[segment]
        out_runs["length"] = cut_length
        segments, firsts = np.unique(segment, return_index=True)
        ends_at = [*firsts[1:].tolist(), len(segment)]
        head = bytearray(raw[:28])
        head[5] = flags | 1  # each part's entries: its rows' positions
        parts = []
        for k, a, z in zip(segments.tolist(), firsts.tolist(), ends_at, strict=True):
            r0, r1 = int(before[a]), int(before[z - 1] + cut_length[z - 1])
            body = struct.pack("<II", r1 - r0, z - a) + placed[r0:r1].tobytes() + \
                out_runs[a:z].tobytes()
            parts.append((k, pa.py_buffer(bytes(head) + body), r1 - r0))
        return parts

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
    return SharedReader(reader, export, tuple(desc["columns"]))


def is_local(uri: str) -> bool:
    """Whether a node's location is on this host's loopback (where a shared
    file may be mappable; the stream's schema decides)."""
    rest = uri.split("://", 1)[-1]
    if uri.startswith("grpc+unix"):
        return True
    host = rest.rsplit(":", 1)[0].strip("[]")
    return host in ("127.0.0.1", "localhost", "::1") or host.startswith("127.")
