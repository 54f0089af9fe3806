"""The slice map: where each global row of a dataset lives, for random access
in one hop (docs/protocol.md, "Slice map").

The head answers the ``slice_map`` action with the dataset's slices (global
row ranges and the nodes holding them, live replicas first) and a *read
grant*: the signed prefix of a kind-04 ticket for the dataset's storage name
and generation. A client appends a rows body to the grant and asks the nodes
directly; the head is asked again only when the map is dropped (the nodes
call the copy stale or unknown, a read broke, this client loaded or evicted
the dataset) or has aged past its time to live.
"""

from __future__ import annotations

import base64
import numbers
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from . import _native, _protocol
from .errors import InvalidArgument, ServerError

# Rows per take: the ticket body's bound (plan_ticket.h's kMaxTicketRows).
MAX_ROWS: int = _protocol.constants()["max_take_rows"]
_ENTRY = np.dtype([("position", "<u4"), ("row", "<u8")])  # a rows body's entry: 12 bytes


@dataclass(frozen=True)
class Group:
    """The rows one replica set serves: its kind-04 ticket and its nodes;
    ``rows[i]`` goes to position ``positions[i]`` of the answer."""

    ticket: bytes
    nodes: tuple[str, ...]
    positions: np.ndarray
    rows: np.ndarray


@dataclass(frozen=True)
class SliceMap:
    """One dataset's slice map at one generation (immutable: shared by threads)."""

    name: str
    storage: str
    generation: int
    num_rows: int
    schema: pa.Schema
    # Slice i holds [stops[i-1] (0 for i = 0), stops[i]) on replica set
    # group_of_slice[i] (an index into replica_sets).
    slices: _native.SliceTable
    replica_sets: tuple[tuple[str, ...], ...]
    grant: bytes
    fetched_s: float

    @classmethod
    def from_json(cls, desc: dict[str, Any], now_s: float) -> SliceMap:
        slices = sorted(desc["slices"], key=lambda s: int(s["start"]))
        num_rows = int(desc["rows"])
        # The slices tile [0, rows): then a row's slice is one binary search.
        edges = [0] + [int(s["stop"]) for s in slices]
        if any(int(s["start"]) != edges[i] for i, s in enumerate(slices)) or \
                edges[-1] != num_rows:
            raise ServerError(f"dataset {desc.get('name')!r}: the head's slice map does not "
                              f"cover rows [0, {num_rows}) exactly once")
        sets: dict[tuple[str, ...], int] = {}
        groups = [sets.setdefault(tuple(s["nodes"]), len(sets)) for s in slices]
        schema = pa.ipc.read_schema(pa.py_buffer(base64.b64decode(desc["schema"])))
        return cls(name=str(desc["name"]), storage=str(desc["storage"]),
                   generation=int(desc["generation"]), num_rows=num_rows, schema=schema,
                   slices=_native.SliceTable(np.array(edges[1:], dtype=np.uint64),
                                             np.array(groups, dtype=np.uint32), len(sets)),
                   replica_sets=tuple(sets), grant=base64.b64decode(desc["grant"]),
                   fetched_s=now_s)

    def groups(self, ids: np.ndarray) -> list[Group]:
        """One kind-04 ticket per replica set holding any of ``ids`` (already
        checked to lie in [0, num_rows)); position i of the answer is ids[i].
        The grouping and the rows bodies are the head's own (protocol/
        row_groups.h, through the native library)."""
        out, offsets, lengths, set_of_row = self.slices.group_rows(
            np.ascontiguousarray(ids, dtype=np.uint64))
        if len(ids) == 1:  # the common one-row read: its set, its body, no array work
            g = int(set_of_row[0])
            return [Group(self.grant + out[:int(lengths[g])].tobytes(), self.replica_sets[g],
                          np.zeros(1, dtype=np.int64), np.asarray(ids, dtype=np.int64))]
        groups = []
        for g in np.flatnonzero(lengths).tolist():
            body = out[int(offsets[g]):int(offsets[g] + lengths[g])]
            entries = np.frombuffer(body, dtype=_ENTRY, offset=8)
            groups.append(Group(self.grant + body.tobytes(), self.replica_sets[g],
                                entries["position"].astype(np.int64),
                                entries["row"].astype(np.int64)))
        return groups


def row_ids(rows: Any, name: str) -> np.ndarray:
    """``rows`` as int64 global row ids: integers only (no bools, no floats),
    InvalidArgument naming the first one that is not."""
    if hasattr(rows, "numpy") and not isinstance(rows, np.ndarray):  # torch tensors
        rows = rows.numpy()
    if not isinstance(rows, (np.ndarray, list, tuple)):
        rows = list(rows)
    arr = np.asarray(rows)
    if arr.ndim != 1:
        if arr.size == 0:
            return np.empty(0, dtype=np.int64)
        raise InvalidArgument(f"take: 'rows' must be a list of row ids; got shape {arr.shape}")
    if len(arr) > MAX_ROWS:
        raise InvalidArgument(f"take: 'rows' holds {len(arr)} ids; at most {MAX_ROWS} per take")
    if arr.dtype.kind in "iu" and not (isinstance(rows, (list, tuple)) and
                                       bool in set(map(type, rows))):  # numpy takes True as 1
        if arr.dtype.kind == "u" and len(arr) and int(arr.max()) > np.iinfo(np.int64).max:
            i = int(np.argmax(arr > np.iinfo(np.int64).max))
            raise _outside(name, i, int(arr[i]), None)
        return arr.astype(np.int64, copy=False)
    if len(arr) == 0:
        return np.empty(0, dtype=np.int64)
    # Floats, bools, objects, or Python ints past int64 (which numpy turns
    # into floats): check the values as given, naming the culprit.
    for i, v in enumerate(rows.tolist() if isinstance(rows, np.ndarray) else rows):
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, numbers.Integral):
            raise InvalidArgument(f"take: 'rows'[{i}] must be an integer row id; got {v!r}")
        if not -(2**63) <= int(v) < 2**63:
            raise _outside(name, i, int(v), None)
    return np.array(rows, dtype=np.int64)


def check_range(ids: np.ndarray, smap: SliceMap) -> None:
    """InvalidArgument naming the first id outside [0, num_rows)."""
    if not len(ids):
        return
    bad = (ids < 0) | (ids >= smap.num_rows)
    if bad.any():
        i = int(np.argmax(bad))
        raise _outside(smap.name, i, int(ids[i]), smap.num_rows)


def _outside(name: str, i: int, row: int, num_rows: int | None) -> InvalidArgument:
    of = f" of {num_rows} rows" if num_rows is not None else ""
    return InvalidArgument(f"take: 'rows'[{i}] = {row} is outside dataset {name!r}{of}")


class SliceMaps:
    """A client's slice maps, one per dataset name, column set and generation
    asked for (None: the current one; a number: that copy, a replaced one
    while the head keeps it), at most ``max_entries``, least recently used
    dropped first. Thread-safe; a map is fetched by one thread while others
    asking for the same one wait for it."""

    def __init__(self, fetch: Callable[[str, list[str] | None, int | None], dict[str, Any]], *,
                 ttl_s: float, max_entries: int = 256) -> None:
        self._fetch = fetch
        self._ttl_s = ttl_s
        self._max_entries = max_entries
        self._maps: OrderedDict[_Key, SliceMap] = OrderedDict()
        self._lock = threading.Lock()
        self._fetching: dict[_Key, threading.Lock] = {}

    def get(self, name: str, columns: list[str] | None = None,
            generation: int | None = None) -> SliceMap:
        key = (name, tuple(columns) if columns is not None else None, generation)
        now = time.monotonic()
        with self._lock:
            smap = self._maps.get(key)
            if smap is not None and now - smap.fetched_s < self._ttl_s:
                self._maps.move_to_end(key)
                return smap
            fetching = self._fetching.setdefault(key, threading.Lock())
        with fetching:  # one head call per map at a time
            with self._lock:
                smap = self._maps.get(key)
                if smap is not None and time.monotonic() - smap.fetched_s < self._ttl_s:
                    return smap
            try:
                smap = SliceMap.from_json(self._fetch(name, columns, generation),
                                          time.monotonic())
            finally:
                with self._lock:
                    self._fetching.pop(key, None)
            with self._lock:
                self._maps[key] = smap
                self._maps.move_to_end(key)
                while len(self._maps) > self._max_entries:
                    self._maps.popitem(last=False)
            return smap

    def drop(self, name: str, smap: SliceMap | None = None) -> None:
        """Forgets ``name``'s maps (only ``smap``, when given)."""
        with self._lock:
            for key in [k for k, m in self._maps.items()
                        if k[0] == name and (smap is None or m is smap)]:
                del self._maps[key]


_Key = tuple[str, tuple[str, ...] | None, int | None]
