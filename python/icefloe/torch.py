"""PyTorch datasets over an icefloe cache.

- :class:`CacheDataset`: an ``IterableDataset`` that reads this consumer's
  share of each epoch (exact sharding over ranks x DataLoader workers, per-epoch
  shuffling, resumable). Use it with ``DataLoader(ds, batch_size=None)``.
- :class:`DataCacheDataset`: Kubeflow Trainer's data-cache example usage
  (``from_arrow_rb_to_tensor`` hook, 128-row chunks), over Kubeflow's protocol.
- :class:`CacheMapDataset`: map-style, batched random access, any sampler.

``torch`` is imported when this module is, never by ``import icefloe``.
"""

from __future__ import annotations

import json
import multiprocessing
import os
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import torch
from torch.utils.data import Dataset, IterableDataset, get_worker_info

from . import _protocol
from ._pieces import apply_many, starts
from .client import Client

# The epoch-order version this package's states are written for (plan.h's
# kEpochOrderVersion, through _fields.json); the head refuses to resume a
# state of another.
ORDER_VERSION: int = _protocol.constants()["epoch_order_version"]
SHUFFLES: tuple[str, ...] = tuple(_protocol.fields("epoch descriptor")["shuffle"]["choices"])

__all__ = ["CacheDataset", "CacheMapDataset", "DataCacheDataset", "batch_to_tensors",
           "distributed_coordinates"]


def distributed_coordinates() -> tuple[int, int]:
    """(rank, world_size): torch.distributed when initialised, else RANK/WORLD_SIZE, else 0/1."""
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        return torch.distributed.get_rank(), torch.distributed.get_world_size()
    return int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))


def _live_coordinates() -> tuple[int, int] | None:
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        return torch.distributed.get_rank(), torch.distributed.get_world_size()
    return None


def _is_token_list(t: pa.DataType) -> bool:
    """A variable-length list of integers (token ids): ``list`` or ``large_list``."""
    return (pa.types.is_list(t) or pa.types.is_large_list(t)) and \
        pa.types.is_integer(t.value_type)


# Integer types torch has no general support for, widened to one it has.
_TORCH_INT = {pa.uint16(): pa.int32(), pa.uint32(): pa.int64(), pa.uint64(): pa.int64()}


def _token_lists_to_tensor(name: str, col: pa.Array, out: dict[str, Any]) -> None:
    """A list-of-integers column as a right-padded ``[B, L]`` tensor (L the
    longest row of this batch, padded with 0) plus ``<name>_lengths`` (int64
    ``[B]``), and ``<name>_valid`` when some rows are null (null rows: length
    0, all padding). No per-row Python: one scatter of the flat values."""
    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks()
    value_type = _TORCH_INT.get(col.type.value_type, col.type.value_type)
    # flatten() honours the array's offset (a slice) and skips the values
    # that back null rows; list_value_length is null there.
    flat = col.flatten()
    if flat.type != value_type:
        flat = flat.cast(value_type)
    if flat.null_count:
        flat = flat.fill_null(pa.scalar(0, value_type))
    lengths_arr = pc.list_value_length(col)
    if col.null_count:
        out[f"{name}_valid"] = torch.from_numpy(col.is_valid().to_numpy(zero_copy_only=False))
        lengths_arr = lengths_arr.fill_null(0)
    lengths = lengths_arr.to_numpy(zero_copy_only=False).astype(np.int64, copy=False)
    rows = len(col)
    width = int(lengths.max()) if rows else 0
    if rows and int(lengths.min()) == width:
        # Every row the same length: the flat values are the [B, L] matrix.
        values = torch.utils.dlpack.from_dlpack(flat) if len(flat) else \
            torch.zeros(0, dtype=_torch_dtype(value_type))
        out[name] = values.reshape(rows, width)
    else:
        padded = np.zeros((rows, width), dtype=value_type.to_pandas_dtype())
        # Row-major positions of the real tokens: exactly the flat order.
        padded[np.arange(width) < lengths[:, None]] = flat.to_numpy(zero_copy_only=False)
        out[name] = torch.from_numpy(padded)
    out[f"{name}_lengths"] = torch.from_numpy(lengths.copy() if not lengths.flags.writeable
                                              else lengths)


def _torch_dtype(t: pa.DataType) -> torch.dtype:
    return torch.from_numpy(np.zeros(0, dtype=t.to_pandas_dtype())).dtype


def _column_to_tensor(name: str, col: pa.Array, out: dict[str, Any]) -> None:
    t = col.type
    if _is_token_list(t):
        _token_lists_to_tensor(name, col, out)
        return
    if col.null_count:
        # Nulls are explicit: values with nulls filled (NaN for floats, else 0)
        # plus a boolean `<name>_valid` mask.
        out[f"{name}_valid"] = torch.from_numpy(col.is_valid().to_numpy(zero_copy_only=False))
        fill = float("nan") if pa.types.is_floating(t) else 0
        if pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t):
            col = col.fill_null(pa.scalar(fill, t) if not pa.types.is_boolean(t) else False)
    if pa.types.is_integer(t) or pa.types.is_floating(t):
        out[name] = torch.utils.dlpack.from_dlpack(col) if not col.null_count else \
            torch.from_numpy(col.to_numpy(zero_copy_only=False).copy())
    elif pa.types.is_boolean(t):
        out[name] = torch.from_numpy(col.to_numpy(zero_copy_only=False))
    elif pa.types.is_timestamp(t) or pa.types.is_date(t) or pa.types.is_time(t) or \
            pa.types.is_duration(t):
        width = pa.int64() if t.bit_width == 64 else pa.int32()
        out[name] = torch.utils.dlpack.from_dlpack(col.view(width)) if not col.null_count else \
            torch.from_numpy(col.view(width).to_numpy(zero_copy_only=False).copy())
    elif pa.types.is_decimal(t):
        out[name] = torch.from_numpy(col.cast(pa.float64()).to_numpy(zero_copy_only=False))
    elif isinstance(t, pa.FixedShapeTensorType) or pa.types.is_fixed_size_list(t):
        storage = col.storage if isinstance(t, pa.FixedShapeTensorType) else col
        shape = tuple(t.shape) if isinstance(t, pa.FixedShapeTensorType) else (t.list_size,)
        values = storage.flatten()
        tensor = torch.utils.dlpack.from_dlpack(values) if not values.null_count else \
            torch.from_numpy(values.to_numpy(zero_copy_only=False).copy())
        out[name] = tensor.reshape((len(col), *shape))
    else:
        # Strings, binary, nested lists, maps, structs: Python objects.
        out[name] = col.to_pylist()


def _dlpack(col: pa.Array) -> Any:
    return torch.utils.dlpack.from_dlpack(col)


def _column_converter(t: pa.DataType) -> Callable[[pa.Array], Any] | None:
    """The zero-copy conversion of a column of type ``t`` without nulls, decided
    once per schema; None for types _column_to_tensor handles each time
    (token lists among them: padded to each batch's own longest row, so a
    chunk of batches is never converted at once)."""
    if pa.types.is_integer(t) or pa.types.is_floating(t):
        return _dlpack
    if pa.types.is_timestamp(t) or pa.types.is_date(t) or pa.types.is_time(t) or \
            pa.types.is_duration(t):
        width = pa.int64() if t.bit_width == 64 else pa.int32()
        return lambda col: torch.utils.dlpack.from_dlpack(col.view(width))
    return None


_Plan = list[tuple[int, str, Callable[[pa.Array], Any] | None]]
# Converter plans by schema, newest first: training reads one or a few
# schemas, so each column's conversion is decided once, not per batch.
# Looked up with Schema.equals (hashing a schema costs more than converting).
_PLANS: list[tuple[pa.Schema, _Plan]] = []
_MAX_PLANS = 8


def _plan(schema: pa.Schema) -> _Plan:
    for known, plan in _PLANS:
        if known.equals(schema):
            return plan
    plan = [(i, f.name, _column_converter(f.type)) for i, f in enumerate(schema)]
    _PLANS.insert(0, (schema, plan))
    del _PLANS[_MAX_PLANS:]
    return plan


def batch_to_tensors(batch: pa.RecordBatch) -> dict[str, Any]:
    """The default conversion of a record batch to a dict of tensors.

    Fixed-width numeric, temporal, fixed-size-list and fixed-shape-tensor
    columns without nulls become tensors that share the Arrow buffers (zero
    copy, via DLPack); columns with nulls are copied with nulls filled and get
    a ``<name>_valid`` mask. Variable-length lists of integers (token ids,
    ``list<int32>``) become a right-padded ``[B, L]`` tensor (L: the batch's
    longest row, pad 0) plus ``<name>_lengths`` (int64 ``[B]``). Strings and
    other types become Python lists.
    """
    out: dict[str, Any] = {}
    column = batch.column
    for i, name, convert in _plan(batch.schema):
        col = column(i)
        if convert is not None and not col.null_count:
            out[name] = convert(col)
        else:
            _column_to_tensor(name, col, out)
    return out


def _whole_columns(batch: pa.RecordBatch) -> list[tuple[str, Any]] | None:
    """Each column of ``batch`` converted zero-copy, named; None when one
    needs copying (nulls, or a type without a tensor view)."""
    plan = _plan(batch.schema)
    column = batch.column
    if any(convert is None or column(i).null_count for i, _, convert in plan):
        return None
    return [(name, convert(column(i))) for i, name, convert in plan]


def batches_to_tensors(batch: pa.RecordBatch, sizes: list[int],
                       offsets: list[int] | None = None) -> list[dict[str, Any]]:
    """``batch_to_tensors`` of each ``sizes[k]``-row slice of ``batch``, one
    after another or at row ``offsets[k]`` (a rank's batches in a span of a
    node's shared file): one conversion of each column and views of it when
    every column converts without copying (no nulls, tensor types), else
    slice by slice (so each batch's result is exactly what it would be
    alone)."""
    whole = _whole_columns(batch)
    if whole is None:
        at = zip(starts(sizes, offsets), sizes, strict=True)
        return [batch_to_tensors(batch.slice(o, n)) for o, n in at]
    if offsets is None:
        # split_with_sizes: Tensor.split's own work without its Python
        # wrapper (~3 µs a column a chunk).
        parts = [(name, t.split_with_sizes(sizes)) for name, t in whole]
        return [{name: views[k] for name, views in parts} for k in range(len(sizes))]
    return [{name: t[o:o + n] for name, t in whole} for o, n in zip(offsets, sizes, strict=True)]


# Client.iter_epoch(transform=batch_to_tensors) converts each chunk of whole
# batches at once too (icefloe._pieces.apply_many looks for `many`).
batch_to_tensors.many = batches_to_tensors  # type: ignore[attr-defined]


class _ClusterClient:
    """One Client per process (Flight clients must not cross a fork), never pickled."""

    head_uri: str
    _token: str | None
    _tls_root_certs: str | bytes | None
    _client: Client | None = None
    client_options: dict[str, Any] | None = None  # more Client arguments (failover_timeout_s)

    def __getstate__(self) -> dict[str, Any]:
        # Pickled for spawn/forkserver DataLoader workers, in the main process:
        # the moment to pin the rank they cannot discover themselves.
        state = self.__dict__.copy()
        state["_client"] = None
        state["_dist"] = distributed_coordinates()
        return state

    def client(self) -> Client:
        pid = os.getpid()
        if self._client is None or getattr(self, "_client_pid", None) != pid:
            self._client = Client(self.head_uri, token=self._token,
                                  tls_root_certs=self._tls_root_certs,
                                  **(self.client_options or {}))
            self._client_pid = pid
        return self._client


class _SharedProgress:
    """What the main process last chose to read (epoch, seed, order, start),
    shared with DataLoader workers that outlive an epoch
    (``persistent_workers=True``): they keep their own copy of the dataset,
    which set_epoch and load_state_dict in the main process never touch. A
    version number says when it changed. Crosses into workers only while
    they are being started (shared memory can only be passed then)."""

    SIZE = 1024

    def __init__(self) -> None:
        # No lock: a lock made in one multiprocessing context cannot cross into
        # workers started by another (forkserver, spawn). The main process
        # writes between epochs, before the DataLoader wakes its workers; a
        # reader still takes two equal copies to rule out a torn one.
        self._block = multiprocessing.Array("c", self.SIZE, lock=False)

    def write(self, values: dict[str, Any]) -> None:
        raw = json.dumps(values).encode()
        if len(raw) > self.SIZE:
            raise ValueError("resume state too large to share with DataLoader workers")
        self._block.raw = raw.ljust(self.SIZE, b"\0")

    def read(self) -> dict[str, Any] | None:
        for _ in range(100):
            first, second = bytes(self._block.raw), bytes(self._block.raw)
            if first == second:
                raw = first.rstrip(b"\0")
                return json.loads(raw) if raw else None
        raise RuntimeError("the shared epoch state kept changing while being read")


_SHARED_KEYS = ("epoch", "seed", "shuffle", "block_rows", "window_blocks",
                "shuffle_within_block", "generation")
FOLLOWS = ("latest", "pinned")


class CacheDataset(_ClusterClient, IterableDataset):
    """This consumer's batches of each epoch of a cached dataset.

    Rank and world size come from ``torch.distributed`` when initialised
    (else ``RANK``/``WORLD_SIZE``, else 0/1); the DataLoader worker from
    ``get_worker_info()``. Every rank gets the same number of batches. With
    ``drop_last`` every row is read at most once per epoch (the tail that
    does not fill a step is dropped); without it, as with PyTorch's
    ``DistributedSampler``, every rank reads ``ceil(N / world_size)`` rows,
    the last batch may be short (the same length on every rank), and at most
    ``world_size - 1`` rows are read twice (none with one rank).

    ``shuffle`` is ``"window"`` (the default: each window of 4096 rows takes
    one 32-row block from each of 128 equal parts of the table and is read
    in a pseudo-random order; mixes like ``"sample"`` at near-sequential
    speed), ``"none"``, ``"block"`` (blocks of ``block_rows`` rows, default
    ``ceil(N / 64)`` up to 65536, permuted per epoch; zero-copy but batches
    are consecutive rows) or ``"sample"`` (a pseudo-random permutation of all
    rows). ``block_rows`` and ``window_blocks`` tune the window and block
    modes (docs/epochs.md). Call :meth:`set_epoch` before each epoch (it
    reaches ``persistent_workers`` too). ``job`` names the training job in
    the head's stall metrics (default ``$ICEFLOE_JOB``, else the Kubeflow
    TrainJob).
    Override :meth:`to_tensors` to change how a record batch becomes a
    sample.

    In the training process batches are assembled (and, with the default
    :meth:`to_tensors`, turned into tensors) on a background thread,
    ``prefetch`` batches (default 2; the batches a node sent as one chunk
    count as one and are handed over together) before the loop asks for
    them, so the loop's step overlaps the input work; inside DataLoader
    workers, which do
    nothing else and which the DataLoader already runs ahead, the default is
    to assemble on the worker's own thread (``prefetch=0``). An epoch whose
    streams all come by reference from the nodes' shared memory runs on the
    loop's thread too: each batch is a slice of mapped memory, cheaper to
    make than to hand between threads.

    Tables change: with ``follow="latest"`` (the default) each epoch reads
    the newest generation of the dataset (a refresh, ``Client.refresh``,
    lands at the next epoch: every rank and worker finishes the epoch on the
    generation it started, which the head keeps while it is read). With
    ``follow="pinned"`` every epoch reads the generation the first one read
    (an error names both once the head has freed it; to keep a snapshot for
    good, load it under a name of its own). :meth:`state_dict` records the
    generation; resuming an epoch reads that one.

    When a data node dies mid-epoch the epoch goes on, exactly, from another
    replica or once the head has repaired the rows (:meth:`Client.iter_epoch`);
    ``client_options`` (e.g. ``{"failover_timeout_s": 300}``) are passed to
    each process's :class:`Client`.
    """

    def __init__(
        self,
        head_uri: str,
        dataset: str,
        batch_size: int,
        shuffle: str = "window",
        seed: int = 0,
        drop_last: bool = True,
        columns: list[str] | None = None,
        token: str | None = None,
        prefetch: int | None = None,
        *,
        tls_root_certs: str | bytes | None = None,
        block_rows: int | None = None,
        shuffle_within_block: bool = False,
        window_blocks: int | None = None,
        client_options: dict[str, Any] | None = None,
        job: str | None = None,
        follow: str = "latest",
    ) -> None:
        super().__init__()
        if batch_size < 1:
            raise ValueError("batch_size must be positive")
        if shuffle not in SHUFFLES:
            raise ValueError(f"shuffle must be one of {', '.join(SHUFFLES)}, not {shuffle!r}")
        if follow not in FOLLOWS:
            raise ValueError(f"follow must be one of {', '.join(FOLLOWS)}, not {follow!r}")
        self.follow = follow
        # The dataset generation the next epochs read (resumed or pinned);
        # None: the one the head binds to each epoch.
        self.generation: int | None = None
        self._read_generation: int | None = None  # what this process's epoch read
        self.head_uri = head_uri
        self.dataset = dataset
        self.batch_size = batch_size
        self.shuffle = shuffle
        self.seed = seed
        self.drop_last = drop_last
        self.columns = columns
        self.prefetch = prefetch
        self.block_rows = block_rows
        self.shuffle_within_block = shuffle_within_block
        self.window_blocks = window_blocks
        self.client_options = client_options
        self.job = job  # stall reports' job (icefloe._stall.job_name)
        self._token = token
        self._tls_root_certs = tls_root_certs
        self.epoch = 0
        self._start = 0          # position of the epoch's order to start from (resume)
        self._first_batch = 0    # per-worker resume (StatefulDataLoader)
        self._worker_state: dict[str, Any] | None = None  # the state _first_batch came from
        self._yielded = 0        # batches yielded by this process in this epoch
        self._client: Client | None = None
        # DataLoader workers do not see torch.distributed: remember the rank
        # where it is known (here, and in set_epoch, both in the main process).
        self._dist = _live_coordinates()
        self._shared = _SharedProgress()
        self._version = 0  # of the progress this copy last published or applied

    def __getstate__(self) -> dict[str, Any]:
        state = super().__getstate__()
        # Shared memory crosses only into processes being started (DataLoader
        # workers); any other pickle gets none.
        if multiprocessing.context.get_spawning_popen() is None:
            state["_shared"] = None
        return state

    def _publish(self) -> None:
        """Tells persistent DataLoader workers what to read next."""
        if self._shared is None:
            return
        self._version += 1
        self._shared.write({"version": self._version, "start": self._start,
                            **{k: getattr(self, k) for k in _SHARED_KEYS}})

    def _follow(self) -> None:
        """In a worker that outlived an epoch: adopt what the main process chose."""
        shared = self._shared.read() if self._shared is not None else None
        if shared is None or shared["version"] == self._version:
            return
        self._version = shared["version"]
        for k in _SHARED_KEYS:
            setattr(self, k, shared[k])
        self._start = int(shared["start"])
        self._first_batch = 0
        self._worker_state = None

    # -- configuration -----------------------------------------------------

    def set_epoch(self, epoch: int) -> None:
        """Selects the epoch to read next (its own shuffle); resets resume state."""
        if epoch != self.epoch:
            self._start = 0
            self._first_batch = 0
            self._worker_state = None
            self.epoch = epoch
            self._read_generation = None
            if self.follow == "latest":
                self.generation = None  # a resumed epoch's copy, not the next one's
            elif self.generation is None:
                self.generation = self._epoch_generation()
            self._publish()
        self._yielded = 0
        self._dist = _live_coordinates() or self._dist

    def to_tensors(self, batch: pa.RecordBatch) -> Any:
        """Turns one record batch into what the loop receives; override freely."""
        return batch_to_tensors(batch)

    # -- plan ----------------------------------------------------------------

    def _coordinates(self) -> dict[str, Any]:
        rank, world_size = _live_coordinates() or self._dist or distributed_coordinates()
        info = get_worker_info()
        num_workers, worker = (info.num_workers, info.id) if info is not None else (0, 0)
        return {"world_size": world_size, "rank": rank, "num_workers": num_workers,
                "worker": worker}

    def _plan(self, **overrides: Any) -> dict[str, Any]:
        plan = {"seed": self.seed, "epoch": self.epoch, "shuffle": self.shuffle,
                "batch_size": self.batch_size, "drop_last": self.drop_last,
                "start": self._start, "block_rows": self.block_rows,
                "window_blocks": self.window_blocks,
                "shuffle_within_block": self.shuffle_within_block, **self._coordinates(),
                # Projected by the nodes: other columns never cross the wire.
                "columns": list(self.columns) if self.columns is not None else None,
                "generation": self.generation}
        plan.update(overrides)
        return plan

    def _epoch_generation(self) -> int:
        """The generation the current epoch reads (the head's binding of it,
        or the pinned one)."""
        plan = self._plan(num_workers=0, worker=0)
        plan.pop("batch_size")
        _, shape = self.client().epoch_info(self.dataset, batch_size=self.batch_size, **plan)
        return int(shape["generation"])

    def __len__(self) -> int:
        """Batches this rank reads in the current epoch (from the resume point)."""
        plan = self._plan(num_workers=0, worker=0)
        plan.pop("batch_size")
        _, shape = self.client().epoch_info(self.dataset, batch_size=self.batch_size, **plan)
        return int(shape["steps"])

    def __iter__(self) -> Iterator[Any]:
        if get_worker_info() is not None:
            self._follow()
        plan = self._plan(first_batch=self._first_batch)
        plan.pop("batch_size")
        if self._worker_state is not None:
            self._check_worker_topology(plan)
        self._yielded = self._first_batch
        # The default conversion runs with the assembly on the background
        # thread; an override runs here, on the loop's thread (it may use
        # per-thread state such as the current CUDA device).
        default = type(self).to_tensors is CacheDataset.to_tensors

        def prepare(batch: pa.RecordBatch) -> Any:
            return batch_to_tensors(batch) if default else batch

        def prepare_many(batch: pa.RecordBatch, sizes: list[int],
                         offsets: list[int] | None = None) -> list[Any]:
            if default:
                return batches_to_tensors(batch, sizes, offsets)
            return apply_many(None, batch, sizes, offsets)

        prepare.many = prepare_many  # type: ignore[attr-defined]
        prefetch = self.prefetch
        if prefetch is None:
            prefetch = 2 if get_worker_info() is None else 0
        if self.follow == "pinned" and self.generation is None:
            self.generation = plan["generation"] = self._epoch_generation()

        def read(shape: dict[str, Any]) -> None:
            self._read_generation = int(shape["generation"])

        for item in self.client().iter_epoch(self.dataset, batch_size=self.batch_size,
                                              prefetch=prefetch,
                                              transform=prepare,
                                              job=self.job, on_shape=read,
                                              **plan):
            self._yielded += 1
            yield item if default else self.to_tensors(item)

    # -- resume --------------------------------------------------------------

    def state_dict(self, steps: int | None = None) -> dict[str, Any]:
        """A small resume state: the epoch's order and how far the job got.

        ``steps`` is how many batches this rank's training loop has taken in
        this epoch (the same on every rank; all of them after the epoch
        ended). Without it, the count of batches this process yielded is
        used: exact with ``num_workers=0``. Inside a DataLoader worker
        (torchdata's ``StatefulDataLoader`` calls this there, after each batch
        it hands to the loop) the state records the worker's own batch count
        instead, which resumes the same world size, batch size and worker
        count only.

        No arithmetic here: the head turns (start, world_size, batch_size,
        steps) into the position to resume from (docs/epochs.md, "Resume").
        """
        coords = self._coordinates()
        info = get_worker_info()
        # The copy this epoch reads (asked once per epoch where this process
        # does not read it itself): resuming reads it too.
        if self.generation is None and self._read_generation is None:
            self._read_generation = self._epoch_generation()
        generation = self.generation or self._read_generation
        state: dict[str, Any] = {
            "dataset": self.dataset, "generation": generation,
            "order_version": ORDER_VERSION, "seed": self.seed,
            "epoch": self.epoch, "shuffle": self.shuffle, "block_rows": self.block_rows,
            "window_blocks": self.window_blocks,
            "shuffle_within_block": self.shuffle_within_block, "drop_last": self.drop_last,
            "start": self._start, "world_size": coords["world_size"],
            "batch_size": self.batch_size}
        if steps is not None or info is None:
            state["steps"] = int(steps if steps is not None else self._yielded)
        else:
            state["worker"] = {"id": info.id, "num_workers": info.num_workers,
                               "batches": self._yielded}
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Resumes from :meth:`state_dict`'s output: with any world size,
        batch size or worker count when the state has ``steps``, asking the
        head where that leaves the epoch; a DataLoader worker's own state
        resumes the same topology."""
        if state.get("order_version") != ORDER_VERSION:
            raise ValueError(f"state was saved with epoch-order version "
                             f"{state.get('order_version')}, not {ORDER_VERSION}")
        if state.get("dataset", self.dataset) != self.dataset:
            raise ValueError(f"state is for dataset {state['dataset']!r}, not {self.dataset!r}")
        if bool(state.get("drop_last", self.drop_last)) != self.drop_last:
            raise ValueError(f"state was saved with drop_last={state['drop_last']}; resume with "
                             "the same drop_last")
        self.seed = int(state["seed"])
        self.epoch = int(state["epoch"])
        self.shuffle = state.get("shuffle", self.shuffle)
        for key in ("block_rows", "window_blocks", "shuffle_within_block"):
            if key in state:
                setattr(self, key, state[key])
        self._yielded = 0
        self._first_batch = 0
        self._worker_state = None
        # The resumed epoch reads the copy it started on (an error names both
        # generations when the head has freed it); later epochs follow.
        self.generation = int(state["generation"]) if state.get("generation") else None
        self._read_generation = None
        if "steps" in state:
            self._start = 0
            plan = self._plan(num_workers=0, worker=0, start=int(state["start"]),
                              resume_steps=int(state["steps"]),
                              resume_world_size=int(state["world_size"]),
                              resume_batch_size=int(state["batch_size"]),
                              order_version=ORDER_VERSION)
            plan.pop("batch_size")
            _, shape = self.client().epoch_info(self.dataset, batch_size=self.batch_size,
                                                **plan)
            self._start = int(shape["start"])
            self._publish()
        else:
            self._start = int(state["start"])
            self._first_batch = int(state["worker"]["batches"])
            self._worker_state = state

    def _check_worker_topology(self, plan: dict[str, Any]) -> None:
        saved = self._worker_state
        assert saved is not None
        want = (saved["world_size"], saved["batch_size"], saved["worker"]["num_workers"],
                saved["worker"]["id"])
        have = (plan["world_size"], self.batch_size, plan["num_workers"], plan["worker"])
        if want != have:
            raise ValueError(
                f"this state was saved by DataLoader worker {want[3]} of {want[2]} at world "
                f"size {want[0]}, batch size {want[1]}, not worker {have[3]} of {have[2]} at "
                f"world size {have[0]}, batch size {have[1]}; a worker's state resumes the "
                "same topology only. To change it, save CacheDataset.state_dict(steps=...) "
                "from the training loop instead")


class DataCacheDataset(_ClusterClient, IterableDataset):
    """Kubeflow Trainer's data-cache dataset usage, over Kubeflow's protocol.

    Reads shard ``(worker * world_size + rank + seed) % total`` of
    ``total = num_workers * world_size`` from the head (PATH descriptors),
    re-chunks every record batch to ``batch_size`` rows and yields what
    :meth:`from_arrow_rb_to_tensor` yields for each chunk. Use with
    ``DataLoader(ds, batch_size=None)``. The head defaults to
    ``grpc://$TRAIN_JOB_NAME-cache-service:50051``. Like :class:`CacheDataset`
    it fails over when a data node dies: a broken stream goes on from the row
    it reached on another replica (load with replication >= 2), and every row
    of the shard is yielded once.
    """

    def __init__(self, head_uri: str | None = None, batch_size: int = 128, seed: int = 0,
                 token: str | None = None, tls_root_certs: str | bytes | None = None) -> None:
        super().__init__()
        if head_uri is None:
            head_uri = f"grpc://{os.environ['TRAIN_JOB_NAME']}-cache-service:50051"
        self.head_uri = head_uri
        self.batch_size = batch_size
        self.seed = seed
        self._token = token
        self._tls_root_certs = tls_root_certs

    def set_epoch(self, epoch: int) -> None:
        """Kubeflow's per-epoch "shuffle": rotate which shard a consumer reads."""
        self.seed += epoch

    def from_arrow_rb_to_tensor(self, chunk: pa.RecordBatch) -> Iterator[Any]:
        """Override to turn a chunk into samples; the default yields one dict of tensors."""
        yield batch_to_tensors(chunk)

    def __iter__(self) -> Iterator[Any]:
        rank, world_size = _live_coordinates() or getattr(self, "_dist", None) or \
            distributed_coordinates()
        info = get_worker_info()
        num_workers, worker = (info.num_workers, info.id) if info is not None else (1, 0)
        total = num_workers * world_size
        index = (worker * world_size + rank + self.seed) % total
        # Through Client like the other datasets (mapped errors; failover to
        # another replica, also mid-stream, from the row reached); one per
        # pass, closed after it, as Kubeflow's loop does.
        client = Client(self.head_uri, token=self._token, tls_root_certs=self._tls_root_certs)
        try:
            for rb in client.iter_kubeflow_shard(index, total):
                for start in range(0, rb.num_rows, self.batch_size):
                    yield from self.from_arrow_rb_to_tensor(rb.slice(start, self.batch_size))
        finally:
            client.close()


class CacheMapDataset(_ClusterClient, Dataset):
    """Map-style access to a cached dataset by global row id, for any sampler.

    ``ds[i]`` is one row as a dict; ``__getitems__`` (used by DataLoader for
    a whole sampled batch) fetches all rows in one gather per node. With
    ``batched=True`` it returns one dict of tensors for the batch; pair it
    with ``collate_fn=lambda batch: batch``.
    """

    def __init__(self, head_uri: str, dataset: str, columns: list[str] | None = None,
                 token: str | None = None, tls_root_certs: str | bytes | None = None,
                 batched: bool = False, client_options: dict[str, Any] | None = None) -> None:
        self.head_uri = head_uri
        self.dataset = dataset
        self.columns = columns
        self.batched = batched
        self.client_options = client_options
        self._token = token
        self._tls_root_certs = tls_root_certs
        self._client: Client | None = None
        self._len: int | None = None

    def __len__(self) -> int:
        if self._len is None:
            self._len = int(self.client().describe(self.dataset)["rows"])
        return self._len

    def _take(self, indices: list[int]) -> pa.Table:
        return self.client().take(self.dataset, indices, columns=self.columns)

    def __getitem__(self, index: int) -> dict[str, Any]:
        return self._take([int(index)]).to_pylist()[0]

    def __getitems__(self, indices: list[int]) -> Any:
        table = self._take([int(i) for i in indices])
        if self.batched:
            return batch_to_tensors(table.combine_chunks().to_batches()[0]) if table.num_rows \
                else {}
        return table.to_pylist()
