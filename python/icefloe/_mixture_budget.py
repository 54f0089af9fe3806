"""Token-budget batches over a weighted mixture (docs/epochs.md, sections 6
and 7): ``batch_tokens`` with ``{name: weight}``.

One planner: each source is cut by ``_token_batches.plan_epoch``, from its
row length codes made for the job's budget T (its exact lengths where the
codes cannot tell a share's too-long rows), once per source epoch and
process (:data:`PLANS`), into its own world-size-independent sequence of
batches, and a mixture step takes ``world_size`` consecutive batches of it,
rank r the r-th, as a step of one dataset does. Two ways to combine the
sources:

* mixed batches (needs ``varlen=True``): source s is planned with its share
  ``T_s`` of the budget (``batch_tokens`` apportioned by the weights, which
  count tokens, by largest remainder), and every step takes one batch of
  every source; a rank's batch is their concatenation, at most
  ``sum(T_s) = T`` tokens. Padded size is not bounded this way (one
  source's long rows pad another's), so a padded budget is refused.
* ``per_batch``: every source is planned with the whole budget T and runs of
  steps each read one source (``_mixture.Runs``), the runs' counts
  apportioned by weight over the mean tokens of the source's full batches,
  so the shares hold in tokens; padded or varlen, as for one dataset.

A source's place is a ``_mixture.Position``: its epoch and how many batches
of that epoch's sequence the job consumed (a count any world size resumes).
``Resolved``'s arithmetic (``epoch_steps``, ``after``, ``base_of``) runs
unchanged over :class:`BudgetSource`, whose epochs differ in length (each
source epoch's plan has its own number of full batches). Rows are read with
``Client.take``, a group of steps at a time, the next group prefetched on a
thread, as one dataset's token-budget epoch is, and reported to the head
per source (``_stall.SourcesMeter``).
"""

from __future__ import annotations

import dataclasses
import threading
import weakref
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import pyarrow as pa

from . import _stall
from ._epoch_plan import EpochPlan
from ._length_codes import LengthCodes
from ._mixture import (
    PATTERN_RUNS,
    Anchor,
    Mixture,
    Position,
    Resolved,
    Runs,
    apportion,
    as_weights,
    describe_sources,
    pattern_of,
)
from ._token_batches import TokenBatchPlan, TokenBudget, budget_of, plan_epoch, ramped_groups
from .errors import InvalidArgument, NotFound

_ROWS_PER_TAKE = 65536  # rows asked of the nodes at once (several steps per take)
_SHARE_ROUNDS = 3  # mixed batches: rounds of shares fitted to the sources' fills
# Source epoch plans a process keeps (the latest used), up to this many
# batches in all (a plan holds ~16 bytes a batch and 1/16 a row): a small
# source that repeats many times a mixture epoch keeps all its plans.
_MAX_PLAN_BATCHES = 1 << 22
_MAX_PLANS = 256
_MAX_SUMMARIES = 4096  # source epochs whose full batches and mean tokens a process keeps


class _Plans:
    """The source epoch plans of this process, by (the rows' lengths or
    codes, budget, seed, epoch): each planned once, the latest
    ``_MAX_PLANS`` kept, and of ``_MAX_SUMMARIES`` more their full batches
    and mean tokens, all that fitting shares and counting a mixture epoch's
    steps needs (so a process that resolves the mixture again, or reads
    epoch after epoch, plans only what it reads that is not kept). Plans
    are kept up to ``_MAX_PLAN_BATCHES`` batches in all (the latest one
    whatever its size) and ``_MAX_PLANS``. The lengths are held by a weak
    reference and compared by identity: an entry is never another copy's
    (a copy's codes are one object per client while the client keeps
    them). Thread-safe; two threads that miss at once may both plan."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._plans: OrderedDict[tuple[Any, ...], tuple[Any, TokenBatchPlan]] = OrderedDict()
        self._summaries: OrderedDict[tuple[Any, ...], tuple[Any, int, float]] = OrderedDict()

    @staticmethod
    def _key(lengths: Any, budget: TokenBudget, seed: int, epoch: int) -> tuple[Any, ...]:
        return (id(lengths), budget, int(seed), int(epoch))

    def plan(self, lengths: Any, budget: TokenBudget, seed: int, epoch: int) -> TokenBatchPlan:
        """The source epoch's plan (``plan_epoch``'s), planned once while kept."""
        key = self._key(lengths, budget, seed, epoch)
        with self._lock:
            kept = self._plans.get(key)
            if kept is not None and kept[0]() is lengths:
                self._plans.move_to_end(key)
                return kept[1]
        return self._planned(key, lengths, budget, seed, epoch)[0]

    def _planned(self, key: tuple[Any, ...], lengths: Any, budget: TokenBudget, seed: int,
                 epoch: int) -> tuple[TokenBatchPlan, int, float]:
        """Plans the source epoch and keeps it: the plan, its full batches
        and their mean tokens."""
        plan = plan_epoch(lengths, budget, seed=seed, epoch=epoch)
        full = plan.order[:plan.num_full]
        mean = float(plan.tokens[full].mean()) if len(full) else 0.0
        with self._lock:
            self._plans[key] = (weakref.ref(lengths), plan)
            self._summaries[key] = (weakref.ref(lengths), plan.num_full, mean)
            self._summaries.move_to_end(key)
            while len(self._plans) > 1 and (
                    len(self._plans) > _MAX_PLANS
                    or sum(p.num_batches for _, p in self._plans.values()) > _MAX_PLAN_BATCHES):
                self._plans.popitem(last=False)
            while len(self._summaries) > _MAX_SUMMARIES:
                self._summaries.popitem(last=False)
        return plan, plan.num_full, mean

    def summary(self, lengths: Any, budget: TokenBudget, seed: int,
                epoch: int) -> tuple[int, float]:
        """The source epoch's full batches and their mean tokens."""
        key = self._key(lengths, budget, seed, epoch)
        with self._lock:
            kept = self._summaries.get(key)
            if kept is not None and kept[0]() is lengths:
                self._summaries.move_to_end(key)
                return kept[1], kept[2]
        return self._planned(key, lengths, budget, seed, epoch)[1:]


PLANS = _Plans()


@dataclasses.dataclass(eq=False)
class BudgetSource:
    """One source as a job of ``world_size`` reads it with a token budget:
    its rows' lengths as the planner takes them (the codes made for the
    job's budget, or the exact lengths), the dataset generation they are
    of, its budget (mixed batches: its share), and the mean tokens of its
    full batches (source epoch 0), which ``Resolved`` counts an epoch's
    tokens with. Duck-types ``_mixture.Source``, positions counting batches
    of the source epoch's sequence instead of rows. Plans come from the
    process's :data:`PLANS`."""

    name: str
    lengths: LengthCodes | np.ndarray
    generation: int | None
    budget: TokenBudget
    seed: int
    world_size: int
    mean_tokens: float = 1.0

    @property
    def step_positions(self) -> int:
        return self.world_size

    def plan(self, epoch: int) -> TokenBatchPlan:
        """Source epoch ``epoch``'s sequence (the public planner's)."""
        return PLANS.plan(self.lengths, self.budget, self.seed, epoch)

    def full(self, epoch: int) -> int:
        """Full batches of source epoch ``epoch`` (planned once, then remembered)."""
        return PLANS.summary(self.lengths, self.budget, self.seed, epoch)[0]

    def left(self, at: Position) -> int:
        """Steps left in the source epoch ``at`` is in (drop_last: the
        partial batches and full ones that do not fill a step are not read)."""
        return max(0, (self.full(at.epoch) - at.position) // self.world_size)

    def normal(self, at: Position) -> Position:
        """``at``, or the next epoch's start where no step is left."""
        if self.left(at) > 0:
            return at
        at = Position(at.epoch + 1, 0)
        if self.left(at) == 0:  # every source epoch plans about alike: never on a checked source
            raise InvalidArgument(f"mixture source {self.name!r}: its epoch {at.epoch} has "
                                  f"{self.full(at.epoch)} full batches, fewer than one step "
                                  f"reads ({self.world_size} ranks)")
        return at

    def advance(self, at: Position, steps: int) -> Position:
        """Where the source stands ``steps`` steps after ``at``."""
        at = self.normal(at)
        while steps >= self.left(at):  # bounded: each pass ends a source epoch
            steps -= self.left(at)
            at = Position(at.epoch + 1, 0)
            if steps == 0:
                return at
            at = self.normal(at)
        return Position(at.epoch, at.position + steps * self.world_size)

    def segments(self, at: Position, steps: int) -> list[tuple[Position, int, int]]:
        """The next ``steps`` steps as (source epoch start, first step, steps)."""
        out, t = [], 0
        while t < steps:
            at = self.normal(at)
            n = min(self.left(at), steps - t)
            out.append((at, t, n))
            t += n
            at = Position(at.epoch, at.position + n * self.world_size)
        return out


@dataclasses.dataclass(frozen=True)
class BudgetResolved(Resolved):
    """A token-budget mixture as one job reads it: ``Resolved`` over
    :class:`BudgetSource`, with the job's budget and seed."""

    budget: TokenBudget | None = None
    seed: int = 0


def check_budget(mixture: Mixture, budget: TokenBudget) -> None:
    """Refuses what a token-budget mixture cannot keep, before anything is read."""
    if mixture.mix_by != "tokens":
        raise InvalidArgument('a token-budget mixture weighs tokens: mix_by="tokens" (the '
                              f'weights count tokens of token_column), not {mixture.mix_by!r}')
    if mixture.token_column != budget.token_column:
        raise InvalidArgument(f"the mixture counts tokens of {mixture.token_column!r}, the "
                              f"budget of {budget.token_column!r}: one token_column for both")
    if not mixture.per_batch and not budget.varlen:
        raise InvalidArgument(
            "mixed token-budget batches bound a batch's total tokens (each source its share "
            "of batch_tokens), not its padded size: pass varlen=True, or per_batch=True for "
            "batches of one source padded within batch_tokens")


def resolve_budget(client: Any, mixture: Mixture, budget: TokenBudget, world_size: int,
                   columns: list[str] | None, seed: int, epoch: int = 0) -> BudgetResolved:
    """The mixture for this job: every source described and its row length
    codes for the job's budget fetched once (``Client.row_length_codes``,
    as one dataset's epochs plan; of the copy the head binds the job's
    mixture epoch ``epoch`` to on that source, so every rank resolving it
    plans from one copy of each source), its budget set and its first epoch
    planned (rows longer than its budget, a share of no token and too few
    batches for one step are refused, naming the source), then per_batch's
    runs apportioned."""
    check_budget(mixture, budget)
    # Each source's rows are its codes' (of the copy the head bound the
    # epoch to, which may be older than the one described).
    _, schemas = describe_sources(client, mixture, columns)
    names = mixture.names
    total_tokens = budget.batch_tokens
    weights = [mixture.weights[n] for n in names]
    key = (int(seed), int(epoch), int(world_size))
    lengths = {name: _SourceLengths(client, name, budget.token_column, total_tokens, key)
               for name in names}
    if mixture.per_batch:
        sources = _planned(mixture, budget, lengths, [total_tokens] * len(names), seed,
                           world_size)
    else:
        # A source's batches fill its share only so far (rows of a length L
        # fill T_s // L x L of T_s): shares ∝ weight / fill, so that the
        # tokens read hold the weights; the fills move with the shares, so
        # a few rounds (each plans every source's first epoch with a share
        # not planned before: PLANS keeps what was).
        shares = apportion([w / sum(weights) for w in weights], total_tokens)
        for _ in range(_SHARE_ROUNDS):
            sources = _planned(mixture, budget, lengths, shares, seed, world_size)
            rates = [w * s.budget.batch_tokens / s.mean_tokens
                     for w, s in zip(weights, sources, strict=True)]
            better = apportion([r / sum(rates) for r in rates], total_tokens)
            if better == shares:
                break
            shares = better
        else:
            sources = _planned(mixture, budget, lengths, shares, seed, world_size)
    runs = None
    if mixture.per_batch:
        rates = [w / s.mean_tokens for w, s in zip(weights, sources, strict=True)]
        counts = apportion([r / sum(rates) for r in rates], PATTERN_RUNS)
        for name, count in zip(names, counts, strict=True):
            if count == 0:
                raise InvalidArgument(f"mixture source {name!r} gets no run of {PATTERN_RUNS} "
                                      f"(weight {mixture.weights[name]}): raise its weight")
        runs = Runs(pattern_of(counts), mixture.run_steps or 1)
    return BudgetResolved(mixture, tuple(sources), total_tokens,  # type: ignore[arg-type]
                          schemas[names[0]], runs, budget, seed)


class _SourceLengths:
    """A source's row lengths as its plans take them: the codes made for the
    job's budget T (a byte a row, a host's one copy), which plan any share
    of T whose too-long rows they tell (``LengthCodes.tells``; see
    ``plan_epoch``), else the exact lengths (2-4 bytes a row, fetched when
    first needed, of the codes' copy), with the generation either is of.
    ``epoch_key``: the (seed, epoch, world_size) the head binds the codes'
    copy by (``Client.row_length_codes``)."""

    def __init__(self, client: Any, name: str, column: str, batch_tokens: int,
                 epoch_key: tuple[int, int, int] | None = None) -> None:
        self.client, self.name, self.column = client, name, column
        self.codes = _fetched(name, lambda: client.row_length_codes(
            name, column, batch_tokens, epoch_key=epoch_key))
        self.rows = len(self.codes.codes)
        self._exact: np.ndarray | None = None

    def for_budget(self, budget: TokenBudget) -> tuple[LengthCodes | np.ndarray, int | None]:
        """What plans ``budget`` (a share of T, or T), and its generation."""
        if self.codes.tells(budget.batch_tokens):
            return self.codes, self.codes.generation
        if self._exact is None:
            # Of the codes' copy (a replaced one while the head keeps it).
            exact = _fetched(self.name, lambda: self.client.row_lengths(
                self.name, self.column, self.codes.generation or None))
            if len(exact) != self.rows:
                raise InvalidArgument(
                    f"mixture source {self.name!r}: {len(exact)} row lengths of generation "
                    f"{self.codes.generation} for its codes' {self.rows} rows")
            self._exact = exact
        return self._exact, self.codes.generation


def _fetched(name: str, fetch: Any) -> Any:
    try:
        return fetch()
    except (InvalidArgument, NotFound) as exc:
        raise type(exc)(f"mixture source {name!r}: {exc}") from exc


def _planned(mixture: Mixture, budget: TokenBudget, lengths: dict[str, _SourceLengths],
             shares: list[int], seed: int, world_size: int) -> list[BudgetSource]:
    """Each source with its budget (``shares``), its first epoch planned:
    rows longer than its budget, a share of no token and too few batches
    for one step are refused, naming the source."""
    total_tokens = budget.batch_tokens
    sources = []
    for name, share in zip(mixture.names, shares, strict=True):
        if share == 0:
            raise InvalidArgument(f"mixture source {name!r} gets no token of batch_tokens="
                                  f"{total_tokens} (weight {mixture.weights[name]}): raise "
                                  "its weight or batch_tokens")
        mine = dataclasses.replace(budget, batch_tokens=share)
        planned_from, generation = lengths[name].for_budget(mine)
        source = BudgetSource(name, planned_from, generation, mine, seed, world_size)
        try:
            num_full, mean_tokens = PLANS.summary(planned_from, mine, seed, 0)
        except InvalidArgument as exc:
            what = "budget" if mixture.per_batch else "share of the budget"
            raise InvalidArgument(f"mixture source {name!r} (its {what}: {share} of "
                                  f"{total_tokens} tokens): {exc}") from exc
        if num_full < world_size:
            raise InvalidArgument(
                f"mixture source {name!r} makes {num_full} full batches of {share} "
                f"tokens an epoch, fewer than one step reads of it ({world_size} ranks)")
        source.mean_tokens = mean_tokens
        sources.append(source)
    return sources


Plans = dict[tuple[int, int], TokenBatchPlan]  # (source index, source epoch) -> its plan


def _consumer_steps(resolved: BudgetResolved, at: Anchor, steps: int, plan: EpochPlan,
                    first_batch: int) -> tuple[np.ndarray, list[dict[str, np.ndarray]], Plans]:
    """This consumer's steps (a DataLoader worker w of K: the rank's steps
    w, w+K, ...); per source, for each of them the source epoch and the
    batch id its rank reads (epoch -1: the step does not read the source,
    per_batch); and the plans of the source epochs read."""
    world_size, rank = plan.world_size or 1, plan.rank or 0
    k, worker = max(plan.num_workers or 0, 1), plan.worker or 0
    mine = np.arange(worker + first_batch * k, steps, k, dtype=np.int64)
    of_step = resolved.runs.sources_of(at.run, steps) if resolved.runs is not None else None
    out, plans = [], {}
    for i, source in enumerate(resolved.sources):
        assert isinstance(source, BudgetSource)
        reads = np.arange(steps) if of_step is None else np.flatnonzero(of_step == i)
        epoch = np.full(steps, -1, np.int64)
        batch = np.zeros(steps, np.int64)
        for start, c0, n in source.segments(at.sources[source.name], len(reads)):
            t = reads[c0:c0 + n]
            epoch[t] = start.epoch
            positions = start.position + np.arange(n, dtype=np.int64) * world_size + rank
            plans[(i, start.epoch)] = source.plan(start.epoch)
            batch[t] = plans[(i, start.epoch)].order[positions]
        out.append({"epoch": epoch[mine], "batch": batch[mine]})
    return mine, out, plans


def iter_budget_batches(client: Any, resolved: BudgetResolved, at: Anchor, steps: int,
                        plan: EpochPlan, prefetch: int = 2, job: str | None = None,
                        first_batch: int = 0) -> Iterator[pa.RecordBatch]:
    """One consumer's batches of a token-budget mixture epoch: ``steps``
    steps per rank from ``at``; ``plan`` carries the consumer's place
    (rank, world_size, num_workers, worker) and ``columns``. The loop's
    waits are reported under ``job`` with each source's rows
    (``_stall.SourcesMeter``), as other mixtures' consumers report."""
    # Every source epoch planned here, not on the reading thread.
    mine, per_source, plans = _consumer_steps(resolved, at, steps, plan, first_batch)
    sources: list[BudgetSource] = list(resolved.sources)  # type: ignore[arg-type]
    generations = {s.name: s.generation for s in sources}
    columns = list(plan.columns) if plan.columns is not None else None
    source_rows = np.zeros((len(mine), len(sources)), np.int64)  # per step and source
    for (i, e), p in plans.items():
        here = per_source[i]["epoch"] == e
        source_rows[here, i] = p.count[per_source[i]["batch"][here]]
    rows_per_step = source_rows.sum(axis=1)
    # Groups of whole steps, about _ROWS_PER_TAKE rows each, the first one
    # step (ramped_groups): the first batch waits for one step's takes.
    groups = ramped_groups(rows_per_step, _ROWS_PER_TAKE)

    def read(group: np.ndarray) -> list[pa.RecordBatch]:
        parts: list[list[pa.RecordBatch]] = [[] for _ in group]
        for i, source in enumerate(sources):
            epochs = per_source[i]["epoch"][group]
            for e in np.unique(epochs[epochs >= 0]):
                at_steps = np.flatnonzero(epochs == e)
                rows, counts = plans[(i, int(e))].rows_of(per_source[i]["batch"][group][at_steps])
                # The copy the source was planned from, a replaced one too.
                table = client.take(source.name, rows, columns,
                                    generations[source.name]).combine_chunks()
                batch = table.to_batches()[0]
                offsets = np.concatenate([[0], np.cumsum(counts)])
                for j, s in enumerate(at_steps):
                    parts[s].append(batch.slice(int(offsets[j]), int(counts[j])))
        return [p[0] if len(p) == 1 else
                pa.Table.from_batches(p).combine_chunks().to_batches()[0] for p in parts]

    def batches() -> Iterator[pa.RecordBatch]:
        steps_read = 0
        for batch in _prefetched(read, groups, prefetch):
            if meter is not None:
                meter.count_rows(source_rows[steps_read].tolist())
            steps_read += 1
            yield batch

    meter = client._stall_meter([s.name for s in sources], job, plan)
    yield from (batches() if meter is None else _stall.metered(batches(), meter))


def _prefetched(read: Any, groups: list[np.ndarray], prefetch: int) -> Iterator[pa.RecordBatch]:
    """``read(group)``'s batches, group by group, the next group read on a
    thread while this one's are handed out (``prefetch`` > 0)."""
    if prefetch <= 0 or len(groups) < 2:
        for group in groups:
            yield from read(group)
        return
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="icefloe-mixture-budget") as pool:
        pending = pool.submit(read, groups[0])
        for k in range(len(groups)):
            batches = pending.result()
            if k + 1 < len(groups):
                pending = pool.submit(read, groups[k + 1])
            yield from batches


def iter_budget_mixture(client: Any, weights: Mixture | Mapping[str, float], *,
                        batch_size: int | None, prefetch: int, job: str | None,
                        plan: EpochPlan | None, mix_by: str = "tokens",
                        token_column: str | None = None, epoch_source: str | None = None,
                        epoch_total: int | None = None, per_batch: bool = False,
                        run_steps: int | None = None,
                        **fields: Any) -> Iterator[pa.RecordBatch]:
    """``Client.iter_epoch`` of a mixture with ``batch_tokens``: epoch
    ``epoch`` read from the mixture's start by arithmetic."""
    if batch_size is not None:
        raise InvalidArgument("batch_size and batch_tokens exclude each other")
    mixture = weights if isinstance(weights, Mixture) else Mixture(
        as_weights(weights), mix_by=mix_by, token_column=token_column, epoch_source=epoch_source,
        epoch_total=epoch_total, per_batch=per_batch, run_steps=run_steps)
    budget = budget_of({**fields, "token_column": token_column or mixture.token_column})
    for key in dataclasses.asdict(budget):
        fields.pop(key, None)
    plan = (plan or EpochPlan()).replace(**fields)
    if plan.drop_last is False:
        raise InvalidArgument("a mixture of token-budget batches reads every source with "
                              "drop_last=True")
    resolved = resolve_budget(client, mixture, budget, plan.world_size or 1,
                              list(plan.columns) if plan.columns is not None else None,
                              plan.seed or 0, plan.epoch or 0)
    at = resolved.base_of(plan.epoch or 0, None)
    yield from iter_budget_batches(client, resolved, at, resolved.epoch_steps(at), plan,
                                   prefetch, job)
