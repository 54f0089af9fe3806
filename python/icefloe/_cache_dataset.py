"""CacheDataset: this consumer's batches of each epoch of a cached dataset."""

from __future__ import annotations

import multiprocessing
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
from torch.utils.data import IterableDataset, get_worker_info

from . import _protocol
from ._epoch_plan import EpochPlan
from ._pieces import apply_many
from ._tensors import batch_to_tensors, batches_to_tensors
from ._token_batches import TokenBudget, consumer_batches, epoch_plan
from ._torch_cluster import ClusterClient, SharedProgress, distributed_coordinates, live_coordinates
from .client import Client

# The epoch-order version this package's states are written for (plan.h's
# kEpochOrderVersion, through _fields.json); the head refuses to resume a
# state of another.
ORDER_VERSION: int = _protocol.constants()["epoch_order_version"]
SHUFFLES: tuple[str, ...] = tuple(_protocol.fields("epoch descriptor")["shuffle"]["choices"])
_SHARED_KEYS = ("epoch", "seed", "shuffle", "block_rows", "window_blocks",
                "shuffle_within_block", "generation")
FOLLOWS = ("latest", "pinned")  # the generation policies, CacheDataset(follow=)


class CacheDataset(ClusterClient, IterableDataset):
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

    With ``batch_tokens=T`` (instead of ``batch_size``) and ``token_column``
    (a ``list<int32>`` column), batches vary in rows and are bounded by
    tokens: ``rows x longest row <= T`` (with ``varlen``, total tokens), rows
    grouped by length, every rank the same steps with alike tokens
    (``balance="sq"``: alike sums of squared lengths), planned on every rank
    from the row lengths the nodes send; rows longer than T are refused
    unless ``too_long="drop"``. ``shuffle`` and its tuning do not apply
    (docs/epochs.md, section 7).

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

    Tables change: ``follow`` is the generation policy (not the head's
    ``--follow``, which reloads changed tables). With ``follow="latest"``
    (the default) each epoch reads the newest generation of the dataset (a
    refresh, ``Client.refresh``, lands at the next epoch: every rank and
    worker finishes the epoch on the generation it started, which the head
    keeps while it is read). With
    ``follow="pinned"`` every epoch reads the generation the first one read
    (an error names both once the head has freed it; to keep a snapshot for
    good, load it under a name of its own). :meth:`state_dict` records the
    generation; resuming an epoch reads that one.

    When a data node dies mid-epoch the epoch goes on, exactly, from another
    replica or once the head has repaired the rows (:meth:`Client.iter_epoch`);
    ``client_options`` (e.g. ``{"failover_timeout_s": 300}``) are passed to
    each process's :class:`Client`.
    """

    # What several datasets with weights make: icefloe._mixture_dataset's
    # MixtureDataset, which sets this when imported (icefloe.torch imports it).
    mixture_class: type[CacheDataset] | None = None

    def __new__(cls, *args: Any, **kwargs: Any) -> CacheDataset:
        dataset = args[1] if len(args) > 1 else kwargs.get("dataset")
        if cls is CacheDataset and dataset is not None and not isinstance(dataset, str):
            if CacheDataset.mixture_class is None:
                raise TypeError("import icefloe.torch for CacheDataset over a mixture")
            return super().__new__(CacheDataset.mixture_class)
        return super().__new__(cls)

    def __init__(
        self,
        head_uri: str,
        dataset: str,
        batch_size: int | None = None,
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
        batch_tokens: int | None = None,
        token_column: str | None = None,
        varlen: bool = False,
        balance: str = "tokens",
        too_long: str = "refuse",
    ) -> None:
        super().__init__()
        # Token-budget batches (docs/epochs.md): rows per batch vary, tokens are bounded.
        self.token_budget = None if batch_tokens is None else TokenBudget(
            batch_tokens, token_column or "", varlen=varlen, balance=balance, too_long=too_long)
        if self.token_budget is not None and batch_size is not None:
            raise ValueError("batch_size and batch_tokens exclude each other")
        if self.token_budget is None and (batch_size is None or batch_size < 1):
            raise ValueError("batch_size must be positive (or give batch_tokens)")
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
        self._dist = live_coordinates()
        self._shared = SharedProgress()
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

    def _adopt_shared_progress(self) -> None:
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
        self._dist = live_coordinates() or self._dist

    def to_tensors(self, batch: pa.RecordBatch) -> Any:
        """Turns one record batch into what the loop receives; override freely."""
        return batch_to_tensors(batch)

    # -- plan ----------------------------------------------------------------

    def _plan(self, **overrides: Any) -> EpochPlan:
        """This consumer's plan of the current epoch (this rank, this
        DataLoader worker, from the resume point), with ``overrides``."""
        rank, world_size = live_coordinates() or self._dist or distributed_coordinates()
        info = get_worker_info()
        num_workers, worker = (info.num_workers, info.id) if info is not None else (0, 0)
        return EpochPlan(
            batch_size=self.batch_size, seed=self.seed, epoch=self.epoch, shuffle=self.shuffle,
            block_rows=self.block_rows, window_blocks=self.window_blocks,
            shuffle_within_block=self.shuffle_within_block, world_size=world_size, rank=rank,
            num_workers=num_workers, worker=worker, drop_last=self.drop_last, start=self._start,
            # Projected by the nodes: other columns never cross the wire.
            columns=tuple(self.columns) if self.columns is not None else None,
            generation=self.generation).replace(**overrides)

    def _epoch_generation(self) -> int:
        """The generation the current epoch reads (the head's binding of it,
        or the pinned one; with ``batch_tokens``, the copy its plan's row
        lengths come from)."""
        if self.token_budget is not None:
            budget = self.token_budget
            key = (self.seed, self.epoch, self._plan(num_workers=0, worker=0).world_size)
            codes = self.client().row_length_codes(self.dataset, budget.token_column,
                                                   budget.batch_tokens, self.generation,
                                                   epoch_key=key)
            return int(codes.generation)
        _, shape = self.client().epoch_info(self.dataset, self._plan(num_workers=0, worker=0))
        return int(shape["generation"])

    def __len__(self) -> int:
        """Batches this rank reads in the current epoch (from the resume point)."""
        if self.token_budget is not None:
            p = self._plan(num_workers=0, worker=0)
            plan = epoch_plan(self.client(), self.dataset, self.token_budget, self.seed,
                              self.epoch, self.generation, p.world_size)
            return len(consumer_batches(plan, p.world_size, p.rank, 0, 0, self._start,
                                        self.drop_last))
        _, shape = self.client().epoch_info(self.dataset, self._plan(num_workers=0, worker=0))
        return int(shape["steps"])

    def token_epoch_summary(self) -> dict[str, int]:
        """With ``batch_tokens``: what the current epoch reads and leaves, for
        this job (its world size, from the resume point): ``steps`` per rank,
        ``batches`` of the epoch's sequence, ``dropped_rows`` (``drop_last``:
        the partial batches and the steps' remainder), ``padding_batches``
        (without it: batches read twice to fill the last step) and
        ``too_long_rows`` (dropped with ``too_long="drop"``)."""
        if self.token_budget is None:
            raise ValueError("token_epoch_summary needs batch_tokens")
        world_size = self._plan().world_size
        plan = epoch_plan(self.client(), self.dataset, self.token_budget, self.seed, self.epoch,
                          self.generation, world_size)
        steps = plan.steps(world_size, self._start, self.drop_last)
        left = max(0, plan.num_batches - self._start)
        return {"steps": steps, "batches": plan.num_batches,
                "dropped_rows": plan.dropped_rows(world_size, self._start) if self.drop_last
                else 0,
                "padding_batches": 0 if self.drop_last else steps * world_size - left,
                "too_long_rows": plan.too_long_rows}

    def __iter__(self) -> Iterator[Any]:
        if get_worker_info() is not None:
            self._adopt_shared_progress()
        plan = self._plan(first_batch=self._first_batch)
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
        if self.token_budget is not None:
            # Planned from the copy a resume names (else the current one);
            # a refresh mid-epoch changes nothing it reads.
            def planned(shape: dict[str, Any]) -> None:
                self._read_generation = int(shape["generation"])

            for item in self.client().iter_epoch(
                    self.dataset, plan=plan, prefetch=prefetch, transform=prepare,
                    job=self.job, on_shape=planned, **self.token_budget.state()):
                self._yielded += 1
                yield item if default else self.to_tensors(item)
            return
        if self.follow == "pinned" and self.generation is None:
            self.generation = self._epoch_generation()
            plan = plan.replace(generation=self.generation)

        def read(shape: dict[str, Any]) -> None:
            self._read_generation = int(shape["generation"])

        for item in self.client().iter_epoch(self.dataset, plan=plan, prefetch=prefetch,
                                              transform=prepare, job=self.job, on_shape=read):
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
        world_size = self._plan().world_size
        info = get_worker_info()
        if self.token_budget is not None:
            return self._token_state(world_size, steps, info)
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
            "start": self._start, "world_size": world_size,
            "batch_size": self.batch_size}
        self._record_progress(state, steps, info)
        return state

    def _record_progress(self, state: dict[str, Any], steps: int | None, info: Any) -> None:
        """A state's progress: ``steps`` (given, or the batches yielded) where
        any topology may resume it, else this DataLoader worker's batches."""
        if steps is not None or info is None:
            state["steps"] = int(steps if steps is not None else self._yielded)
        else:
            state["worker"] = {"id": info.id, "num_workers": info.num_workers,
                               "batches": self._yielded}

    def _restore_order(self, state: dict[str, Any]) -> None:
        """The epoch order a state was saved with (seed, epoch, shuffle and
        its tuning), and nothing read of it yet."""
        self.seed = int(state["seed"])
        self.epoch = int(state["epoch"])
        self.shuffle = state.get("shuffle", self.shuffle)
        for key in ("block_rows", "window_blocks", "shuffle_within_block"):
            if key in state:
                setattr(self, key, state[key])
        self._yielded = 0
        self._first_batch = 0
        self._worker_state = None

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
        if self.token_budget is not None or "token_budget" in state:
            self._load_token_state(state)
            return
        self._restore_order(state)
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
            _, shape = self.client().epoch_info(self.dataset, plan)
            self._start = int(shape["start"])
            self._publish()
        else:
            self._start = int(state["start"])
            self._first_batch = int(state["worker"]["batches"])
            self._worker_state = state

    def _token_state(self, world_size: int, steps: int | None, info: Any) -> dict[str, Any]:
        """state_dict of token-budget batches: the position is a count of
        batches of the epoch's world-size-independent sequence."""
        assert self.token_budget is not None
        # The copy the epoch is planned from (where this process does not
        # read it: the current one's codes, kept by the client): a resume
        # plans from it and reads it.
        generation = self.generation or self._read_generation or epoch_plan(
            self.client(), self.dataset, self.token_budget, self.seed,
            self.epoch, None, world_size).lengths.generation
        state: dict[str, Any] = {
            "dataset": self.dataset, "generation": generation,
            "order_version": ORDER_VERSION, "seed": self.seed,
            "epoch": self.epoch, "drop_last": self.drop_last,
            "token_budget": self.token_budget.state(), "start": self._start,
            "world_size": world_size}
        self._record_progress(state, steps, info)
        return state

    def _load_token_state(self, state: dict[str, Any]) -> None:
        budget = self.token_budget.state() if self.token_budget is not None else None
        if state.get("token_budget") != budget:
            raise ValueError(f"state was saved with token budget {state.get('token_budget')}, "
                             f"not {budget}; resume with the same budget")
        self._restore_order(state)
        # The resumed epoch plans from and reads the copy it started on (an
        # error names both generations once the head freed it); later
        # epochs follow.
        self.generation = int(state["generation"]) if state.get("generation") else None
        self._read_generation = None
        if "steps" in state:  # any world size: the sequence is the same
            self._start = int(state["start"]) + int(state["steps"]) * int(state["world_size"])
        else:
            self._start = int(state["start"])
            self._first_batch = int(state["worker"]["batches"])
            self._worker_state = state
        self._publish()

    def _check_worker_topology(self, plan: EpochPlan) -> None:
        saved = self._worker_state
        assert saved is not None
        want = (saved["world_size"], saved.get("batch_size"), saved["worker"]["num_workers"],
                saved["worker"]["id"])
        have = (plan.world_size, plan.batch_size, plan.num_workers, plan.worker)
        if want != have:
            raise ValueError(
                f"this state was saved by DataLoader worker {want[3]} of {want[2]} at world "
                f"size {want[0]}, batch size {want[1]}, not worker {have[3]} of {have[2]} at "
                f"world size {have[0]}, batch size {have[1]}; a worker's state resumes the "
                "same topology only. To change it, save CacheDataset.state_dict(steps=...) "
                "from the training loop instead")
