"""MixtureDataset: ``CacheDataset`` over a weighted mixture of cached
datasets (``CacheDataset(head, {"web": 0.6, "code": 0.4}, ...)`` makes one).

The reading is icefloe._mixture's; this class keeps the job's place in it
(which mixture epoch, where every source stood when it began) across
set_epoch, DataLoader workers and resume.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from torch.utils.data import get_worker_info

from ._cache_dataset import ORDER_VERSION, CacheDataset
from ._epoch_plan import EpochPlan
from ._mixture import Anchor, Mixture, Resolved, as_weights, iter_batches, resolve
from ._mixture_budget import BudgetResolved, check_budget, iter_budget_batches, resolve_budget
from ._torch_cluster import distributed_coordinates, live_coordinates
from .errors import InvalidArgument


class MixtureDataset(CacheDataset):
    """This consumer's batches of each epoch of a weighted mixture.

    ``dataset`` is ``{name: weight}`` or a :class:`icefloe.Mixture`;
    ``mix_by``, ``token_column``, ``epoch_source``, ``epoch_total``,
    ``per_batch`` and ``run_steps`` are the Mixture's (used when ``dataset``
    is a dict). Every batch holds each source's share of ``batch_size`` rows,
    or with ``per_batch`` is one source's (docs/epochs.md, "Mixtures");
    every other argument means what it means for one dataset, for every
    source: with ``drop_last`` each source drops the tail of its epoch that
    does not fill a step, without it a step reads that tail and the first
    rows of the source's next epoch. ``follow`` must be ``"latest"``.

    With ``batch_tokens`` (and ``token_column``) instead of ``batch_size``
    the weights count tokens (``mix_by`` defaults to ``"tokens"``) and each
    source is cut into token-budget batches: mixed batches (``varlen=True``)
    give each source its share of the budget at every step, ``per_batch``
    steps read one source with the whole budget (docs/epochs.md, section 7).
    """

    def __init__(self, head_uri: str, dataset: Mixture | Mapping[str, float],
                 batch_size: int | None = None, *args: Any, mix_by: str | None = None,
                 token_column: str | None = None, epoch_source: str | None = None,
                 epoch_total: int | None = None, per_batch: bool = False,
                 run_steps: int | None = None, **kwargs: Any) -> None:
        if mix_by is None:
            mix_by = "tokens" if kwargs.get("batch_tokens") is not None else "rows"
        mixture = dataset if isinstance(dataset, Mixture) else Mixture(
            as_weights(dataset), mix_by=mix_by, token_column=token_column,
            epoch_source=epoch_source, epoch_total=epoch_total, per_batch=per_batch,
            run_steps=run_steps)
        super().__init__(head_uri, mixture.label(), batch_size, *args,
                         token_column=token_column or mixture.token_column, **kwargs)
        if self.token_budget is not None:
            check_budget(mixture, self.token_budget)
        if self.token_budget is not None and not self.drop_last:
            raise InvalidArgument("a mixture of token-budget batches reads every source with "
                                  "drop_last=True")
        if self.follow == "pinned":
            # Each source epoch is bound to its own copy by the head; pinning
            # every source to one generation is not done yet.
            raise InvalidArgument('follow="pinned" is not supported for mixtures yet: each '
                                  "source epoch reads the copy the head binds it to")
        self.mixture = mixture
        self._anchor: Anchor | None = None  # None: the mixture's start
        self._resolved: Resolved | None = None

    # -- the job's place -----------------------------------------------------

    def _world(self) -> tuple[int, int]:
        return live_coordinates() or self._dist or distributed_coordinates()

    def _resolve(self) -> Resolved:
        """The sources (described once per process and world size; bad
        sources are refused here, before the first batch)."""
        _, world_size = self._world()
        columns = list(self.columns) if self.columns is not None else None
        if (self._resolved is None or self._resolved.sources[0].world_size != world_size
                or getattr(self._resolved, "seed", self.seed) != self.seed):
            if self.token_budget is not None:  # the plans depend on the seed
                self._resolved = resolve_budget(self.client(), self.mixture, self.token_budget,
                                                world_size, columns, self.seed, self.epoch)
            else:
                self._resolved = resolve(self.client(), self.mixture, self.batch_size,
                                         world_size, columns, self.drop_last)
        return self._resolved

    def _base(self) -> tuple[Resolved, Anchor]:
        resolved = self._resolve()
        return resolved, resolved.base_of(self.epoch, self._anchor)

    def set_epoch(self, epoch: int) -> None:
        """Selects the mixture epoch to read next; every source goes on from
        where the previous epochs left it."""
        if epoch != self.epoch:
            self._first_batch = 0
            self._worker_state = None
            self.epoch = epoch
            self._publish()
        self._yielded = 0
        self._dist = live_coordinates() or self._dist

    def _publish(self) -> None:
        if self._shared is None:
            return
        self._version += 1
        self._shared.write({"version": self._version, "epoch": self.epoch, "seed": self.seed,
                            "anchor": self._anchor.to_json() if self._anchor else None})

    def _adopt_shared_progress(self) -> None:
        shared = self._shared.read() if self._shared is not None else None
        if shared is None or shared["version"] == self._version:
            return
        self._version = shared["version"]
        self.epoch, self.seed = int(shared["epoch"]), int(shared["seed"])
        self._anchor = Anchor.from_json(shared["anchor"]) if shared["anchor"] else None
        self._first_batch = 0
        self._worker_state = None

    def _plan(self, **overrides: Any) -> EpochPlan:
        return super()._plan(generation=None, **overrides)

    # -- reading -------------------------------------------------------------

    def __len__(self) -> int:
        """Batches this rank reads in the current mixture epoch."""
        resolved, at = self._base()
        return resolved.epoch_steps(at)

    def __iter__(self) -> Iterator[Any]:
        if get_worker_info() is not None:
            self._adopt_shared_progress()
        plan = self._plan()
        if self._worker_state is not None:
            self._check_worker_topology(plan)
        resolved, at = self._base()
        steps = resolved.epoch_steps(at)
        prefetch = self.prefetch
        if prefetch is None:
            prefetch = 2 if get_worker_info() is None else 0
        self._yielded = self._first_batch
        read = iter_budget_batches if isinstance(resolved, BudgetResolved) else iter_batches
        for batch in read(self.client(), resolved, at, steps, plan, prefetch,  # type: ignore[arg-type]
                          self.job, self._first_batch):
            self._yielded += 1
            yield self.to_tensors(batch)

    # -- resume --------------------------------------------------------------

    def state_dict(self, steps: int | None = None) -> dict[str, Any]:
        """Every source's position (its epoch and the positions of its order
        consumed) after ``steps`` steps of this epoch (default: the batches
        this process yielded), or inside a DataLoader worker its own batch
        count from the epoch's start (same topology only), as for one
        dataset (docs/epochs.md, "Resume")."""
        world_size = self._world()[1]
        resolved, at = self._base()
        info = get_worker_info()
        state: dict[str, Any] = {
            "mixture": dict(self.mixture.weights), "mix_by": self.mixture.mix_by,
            "per_batch": self.mixture.per_batch,
            "order_version": ORDER_VERSION, "seed": self.seed, "epoch": self.epoch,
            "shuffle": self.shuffle, "block_rows": self.block_rows,
            "window_blocks": self.window_blocks,
            "shuffle_within_block": self.shuffle_within_block, "drop_last": self.drop_last,
            "world_size": world_size, "batch_size": self.batch_size}
        if self.token_budget is not None:  # positions count batches of each source epoch
            state["token_budget"] = self.token_budget.state()
        if steps is not None or info is None:
            k = int(steps if steps is not None else self._yielded)
            if k > resolved.epoch_steps(at):
                raise InvalidArgument(f"steps={k} is past the end of mixture epoch "
                                      f"{self.epoch} ({resolved.epoch_steps(at)} steps)")
            anchor = resolved.after(at, k)
            state["steps"] = k
        else:
            anchor = at
            state["worker"] = {"id": info.id, "num_workers": info.num_workers,
                               "batches": self._yielded}
        state.update(anchor.to_json())
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Resumes from :meth:`state_dict`'s output: any world size, batch
        size or worker count from a state with ``steps`` (every source from
        its recorded position); a worker's own state, the same topology."""
        if state.get("order_version") != ORDER_VERSION:
            raise ValueError(f"state was saved with epoch-order version "
                             f"{state.get('order_version')}, not {ORDER_VERSION}")
        if "mixture" not in state:
            raise ValueError(f"state is for dataset {state.get('dataset')!r}, not the mixture "
                             f"{self.mixture.label()!r}")
        if bool(state.get("per_batch")) != self.mixture.per_batch:
            raise ValueError(f"state was saved with per_batch={bool(state.get('per_batch'))}; "
                             "resume with the same per_batch")
        if bool(state.get("drop_last", True)) != self.drop_last:
            raise ValueError(f"state was saved with drop_last={state.get('drop_last', True)}; "
                             "resume with the same drop_last")
        budget = self.token_budget.state() if self.token_budget is not None else None
        if state.get("token_budget") != budget:
            raise ValueError(f"state was saved with token budget {state.get('token_budget')}, "
                             f"not {budget}; resume with the same budget")
        if set(state["sources"]) != set(self.mixture.names):
            raise ValueError(f"state is for the mixture of {', '.join(state['sources'])}, "
                             f"not of {', '.join(self.mixture.names)}")
        self._restore_order(state)
        self._anchor = Anchor.from_json(state)
        if "worker" in state:
            self._first_batch = int(state["worker"]["batches"])
            self._worker_state = state
        self._publish()


CacheDataset.mixture_class = MixtureDataset
