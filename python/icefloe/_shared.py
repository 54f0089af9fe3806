"""Reading a node's rows from shared memory (docs/protocol.md, "Shared memory").

A node started with ``--share-memory`` holds each copy as an Arrow IPC file
of one record batch in a sealed memfd. Asked by reference (DoGet header
``icefloe-shared``), it names the file in the stream's schema ("shared file")
and each piece's header names its rows in the file instead of carrying them.
The reader maps ``/proc/<pid>/fd/<fd>`` private and copy-on-write (what a
training loop writes into its zero-copy tensors stays in its own pages; the
rows outlive the node's copy until the last view goes) and hands the file to
the merge with each message, which decides how the rows are read.
"""

from __future__ import annotations

import bisect
import mmap
import os
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from . import _native, _protocol
from .errors import InvalidArgument, ProtocolError

HEADER = (b"icefloe-shared", b"1")
_KEY = b"icefloe.shared"  # the stream's schema metadata: a "shared file" message


class Unshareable(Exception):
    """The stream names a file this process cannot map (another host or pid
    namespace, another user): read the endpoint over the wire instead."""


class Export:
    """One node's shared file, mapped (private, copy-on-write) for one stream
    and read as record batches, zero-copy. ``dataset``, ``generation`` and
    ``held`` (the global rows the file holds, in its order, as (start, stop)
    ranges) say which rows it is, for takes from it later (:meth:`take`)."""

    dataset = ""
    generation = -1
    held: tuple[tuple[int, int], ...] = ()
    _SMALL_TAKE = 16  # rows up to which a take copies row slices (a take kernel costs ~70 us)

    def __init__(self, pid: int, fd: int, inode: int, size: int) -> None:
        path = self._path = f"/proc/{pid}/fd/{fd}"
        self._inode = inode
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
        self._view_bytes = view
        reader = pa.ipc.open_file(pa.py_buffer(view))
        if reader.num_record_batches != 1:  # nodes write their copy as one batch
            raise InvalidArgument(f"{path}: a node's shared file holds "
                                  f"{reader.num_record_batches} record batches, not 1")
        self.batch = reader.get_batch(0)
        self.num_rows = self.batch.num_rows
        self._index = np.int32 if self.num_rows < 2**31 else np.int64  # take indices
        self._projected: dict[tuple[int, ...], pa.RecordBatch] = {(): self.batch}

    def prefault(self) -> None:
        """Maps every page of the file into this process now (one read per
        page: the kernel maps its neighbours too), so that takes of random
        rows later do not pay a page fault per row and column."""
        np.frombuffer(self._view_bytes, dtype=np.uint8)[::mmap.PAGESIZE].max(initial=0)

    def alive(self) -> bool:
        """Whether the node still holds this file (one stat: it has not died,
        dropped or replaced the copy)."""
        try:
            return os.stat(self._path).st_ino == self._inode
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
        batch = self.view(() if columns is None else tuple(names.index(c) for c in columns))
        if 0 < len(rows) <= self._SMALL_TAKE:  # a copy of row slices
            return pa.concat_batches([batch.slice(r, 1) for r in rows.tolist()])
        return pc.take(batch, pa.array(rows.astype(self._index, copy=False)), boundscheck=False)

    def view(self, columns: tuple[int, ...]) -> pa.RecordBatch:
        """The file's batch with ``columns`` (indices; empty: all), kept."""
        got = self._projected.get(columns)
        if got is None:
            got = self._projected[columns] = self.batch.select(list(columns))
        return got

class _Chunk:
    """What ``FlightStreamReader.read_chunk`` returns, for pieces by reference:
    the node's file (``data``, projected), the piece's metadata, and the rows
    it holds there (``rows``), which its header's source runs name."""

    __slots__ = ("data", "app_metadata", "rows")
    holds = _native.ROWS_IN_FILE  # how the merge reads them

    def __init__(self, data: pa.RecordBatch, app_metadata: pa.Buffer, rows: int) -> None:
        self.data = data
        self.app_metadata = app_metadata
        self.rows = rows


class SharedReader:
    """A plan stream by reference, read like the stream it stands for:
    ``read_chunk`` returns each piece with the node's file its rows are in."""

    by_reference = True  # what merged_batches asks a stream

    def __init__(self, reader: Any, export: Export, columns: tuple[int, ...]) -> None:
        self._reader = reader
        self.export = export
        self._file = export.view(columns)

    def read_chunk(self) -> _Chunk:
        chunk = self._reader.read_chunk()
        return _Chunk(self._file, chunk.app_metadata, chunk.data.num_rows)

    def __iter__(self) -> Any:
        while True:
            try:
                yield self.read_chunk()
            except StopIteration:
                return

    def cancel(self) -> None:
        self._reader.cancel()


def shared_reader(reader: Any) -> Any:
    """``reader`` as a :class:`SharedReader` when the node answered by
    reference (its schema names a shared file), else ``reader`` itself.
    Raises :class:`Unshareable` when the file cannot be mapped here."""
    text = (reader.schema.metadata or {}).get(_KEY)
    if text is None:
        return reader
    desc = _protocol.decode("shared file", text)
    held = tuple(zip(desc["held"][::2], desc["held"][1::2], strict=True))
    export = Export(desc["pid"], desc["fd"], desc["inode"], desc["size"])
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
