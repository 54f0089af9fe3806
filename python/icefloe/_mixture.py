"""Weighted mixtures of cached datasets (docs/epochs.md, "Mixtures").

A mixture reads several cached datasets (its *sources*) into one stream of
batches. Every batch of a rank holds the same number of rows of each source
(``per_step``: the source's share of ``batch_size``, apportioned by largest
remainder from the weights, converted to rows by the sources' mean tokens
per row when the weights count tokens). So each source is read as an
ordinary epoch plan of its own with ``batch_size = per_step``: the head
plans it, the nodes serve it (spans, chunks, shared memory), a failover
resumes it, and after any step every source has consumed a prefix of its
epoch's order, which is what makes resume with another world size exact.

Each source runs through its own epochs: a mixture step consumes
``world_size x per_step`` positions of the source's order, a source whose
epoch ends (its drop_last tail aside) goes on with its next epoch, freshly
shuffled, and one that does not end continues in the next mixture epoch.
Without drop_last a source is one stream of its epochs: the step that
reaches an epoch's end (a :class:`Straddle`) reads its last positions and
the next epoch's first, each rank's part as the first batch of a
one-consumer plan.
Where every source is is pure arithmetic on a few integers
(:class:`Position`, :meth:`Source.advance`, :class:`Anchor`): no head call
per step, one GetFlightInfo per source epoch a consumer reads.

With ``per_batch`` a batch is one source's ``batch_size`` rows instead:
runs of ``run_steps`` steps each read one source, in a fixed pattern
(:class:`Runs`); a run covers every DataLoader worker in turn, so each
source is still one ordinary epoch plan per source epoch.

This module is torch-free: ``Client.iter_epoch`` takes a mixture through
:func:`iter_mixture`; ``CacheDataset`` through ``_mixture_dataset``.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator, Mapping
from typing import Any, Protocol

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ._epoch_plan import EpochPlan
from .errors import InvalidArgument, NotFound


class Reader(Protocol):
    """What a mixture asks of ``icefloe.Client`` (which imports this module)."""

    def describe(self, name: str) -> dict[str, Any]: ...

    def take(self, name: str, rows: Any, columns: list[str] | None = None) -> pa.Table: ...

    def iter_epoch(self, name: Any, **kwargs: Any) -> Iterator[Any]: ...

MIX_BY = ("rows", "tokens")
# per_batch: the pattern of runs repeats every PATTERN_RUNS runs, in which
# each source has its apportioned count (so weights resolve to 1/100).
PATTERN_RUNS = 100
# Rows sampled per source (evenly spaced ids) to measure its mean tokens per
# row for mix_by="tokens": one take of one column per source and process.
TOKEN_SAMPLE_ROWS = 4096


@dataclasses.dataclass(frozen=True)
class Mixture:
    """Sources and their weights: ``{"web": 0.6, "code": 0.3, "math": 0.1}``.

    ``mix_by`` says what the weights count: ``"rows"``, or ``"tokens"`` of
    ``token_column`` (a list column). An epoch of the mixture is one pass of
    ``epoch_source`` (default: the heaviest source, the first listed on a
    tie) or, with ``epoch_total``, that many rows or tokens (``mix_by``'s
    unit) of the mixture. Sources of weight 0 are left out. With
    ``per_batch`` every batch is one source: runs of ``run_steps`` steps
    (default 1; a multiple of the DataLoader's workers) each read one
    source, in a fixed pattern of PATTERN_RUNS runs whose counts follow the
    weights. Bad weights are refused here, naming the source.
    """

    weights: Mapping[str, float]
    mix_by: str = "rows"
    token_column: str | None = None
    epoch_source: str | None = None
    epoch_total: int | None = None
    per_batch: bool = False
    run_steps: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.weights, Mapping) or not self.weights:
            raise InvalidArgument("a mixture needs at least one source: {name: weight}, "
                                  "got no source")
        for name, weight in self.weights.items():
            if not isinstance(name, str) or not name:
                raise InvalidArgument(f"mixture source names are dataset names, not {name!r}")
            if (isinstance(weight, bool) or not isinstance(weight, (int, float))
                    or not math.isfinite(weight) or weight < 0):
                raise InvalidArgument(f"mixture source {name!r}: weight {weight!r} must be a "
                                      "finite number >= 0")
        if sum(self.weights.values()) <= 0:
            raise InvalidArgument("mixture weights sum to zero: at least one source needs a "
                                  "positive weight")
        if self.mix_by not in MIX_BY:
            raise InvalidArgument(f"mix_by must be one of {', '.join(MIX_BY)}, "
                                  f"not {self.mix_by!r}")
        if self.mix_by == "tokens" and not self.token_column:
            raise InvalidArgument('mix_by="tokens" needs token_column (a list column)')
        if self.epoch_source is not None and self.epoch_total is not None:
            raise InvalidArgument("give epoch_source or epoch_total, not both")
        if self.epoch_source is not None and self.weights.get(self.epoch_source, 0) <= 0:
            raise InvalidArgument(f"epoch_source {self.epoch_source!r} is not a source of "
                                  "positive weight")
        if self.epoch_total is not None and (isinstance(self.epoch_total, bool)
                                             or not isinstance(self.epoch_total, int)
                                             or self.epoch_total < 1):
            raise InvalidArgument(f"epoch_total must be an int >= 1, not {self.epoch_total!r}")
        if self.run_steps is not None:
            if not self.per_batch:
                raise InvalidArgument("run_steps needs per_batch=True")
            if (isinstance(self.run_steps, bool) or not isinstance(self.run_steps, int)
                    or self.run_steps < 1):
                raise InvalidArgument(f"run_steps must be an int >= 1, not {self.run_steps!r}")

    @property
    def names(self) -> list[str]:
        """The sources read (positive weight), in the order given."""
        return [n for n, w in self.weights.items() if w > 0]

    def pass_source(self) -> str | None:
        """The source whose pass is an epoch (None: epochs are a total)."""
        if self.epoch_total is not None:
            return None
        if self.epoch_source is not None:
            return self.epoch_source
        return max(self.names, key=lambda n: self.weights[n])  # first on a tie

    def label(self) -> str:
        """How errors and the state name the mixture."""
        return "+".join(self.names)


def as_weights(value: Any) -> dict[str, float]:
    """``{name: weight}``, checked to be a mapping."""
    if not isinstance(value, Mapping):
        raise InvalidArgument(f"a dataset is a name or a mixture {{name: weight}}, not "
                              f"{type(value).__name__} {value!r}")
    return dict(value)


def apportion(shares: list[float], total: int) -> list[int]:
    """``total`` split in proportion to ``shares`` (summing to 1) by largest
    remainder: each part is its exact share rounded down or up, ties to the
    first."""
    exact = [s * total for s in shares]
    parts = [math.floor(x) for x in exact]
    order = sorted(range(len(shares)), key=lambda i: (-(exact[i] - parts[i]), i))
    for i in order[:total - sum(parts)]:
        parts[i] += 1
    return parts


@dataclasses.dataclass(frozen=True)
class Position:
    """Where a source stands: ``position`` consumed positions of the order
    of its epoch ``epoch``."""

    epoch: int
    position: int


@dataclasses.dataclass(frozen=True)
class Straddle:
    """drop_last=False: a step of a source that begins at ``at`` and ends in
    the source's next epoch."""

    at: Position


@dataclasses.dataclass(frozen=True)
class Source:
    """One source as a job of ``world_size`` reads it: its rows, the rows it
    gives each batch, (mix_by="tokens") its mean tokens per row, and whether
    the tail of each of its epochs that does not fill a step is dropped
    (``drop_last``) or read in a step that ends in its next epoch."""

    name: str
    rows: int
    per_step: int
    world_size: int
    mean_tokens: float = 1.0
    drop_last: bool = True

    @property
    def step_positions(self) -> int:
        return self.world_size * self.per_step

    def left(self, at: Position) -> int:
        """Steps that begin in the source epoch ``at`` is in: whole ones
        (drop_last: a tail shorter than a step is not read), or without
        drop_last, also the one that ends in the next epoch."""
        rest = self.rows - at.position
        if self.drop_last:
            return rest // self.step_positions
        return -(-rest // self.step_positions)

    def normal(self, at: Position) -> Position:
        """``at``, or the next epoch's place where none of this one is left
        to read."""
        if self.drop_last:
            return at if self.left(at) > 0 else Position(at.epoch + 1, 0)
        return Position(at.epoch + at.position // self.rows, at.position % self.rows)

    def advance(self, at: Position, steps: int) -> Position:
        """Where the source stands ``steps`` steps after ``at``."""
        if not self.drop_last:  # one stream of its epochs
            return self.normal(Position(at.epoch, at.position + steps * self.step_positions))
        at = self.normal(at)
        left = self.left(at)
        if steps < left:
            return Position(at.epoch, at.position + steps * self.step_positions)
        steps -= left
        per_epoch = self.rows // self.step_positions
        return Position(at.epoch + 1 + steps // per_epoch,
                        (steps % per_epoch) * self.step_positions)

    def segments(self, at: Position, steps: int) -> list[tuple[Position | Straddle, int, int]]:
        """The next ``steps`` steps as (where they begin, first step, steps):
        runs of whole steps in one source epoch, and without drop_last, a
        Straddle (one step) where a step ends in the next epoch."""
        out: list[tuple[Position | Straddle, int, int]] = []
        t = 0
        at = self.normal(at)
        while t < steps:
            whole = (self.rows - at.position) // self.step_positions
            n = min(whole, steps - t)
            if n:
                out.append((at, t, n))
            t += n
            end = at.position + n * self.step_positions
            if t == steps:
                break
            if self.drop_last or end == self.rows:
                at = Position(at.epoch + 1, 0)
                continue
            out.append((Straddle(Position(at.epoch, end)), t, 1))
            t += 1
            at = Position(at.epoch + 1, end + self.step_positions - self.rows)
        return out


@dataclasses.dataclass(frozen=True)
class Runs:
    """per_batch: run k of an epoch (``run_steps`` consecutive steps, counted
    from ``run0``, the pattern's place when the epoch began) reads source
    ``pattern[(run0 + k) % len(pattern)]`` alone."""

    pattern: tuple[int, ...]
    run_steps: int

    def sources_of(self, run0: int, steps: int) -> np.ndarray:
        """The source of each of ``steps`` steps from run ``run0``."""
        runs = -(-steps // self.run_steps)
        index = (run0 + np.arange(runs)) % len(self.pattern)
        return np.repeat(np.asarray(self.pattern)[index], self.run_steps)[:steps]

    def next_run(self, run0: int, steps: int) -> int:
        """The pattern's place after ``steps`` steps (a partial run counts whole)."""
        return (run0 + -(-steps // self.run_steps)) % len(self.pattern)

    def steps_until(self, source: int, run0: int, steps: int) -> int:
        """Steps from run ``run0`` until ``source`` has had ``steps`` of them."""
        size = len(self.pattern)
        mine = [k for k in range(size) if self.pattern[(run0 + k) % size] == source]
        need = -(-steps // self.run_steps)
        cycles, nth = divmod(need - 1, len(mine))
        return (cycles * size + mine[nth]) * self.run_steps + steps - (need - 1) * self.run_steps


def pattern_of(counts: list[int]) -> tuple[int, ...]:
    """Runs spread by smooth weighted round robin: source i ``counts[i]``
    times, as evenly as can be (ties to the first)."""
    total, current, out = sum(counts), [0] * len(counts), []
    for _ in range(total):
        current = [c + n for c, n in zip(current, counts, strict=True)]
        best = max(range(len(counts)), key=lambda i: (current[i], -i))
        current[best] -= total
        out.append(best)
    return tuple(out)


@dataclasses.dataclass(frozen=True)
class Resolved:
    """A mixture as one job reads it: the sources with their rows per step
    (and with per_batch, the runs)."""

    mixture: Mixture
    sources: tuple[Source, ...]
    batch_size: int
    schema: pa.Schema
    runs: Runs | None = None

    def taken(self, at: Anchor, steps: int) -> list[int]:
        """Steps of each source in ``steps`` steps from ``at``."""
        if self.runs is None:
            return [steps] * len(self.sources)
        return np.bincount(self.runs.sources_of(at.run, steps),
                           minlength=len(self.sources)).tolist()

    def units_per_step(self) -> float:
        """Rows (or estimated tokens) one step of the whole job reads (per_batch:
        on average over the pattern)."""
        units = [s.step_positions * s.mean_tokens for s in self.sources]
        if self.runs is None:
            return sum(units)
        share = np.bincount(self.runs.pattern, minlength=len(units)) / len(self.runs.pattern)
        return float(np.dot(share, units))

    def epoch_steps(self, at: Anchor) -> int:
        """Steps per rank of the mixture epoch from ``at``."""
        name = self.mixture.pass_source()
        if name is not None:
            i = next(i for i, s in enumerate(self.sources) if s.name == name)
            source = self.sources[i]
            left = source.left(source.normal(at.sources[name]))
            return left if self.runs is None else self.runs.steps_until(i, at.run, left)
        remaining = self.mixture.epoch_total - at.done  # type: ignore[operator]
        return max(0, math.floor(remaining / self.units_per_step() + 1e-9))

    def after(self, at: Anchor, steps: int) -> Anchor:
        """Where the job stands ``steps`` steps after ``at``, in the same epoch."""
        taken = self.taken(at, steps)
        return Anchor(at.epoch, {s.name: s.advance(at.sources[s.name], n)
                                 for s, n in zip(self.sources, taken, strict=True)},
                      at.done + steps * self.units_per_step(),
                      self.runs.next_run(at.run, steps) if self.runs else 0)

    def base_of(self, epoch: int, anchor: Anchor | None) -> Anchor:
        """Where every source stands when mixture epoch ``epoch`` begins (or
        resumes), from ``anchor`` (a known epoch's start) by arithmetic: the
        epochs between are read whole by this job's world size."""
        if anchor is None or anchor.epoch > epoch:
            anchor = Anchor(0, {})
        at = Anchor(anchor.epoch, {s.name: anchor.sources.get(s.name, Position(0, 0))
                                   for s in self.sources}, anchor.done, anchor.run)
        while at.epoch < epoch:
            end = self.after(at, self.epoch_steps(at))
            at = Anchor(at.epoch + 1, end.sources, 0.0, end.run)
        return at


@dataclasses.dataclass(frozen=True)
class Anchor:
    """A mixture epoch whose start (or resume point) is known: every
    source's position there, the units of the epoch already read, and
    (per_batch) the pattern's place."""

    epoch: int
    sources: dict[str, Position]
    done: float = 0.0
    run: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"epoch": self.epoch, "done": self.done, "run": self.run,
                "sources": {n: {"epoch": p.epoch, "position": p.position}
                            for n, p in self.sources.items()}}

    @classmethod
    def from_json(cls, value: dict[str, Any]) -> Anchor:
        return cls(int(value["epoch"]),
                   {n: Position(int(p["epoch"]), int(p["position"]))
                    for n, p in value["sources"].items()},
                   float(value.get("done", 0.0)), int(value.get("run", 0)))


def describe_sources(client: Reader, mixture: Mixture,
                     columns: list[str] | None) -> tuple[dict[str, int], dict[str, pa.Schema]]:
    """Every source's rows and (projected) schema, described once; unknown
    names and columns that differ are refused, naming the source."""
    rows, schemas = {}, {}
    for name in mixture.names:
        try:
            desc = client.describe(name)
        except NotFound as exc:
            raise NotFound(f"mixture source {name!r} is not a cached dataset ({exc})") from exc
        rows[name] = int(desc["rows"])
        schemas[name] = _projected(name, desc["schema"], columns)
    first = mixture.names[0]
    for name in mixture.names[1:]:
        if not schemas[name].equals(schemas[first]):
            raise InvalidArgument(
                f"mixture source {name!r} has columns ({_columns(schemas[name])}) where "
                f"{first!r} has ({_columns(schemas[first])}); declare a common projection "
                "with columns=[...]")
    return rows, schemas


def resolve(client: Reader, mixture: Mixture, batch_size: int, world_size: int,
            columns: list[str] | None, drop_last: bool = True) -> Resolved:
    """The mixture for this job: every source described once (unknown
    names, columns that differ and token columns that are not lists are
    refused, naming the source), then ``batch_size`` apportioned."""
    rows, schemas = describe_sources(client, mixture, columns)
    first = mixture.names[0]
    shares = [mixture.weights[n] for n in mixture.names]
    means = [1.0] * len(shares)
    if mixture.mix_by == "tokens":
        means = [_mean_tokens(client, n, rows[n], schemas[n], mixture.token_column)
                 for n in mixture.names]
        shares = [w / m for w, m in zip(shares, means, strict=True)]
    total = sum(shares)
    runs = None
    if mixture.per_batch:
        counts = apportion([s / total for s in shares], PATTERN_RUNS)
        per_step = [batch_size] * len(counts)
        runs = Runs(pattern_of(counts), mixture.run_steps or 1)
    else:
        counts = per_step = apportion([s / total for s in shares], batch_size)
    sources = []
    for name, count, n, mean in zip(mixture.names, counts, per_step, means, strict=True):
        if count == 0:
            unit = f"run of {PATTERN_RUNS}" if runs else f"row of a batch of {batch_size}"
            raise InvalidArgument(
                f"mixture source {name!r} gets no {unit} (weight {mixture.weights[name]}): "
                "raise its weight" + ("" if runs else " or batch_size"))
        source = Source(name, rows[name], n, world_size, mean, drop_last)
        if rows[name] < source.step_positions:
            raise InvalidArgument(
                f"mixture source {name!r} has {rows[name]} rows, fewer than one step reads "
                f"of it ({world_size} ranks x {n} rows)")
        sources.append(source)
    return Resolved(mixture, tuple(sources), batch_size, schemas[first], runs)


def _projected(name: str, schema: pa.Schema, columns: list[str] | None) -> pa.Schema:
    if columns is None:
        return schema
    missing = [c for c in columns if c not in schema.names]
    if missing:
        raise InvalidArgument(f"mixture source {name!r} has no column {missing[0]!r} "
                              f"(columns: {_columns(schema)})")
    return pa.schema([schema.field(c) for c in columns])


def _columns(schema: pa.Schema) -> str:
    return ", ".join(f"{f.name}: {f.type}{'' if f.nullable else ' not null'}" for f in schema)


def _mean_tokens(client: Reader, name: str, rows: int, schema: pa.Schema,
                 column: str | None) -> float:
    """Mean tokens per row of ``column``, over up to TOKEN_SAMPLE_ROWS rows
    spaced evenly over the source (all of them in a smaller one)."""
    assert column is not None
    if column not in schema.names:
        raise InvalidArgument(f"mixture source {name!r} has no token_column {column!r}")
    kind = schema.field(column).type
    if not (pa.types.is_list(kind) or pa.types.is_large_list(kind)):
        raise InvalidArgument(f"mixture source {name!r}: token_column {column!r} is {kind}, "
                              "not a list of tokens")
    ids = np.unique(np.linspace(0, rows - 1, min(rows, TOKEN_SAMPLE_ROWS)).astype(np.int64))
    lengths = pc.list_value_length(client.take(name, ids, columns=[column])[column])
    mean = pc.mean(lengths).as_py() or 0.0
    if mean <= 0:
        raise InvalidArgument(f"mixture source {name!r}: token_column {column!r} has no tokens")
    return float(mean)


def worker_segments(source: Source, base: Position, steps: int, num_workers: int,
                    worker: int, first_batch: int
                    ) -> list[tuple[Position | Straddle, int, int, int]]:
    """What worker ``worker`` of ``num_workers`` (0: none) reads of
    ``source`` in the epoch's ``steps`` steps (it reads steps worker,
    worker + K, ...), from its batch ``first_batch`` on: per source epoch,
    (start, the plan's worker index, its first batch, its batch count), and
    each Straddle step of its own as (straddle, 0, 0, 1)."""
    k = max(num_workers, 1)
    out: list[tuple[Position | Straddle, int, int, int]] = []
    for at, t0, n in source.segments(base, steps):
        if isinstance(at, Straddle):
            if t0 % k == worker and t0 // k >= first_batch:
                out.append((at, 0, 0, 1))
            continue
        w = (worker - t0) % k  # the plan's worker whose batches are this worker's steps
        count = max(0, -(-(n - w) // k))
        skip = min(count, max(0, first_batch - (t0 + w - worker) // k))
        if count > skip:
            out.append((at, w, skip, count))
    return out


def iter_source(client: Reader, source: Source, plan: EpochPlan,
                segments: list[tuple[Position | Straddle, int, int, int]], prefetch: int,
                job: str | None) -> Iterator[pa.RecordBatch]:
    """A source's batches for one worker: each source epoch an ordinary
    epoch plan (its streams cancelled once the mixture has what it needs),
    each Straddle step read by :func:`read_straddle`; all reported under
    ``plan``'s consumer (the worker's own)."""
    name = source.name

    def same_rows(shape: dict[str, Any]) -> None:
        # The steps of every source epoch were counted with the rows the
        # mixture resolved; a copy of another size would be misread.
        if int(shape["num_rows"]) != source.rows:
            raise InvalidArgument(
                f"mixture source {name!r}: a source epoch reads a copy of "
                f"{shape['num_rows']} rows (generation {shape['generation']}), the mixture "
                f"was planned for {source.rows} (the dataset was refreshed or reloaded); "
                "resume from a state in a new process to plan with the new copy")

    for at, w, skip, count in segments:
        if isinstance(at, Straddle):
            yield read_straddle(client, source, plan, at.at, job, same_rows)
            continue
        # The plan's worker w reads this worker's steps of the source epoch
        # (worker_segments): its reads are this worker's.
        batches = client.iter_epoch(
            name, plan=plan.replace(epoch=at.epoch, start=at.position, worker=w,
                                    first_batch=skip or None),
            prefetch=prefetch, job=job, on_shape=same_rows, report_as=plan)
        try:
            for _ in range(count - skip):
                batch = next(batches, None)
                if batch is None:
                    raise InvalidArgument(f"mixture source {name!r}: its epoch {at.epoch} "
                                          "ended early (the copy changed under the job?)")
                yield batch
        finally:
            batches.close()


def read_straddle(client: Reader, source: Source, plan: EpochPlan, at: Position,
                  job: str | None, on_shape: Any) -> pa.RecordBatch:
    """This rank's part of a step that begins at ``at`` and ends in the
    source's next epoch: its ``per_step`` positions of the source's stream of
    epochs, from one epoch or both. Each part is the first batch of a plan of
    one consumer that starts there (the order of an epoch does not depend on
    who reads it), reported under ``plan``'s consumer, whose step it is."""
    first = at.position + (plan.rank or 0) * source.per_step
    stop = first + source.per_step
    parts = []
    for epoch, lo, hi in ((at.epoch, first, min(stop, source.rows)),
                          (at.epoch + 1, max(first, source.rows) - source.rows,
                           stop - source.rows)):
        if hi <= lo:
            continue
        batches = client.iter_epoch(
            source.name, plan=plan.replace(epoch=epoch, start=lo, batch_size=hi - lo,
                                           world_size=1, rank=0, num_workers=0, worker=0,
                                           first_batch=None, drop_last=True),
            prefetch=0, job=job, on_shape=on_shape, report_as=plan)
        try:
            part = next(batches, None)
        finally:
            batches.close()
        if part is None or part.num_rows != hi - lo:
            raise InvalidArgument(f"mixture source {source.name!r}: its epoch {epoch} "
                                  "ended early (the copy changed under the job?)")
        parts.append(part)
    if len(parts) == 1:
        return parts[0]
    return pa.Table.from_batches(parts).combine_chunks().to_batches()[0]


def iter_batches(client: Reader, resolved: Resolved, at: Anchor, steps: int,
                 plan: EpochPlan, prefetch: int = 2, job: str | None = None,
                 first_batch: int = 0) -> Iterator[pa.RecordBatch]:
    """One consumer's batches of a mixture epoch: ``steps`` steps per rank
    from ``at``; ``plan`` carries the order options and the consumer's
    place (rank, world_size, num_workers, worker)."""
    if resolved.runs is not None:
        yield from _iter_runs(client, resolved, at, steps, plan, prefetch, job, first_batch)
        return
    k = max(plan.num_workers or 0, 1)
    worker = plan.worker or 0
    count = max(0, -(-(steps - worker) // k) - first_batch)
    streams = []
    for source in resolved.sources:
        segments = worker_segments(source, at.sources[source.name], steps,
                                   plan.num_workers or 0, worker, first_batch)
        streams.append(iter_source(client, source, plan.replace(
            batch_size=source.per_step, drop_last=True), segments, prefetch, job))
    try:
        for _ in range(count):
            parts = [next(s) for s in streams]
            yield pa.Table.from_batches(parts).combine_chunks().to_batches()[0]
    finally:
        for s in streams:
            s.close()


def _iter_runs(client: Reader, resolved: Resolved, at: Anchor, steps: int, plan: EpochPlan,
               prefetch: int, job: str | None, first_batch: int) -> Iterator[pa.RecordBatch]:
    """per_batch: each of this worker's steps is the next batch of its run's
    source. Runs start at multiples of ``run_steps`` (a multiple of the
    workers), so a source's steps that fall to one worker are every K-th
    batch of its plan: one plan worker's batches."""
    runs = resolved.runs
    assert runs is not None
    k = max(plan.num_workers or 0, 1)
    worker = plan.worker or 0
    if runs.run_steps % k:
        raise InvalidArgument(f"per_batch with {k} DataLoader workers needs run_steps a "
                              f"multiple of {k}, not {runs.run_steps}")
    of_step = runs.sources_of(at.run, steps)
    streams = []
    for i, source in enumerate(resolved.sources):
        mine = np.flatnonzero(of_step == i)  # the iteration steps of this source
        segments = []
        for start, c0, n in source.segments(at.sources[source.name], len(mine)):
            if isinstance(start, Straddle):
                t = int(mine[c0])
                if t % k == worker and t // k >= first_batch:
                    segments.append((start, 0, 0, 1))
                continue
            part = mine[c0:c0 + n]
            own = np.flatnonzero(part % k == worker)  # plan batches of this worker
            if not len(own):
                continue
            w = int(own[0] % k)
            if np.any(own % k != w):  # runs aligned to the workers: never
                raise AssertionError("per_batch run misaligned with the workers")
            skip = int(np.count_nonzero((part[own] - worker) // k < first_batch))
            if skip < len(own):
                segments.append((start, w, skip, len(own)))
        streams.append(iter_source(client, source, plan.replace(
            batch_size=resolved.batch_size, drop_last=True), segments, prefetch, job))
    try:
        for t in range(worker + first_batch * k, steps, k):
            yield next(streams[int(of_step[t])])
    finally:
        for s in streams:
            s.close()


def iter_mixture(client: Reader, weights: Mixture | Mapping[str, float], *,
                 batch_size: int | None, prefetch: int, job: str | None,
                 plan: EpochPlan | None, mix_by: str = "rows",
                 token_column: str | None = None, epoch_source: str | None = None,
                 epoch_total: int | None = None, per_batch: bool = False,
                 run_steps: int | None = None, **fields: Any) -> Iterator[pa.RecordBatch]:
    """``Client.iter_epoch`` of a mixture: epoch ``epoch`` read from the
    mixture's start (epoch 0, position 0 of every source) by arithmetic."""
    mixture = weights if isinstance(weights, Mixture) else Mixture(
        as_weights(weights), mix_by=mix_by, token_column=token_column, epoch_source=epoch_source,
        epoch_total=epoch_total, per_batch=per_batch, run_steps=run_steps)
    plan = (plan or EpochPlan()).replace(**fields)
    if batch_size is not None:
        plan = plan.replace(batch_size=batch_size)
    if plan.batch_size is None:
        raise TypeError("iter_epoch() missing required keyword argument: 'batch_size'")
    world_size = plan.world_size or 1
    resolved = resolve(client, mixture, plan.batch_size, world_size,
                       list(plan.columns) if plan.columns is not None else None,
                       drop_last=plan.drop_last is not False)
    at = resolved.base_of(plan.epoch or 0, None)
    yield from iter_batches(client, resolved, at, resolved.epoch_steps(at), plan, prefetch, job)
