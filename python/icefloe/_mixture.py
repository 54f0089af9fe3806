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
Where every source is is pure arithmetic on a few integers
(:class:`Position`, :func:`advance`): no head call per step, one
GetFlightInfo per source epoch a consumer reads.

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
    unit) of the mixture. Sources of weight 0 are left out. Bad weights are
    refused here, naming the source.
    """

    weights: Mapping[str, float]
    mix_by: str = "rows"
    token_column: str | None = None
    epoch_source: str | None = None
    epoch_total: int | None = None

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
class Source:
    """One source as a job of ``world_size`` reads it: its rows, the rows it
    gives each batch, and (mix_by="tokens") its mean tokens per row."""

    name: str
    rows: int
    per_step: int
    world_size: int
    mean_tokens: float = 1.0

    @property
    def step_positions(self) -> int:
        return self.world_size * self.per_step

    def left(self, at: Position) -> int:
        """Steps left in the source epoch ``at`` is in (drop_last: a tail
        shorter than a step is not read)."""
        return (self.rows - at.position) // self.step_positions

    def normal(self, at: Position) -> Position:
        """``at``, or the next epoch's start where no step is left."""
        return at if self.left(at) > 0 else Position(at.epoch + 1, 0)

    def advance(self, at: Position, steps: int) -> Position:
        """Where the source stands ``steps`` steps after ``at``."""
        at = self.normal(at)
        left = self.left(at)
        if steps < left:
            return Position(at.epoch, at.position + steps * self.step_positions)
        steps -= left
        per_epoch = self.rows // self.step_positions
        return Position(at.epoch + 1 + steps // per_epoch,
                        (steps % per_epoch) * self.step_positions)

    def segments(self, at: Position, steps: int) -> list[tuple[Position, int, int]]:
        """The next ``steps`` steps as (source epoch start, first step, steps)."""
        out, t = [], 0
        at = self.normal(at)
        while t < steps:
            n = min(self.left(at), steps - t)
            out.append((at, t, n))
            t += n
            at = Position(at.epoch + 1, 0)
        return out


@dataclasses.dataclass(frozen=True)
class Resolved:
    """A mixture as one job reads it: the sources with their rows per step."""

    mixture: Mixture
    sources: tuple[Source, ...]
    batch_size: int
    schema: pa.Schema

    def units_per_step(self) -> float:
        """Rows (or estimated tokens) one step of the whole job reads."""
        return sum(s.step_positions * s.mean_tokens for s in self.sources)

    def epoch_steps(self, base: dict[str, Position], done: float) -> int:
        """Steps per rank of the mixture epoch from ``base``, ``done`` units
        of it already read."""
        name = self.mixture.pass_source()
        if name is not None:
            source = next(s for s in self.sources if s.name == name)
            return source.left(source.normal(base[name]))
        remaining = self.mixture.epoch_total - done  # type: ignore[operator]
        return max(0, math.floor(remaining / self.units_per_step() + 1e-9))

    def advance(self, base: dict[str, Position], steps: int) -> dict[str, Position]:
        return {s.name: s.advance(base[s.name], steps) for s in self.sources}

    def start(self) -> dict[str, Position]:
        return {s.name: Position(0, 0) for s in self.sources}

    def base_of(self, epoch: int, anchor: Anchor | None) -> tuple[dict[str, Position], float]:
        """Where every source stands when mixture epoch ``epoch`` begins (or
        resumes), from ``anchor`` (a known epoch's start) by arithmetic: the
        epochs between are read whole by this job's world size."""
        if anchor is None or anchor.epoch > epoch:
            anchor = Anchor(0, self.start(), 0.0)
        base = {s.name: anchor.sources.get(s.name, Position(0, 0)) for s in self.sources}
        done = anchor.done
        for _ in range(anchor.epoch, epoch):
            base = self.advance(base, self.epoch_steps(base, done))
            done = 0.0
        return base, done


@dataclasses.dataclass(frozen=True)
class Anchor:
    """A mixture epoch whose start (or resume point) is known: every
    source's position there, and the units of the epoch already read."""

    epoch: int
    sources: dict[str, Position]
    done: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {"epoch": self.epoch, "done": self.done,
                "sources": {n: {"epoch": p.epoch, "position": p.position}
                            for n, p in self.sources.items()}}

    @classmethod
    def from_json(cls, value: dict[str, Any]) -> Anchor:
        return cls(int(value["epoch"]),
                   {n: Position(int(p["epoch"]), int(p["position"]))
                    for n, p in value["sources"].items()},
                   float(value.get("done", 0.0)))


def resolve(client: Reader, mixture: Mixture, batch_size: int, world_size: int,
            columns: list[str] | None) -> Resolved:
    """The mixture for this job: every source described once (unknown
    names, columns that differ and token columns that are not lists are
    refused, naming the source), then ``batch_size`` apportioned."""
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
    shares = [mixture.weights[n] for n in mixture.names]
    means = [1.0] * len(shares)
    if mixture.mix_by == "tokens":
        means = [_mean_tokens(client, n, rows[n], schemas[n], mixture.token_column)
                 for n in mixture.names]
        shares = [w / m for w, m in zip(shares, means, strict=True)]
    total = sum(shares)
    per_step = apportion([s / total for s in shares], batch_size)
    sources = []
    for name, n, mean in zip(mixture.names, per_step, means, strict=True):
        if n == 0:
            raise InvalidArgument(
                f"mixture source {name!r} gets no row of a batch of {batch_size} (weight "
                f"{mixture.weights[name]}): raise batch_size or the weight")
        source = Source(name, rows[name], n, world_size, mean)
        if rows[name] < source.step_positions:
            raise InvalidArgument(
                f"mixture source {name!r} has {rows[name]} rows, fewer than one step reads "
                f"of it ({world_size} ranks x {n} rows)")
        sources.append(source)
    return Resolved(mixture, tuple(sources), batch_size, schemas[first])


def _projected(name: str, schema: pa.Schema, columns: list[str] | None) -> pa.Schema:
    if columns is None:
        return schema
    missing = [c for c in columns if c not in schema.names]
    if missing:
        raise InvalidArgument(f"mixture source {name!r} has no column {missing[0]!r} "
                              f"(columns: {_columns(schema)})")
    return pa.schema([schema.field(c) for c in columns])


def _columns(schema: pa.Schema) -> str:
    return ", ".join(f"{f.name}: {f.type}" for f in schema)


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
                    worker: int, first_batch: int) -> list[tuple[Position, int, int, int]]:
    """What worker ``worker`` of ``num_workers`` (0: none) reads of
    ``source`` in the epoch's ``steps`` steps (it reads steps worker,
    worker + K, ...), from its batch ``first_batch`` on: per source epoch,
    (start, the plan's worker index, its first batch, its batch count)."""
    k = max(num_workers, 1)
    out = []
    for at, t0, n in source.segments(base, steps):
        w = (worker - t0) % k  # the plan's worker whose batches are this worker's steps
        count = max(0, -(-(n - w) // k))
        skip = min(count, max(0, first_batch - (t0 + w - worker) // k))
        if count > skip:
            out.append((at, w, skip, count))
    return out


def iter_source(client: Reader, source: Source, plan: EpochPlan,
                segments: list[tuple[Position, int, int, int]], prefetch: int,
                job: str | None) -> Iterator[pa.RecordBatch]:
    """A source's batches for one worker: each source epoch an ordinary
    epoch plan (its streams cancelled once the mixture has what it needs)."""
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
        batches = client.iter_epoch(
            name, plan=plan.replace(epoch=at.epoch, start=at.position, worker=w,
                                    first_batch=skip or None),
            prefetch=prefetch, job=job, on_shape=same_rows)
        try:
            for _ in range(count - skip):
                batch = next(batches, None)
                if batch is None:
                    raise InvalidArgument(f"mixture source {name!r}: its epoch {at.epoch} "
                                          "ended early (the copy changed under the job?)")
                yield batch
        finally:
            batches.close()


def iter_batches(client: Reader, resolved: Resolved, base: dict[str, Position], steps: int,
                 plan: EpochPlan, prefetch: int = 2, job: str | None = None,
                 first_batch: int = 0) -> Iterator[pa.RecordBatch]:
    """One consumer's batches of a mixture epoch: ``steps`` steps per rank
    from ``base``; ``plan`` carries the order options and the consumer's
    place (rank, world_size, num_workers, worker)."""
    k = max(plan.num_workers or 0, 1)
    worker = plan.worker or 0
    count = max(0, -(-(steps - worker) // k) - first_batch)
    streams = []
    for source in resolved.sources:
        segments = worker_segments(source, base[source.name], steps, plan.num_workers or 0,
                                   worker, first_batch)
        streams.append(iter_source(client, source, plan.replace(
            batch_size=source.per_step, drop_last=True), segments, prefetch, job))
    try:
        for _ in range(count):
            parts = [next(s) for s in streams]
            yield pa.Table.from_batches(parts).combine_chunks().to_batches()[0]
    finally:
        for s in streams:
            s.close()


def iter_mixture(client: Reader, weights: Mixture | Mapping[str, float], *,
                 batch_size: int | None, prefetch: int, job: str | None,
                 plan: EpochPlan | None, mix_by: str = "rows",
                 token_column: str | None = None, epoch_source: str | None = None,
                 epoch_total: int | None = None, **fields: Any) -> Iterator[pa.RecordBatch]:
    """``Client.iter_epoch`` of a mixture: epoch ``epoch`` read from the
    mixture's start (epoch 0, position 0 of every source) by arithmetic."""
    mixture = weights if isinstance(weights, Mixture) else Mixture(
        as_weights(weights), mix_by=mix_by, token_column=token_column, epoch_source=epoch_source,
        epoch_total=epoch_total)
    plan = (plan or EpochPlan()).replace(**fields)
    if batch_size is not None:
        plan = plan.replace(batch_size=batch_size)
    if plan.batch_size is None:
        raise TypeError("iter_epoch() missing required keyword argument: 'batch_size'")
    if plan.drop_last is False:
        raise InvalidArgument("a mixture reads every source with drop_last=True")
    world_size = plan.world_size or 1
    resolved = resolve(client, mixture, plan.batch_size, world_size,
                       list(plan.columns) if plan.columns is not None else None)
    base, done = resolved.base_of(plan.epoch or 0, None)
    steps = resolved.epoch_steps(base, done)
    yield from iter_batches(client, resolved, base, steps, plan, prefetch, job)
