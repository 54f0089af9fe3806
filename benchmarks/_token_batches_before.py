"""The token-budget planner before row length codes (python/icefloe/_token_batches.py
at commit f4d9baa), kept verbatim for benchmarks/token_batches.py to plan
side by side with the current one in one run; nothing else imports it.

Token-budget batches: an epoch cut into batches bounded by tokens, not rows.

``plan_epoch`` turns one epoch's (seed, epoch, per-row token counts) into a
*sequence of batches* that does not depend on the world size, so every rank
plans it alike with no collective, and a job resumes at any step with another
world size (the position is a count of batches of that sequence). Steps take
the sequence's batches ``world_size`` at a time, rank ``r`` the ``r``-th
(docs/epochs.md, "Token-budget batches"). All numpy: no per-row Python.

How the sequence is made:

1. Rows are shuffled in blocks of ``_BLOCK_ROWS`` consecutive rows (a keyed
   permutation of the blocks) and cut into *buckets* of ``bucket_rows`` rows
   of that order; a bucket's rows are shuffled again and sorted by length
   (stable), so rows of a batch have alike lengths and padding stays small.
2. A bucket is cut into batches in that order. A row of length ``L`` fits
   ``T // L`` rows of its length in a budget of ``T``: runs of equal capacity
   are cut into batches of that many rows, rows left over from a run open the
   next batch (they are shorter, so the longer run's capacity still bounds
   it). Padded size ``rows x longest <= T`` always (and so ``sum <= T``, the
   ``varlen`` bound). Each bucket leaves at most one *partial* batch.
3. The full batches are shuffled and cut into windows of ``window_batches``;
   each window is sorted by its batches' tokens (or sum of squared lengths),
   one ascending, the next descending, so the ``world_size`` consecutive
   batches of a step have alike tokens whatever the world size and start.
   The windows keep the epoch from trending; the partial batches end the
   sequence (``drop_last`` drops them with the steps' remainder).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterator
from typing import Any

import numpy as np

from icefloe.errors import InvalidArgument

_BLOCK_ROWS = 64  # rows shuffled together in step 1: a gather of 64 rows is a memcpy
BALANCES = ("tokens", "sq")
_MAX_HISTOGRAM = 1 << 22  # bucket x length counts held at once (32 MiB); wider: per bucket
_HISTOGRAM_CHUNK_ROWS = 1 << 21  # rows of the lengths turned into histogram keys at once
_LOW_SHARE = 0.85  # of the median batch's measure: below it, a batch is read after the windows
TOO_LONG = ("refuse", "drop")


@dataclasses.dataclass(frozen=True)
class TokenBudget:
    """How an epoch is cut into batches by tokens.

    ``batch_tokens``: the budget T; a batch's ``rows x longest row`` (with
    ``varlen``, its total tokens) is at most T. ``token_column``: the
    ``list<int32>`` column whose lengths count. ``balance``: what the ranks
    of one step share alike, ``"tokens"`` (the rows' tokens) or ``"sq"``
    (the sum of squared lengths, attention's cost). ``too_long``: rows longer
    than T are ``"refuse"``d (an error naming how many, before the first
    batch) or ``"drop"``ped and counted. ``bucket_rows`` and
    ``window_batches`` tune the grouping (module docstring)."""

    batch_tokens: int
    token_column: str
    varlen: bool = False
    balance: str = "tokens"
    too_long: str = "refuse"
    bucket_rows: int = 1 << 20
    window_batches: int = 256

    def __post_init__(self) -> None:
        if not isinstance(self.batch_tokens, int) or self.batch_tokens < 1:
            raise InvalidArgument(f"batch_tokens must be a positive integer, not "
                                  f"{self.batch_tokens!r}")
        if not self.token_column:
            raise InvalidArgument("batch_tokens needs token_column: the list<int32> column "
                                  "whose lengths count")
        if self.balance not in BALANCES:
            raise InvalidArgument(f"balance must be one of {', '.join(BALANCES)}, not "
                                  f"{self.balance!r}")
        if self.too_long not in TOO_LONG:
            raise InvalidArgument(f"too_long must be one of {', '.join(TOO_LONG)}, not "
                                  f"{self.too_long!r}")
        if self.bucket_rows < _BLOCK_ROWS or self.bucket_rows % _BLOCK_ROWS:
            raise InvalidArgument(f"bucket_rows must be a positive multiple of {_BLOCK_ROWS}, "
                                  f"not {self.bucket_rows}")
        if self.window_batches < 1:
            raise InvalidArgument(f"window_batches must be positive, not {self.window_batches}")

    def state(self) -> dict[str, Any]:
        """The fields, for a resume state."""
        return dataclasses.asdict(self)


class TokenBatchPlan:
    """One epoch's sequence of token-budget batches (``plan_epoch``).

    Per batch (indexed by batch id): ``bucket``, ``begin`` and ``count``
    (its rows are ``count`` rows from ``begin`` of its bucket's sorted
    order), ``tokens`` and ``squares`` (sum of lengths, of squared lengths).
    ``order``: the sequence, batch ids in the order steps read them; its
    first ``num_full`` are full batches, the rest partial.
    ``too_long_rows``: rows dropped for being longer than the budget."""

    def __init__(self, lengths: np.ndarray, budget: TokenBudget, seed: int, epoch: int,
                 blocks: np.ndarray, fields: dict[str, np.ndarray], order: np.ndarray,
                 num_full: int, too_long_rows: int) -> None:
        self.lengths = lengths
        self.budget = budget
        self.seed, self.epoch = seed, epoch
        self._blocks = blocks
        empty = np.empty(0, np.int64)
        self.bucket = fields.get("bucket", empty)
        self.begin = fields.get("begin", empty)
        self.count = fields.get("count", empty)
        self.tokens = fields.get("tokens", empty)
        self.squares = fields.get("squares", empty)
        self.order = order
        self.num_full = num_full
        self.num_windowed = num_full  # the sequence's batches read in windows (step 3)
        self.too_long_rows = too_long_rows

    @property
    def num_batches(self) -> int:
        return len(self.order)

    # -- steps -------------------------------------------------------------------

    def steps(self, world_size: int, start: int, drop_last: bool) -> int:
        """Steps of a job of ``world_size`` ranks reading the sequence from
        batch ``start``: with ``drop_last`` the full batches that fill whole
        steps; without it every batch, the last step padded with batches from
        the sequence's start (fewer than ``world_size``, read twice)."""
        if world_size < 1:
            raise InvalidArgument(f"world_size must be positive, not {world_size}")
        end = self.num_full if drop_last else self.num_batches
        left = max(0, end - start)
        return left // world_size if drop_last else -(-left // world_size)

    def rank_batches(self, world_size: int, rank: int, start: int = 0,
                     drop_last: bool = True) -> np.ndarray:
        """Batch ids rank ``rank`` reads, one per step: sequence position
        ``start + step * world_size + rank`` (past the end: from the start)."""
        if not 0 <= rank < world_size:
            raise InvalidArgument(f"rank {rank} is outside world_size {world_size}")
        steps = self.steps(world_size, start, drop_last)
        positions = start + np.arange(steps, dtype=np.int64) * world_size + rank
        return self.order[positions % max(1, self.num_batches)]

    def position_after(self, world_size: int, start: int, steps: int) -> int:
        """The sequence position after ``steps`` steps from ``start`` (the
        resume point; the sequence's end after the last step)."""
        return min(start + steps * world_size, self.num_batches)

    def dropped_rows(self, world_size: int, start: int) -> int:
        """Rows ``drop_last`` leaves unread from ``start``: the partial
        batches and the full ones that do not fill a step."""
        read = self.steps(world_size, start, True) * world_size
        skipped = self.order[min(start + read, self.num_batches):]
        return int(self.count[skipped].sum())

    # -- rows --------------------------------------------------------------------

    def _bucket_rows(self, bucket: int) -> np.ndarray:
        """The bucket's rows in step 1's order, before its own shuffle."""
        per = self.budget.bucket_rows // _BLOCK_ROWS
        blocks = self._blocks[bucket * per:(bucket + 1) * per]
        rows = (blocks[:, None] * _BLOCK_ROWS + np.arange(_BLOCK_ROWS)).ravel()
        n = len(self.lengths)
        if n % _BLOCK_ROWS and (blocks == n // _BLOCK_ROWS).any():
            rows = rows[rows < n]
        if self.too_long_rows:
            rows = rows[self.lengths[rows] <= self.budget.batch_tokens]
        return rows

    @functools.lru_cache(maxsize=4)  # noqa: B019 (the plan lives as long as its epoch)
    def sorted_rows(self, bucket: int) -> np.ndarray:
        """The bucket's rows as its batches take them: shuffled, then sorted
        by length (stable)."""
        rows = self._bucket_rows(bucket)
        rows = rows[_rng(self.seed, self.epoch, 2, bucket).permutation(len(rows))]
        return rows[np.argsort(self.lengths[rows], kind="stable")]

    def rows(self, batch: int) -> np.ndarray:
        """Global row ids of batch ``batch`` (a batch id), shortest first."""
        begin = int(self.begin[batch])
        return self.sorted_rows(int(self.bucket[batch]))[begin:begin + int(self.count[batch])]

    def rows_of(self, batches: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The rows of ``batches``, concatenated, and each batch's row count:
        one pass over the buckets they are in (each bucket sorted once)."""
        batches = np.asarray(batches, dtype=np.int64)
        counts = self.count[batches].astype(np.int64)
        out = np.empty(int(counts.sum()), dtype=np.int64)
        where = np.concatenate([[0], np.cumsum(counts)])
        buckets = self.bucket[batches]
        for bucket in np.unique(buckets):
            rows = self.sorted_rows(int(bucket))
            mine = np.flatnonzero(buckets == bucket)
            sizes = counts[mine]
            # Each batch's rows: its begin plus 0 .. count-1, all at once.
            within = np.arange(int(sizes.sum())) - np.repeat(np.cumsum(sizes) - sizes, sizes)
            taken = rows[np.repeat(self.begin[batches[mine]].astype(np.int64), sizes) + within]
            out[np.repeat(where[mine], sizes) + within] = taken
        return out, counts


def _rng(seed: int, epoch: int, purpose: int, index: int = 0) -> np.random.Generator:
    return np.random.default_rng([int(seed), int(epoch), purpose, index])


def plan_epoch(lengths: np.ndarray, budget: TokenBudget, *, seed: int,
               epoch: int) -> TokenBatchPlan:
    """The epoch's token-budget batches from each row's token count
    (``lengths[row]``, any unsigned or non-negative integer array).
    InvalidArgument, before anything is read, when rows are longer than the
    budget and ``budget.too_long`` is ``"refuse"``."""
    lengths = np.asarray(lengths)
    n = len(lengths)
    limit = budget.batch_tokens
    # A chunk at a time: a mask of every row would be a byte a row.
    too_long = sum(int(np.count_nonzero(lengths[i:i + _HISTOGRAM_CHUNK_ROWS] > limit))
                   for i in range(0, n, _HISTOGRAM_CHUNK_ROWS))
    if too_long and budget.too_long == "refuse":
        longest = int(lengths.max())
        raise InvalidArgument(
            f"{too_long} row{'s' if too_long != 1 else ''} of column {budget.token_column!r} "
            f"{'are' if too_long != 1 else 'is'} longer than batch_tokens={limit} (the longest "
            f"has {longest} tokens); raise batch_tokens, or pass too_long='drop' to drop and "
            "count them")
    num_blocks = -(-n // _BLOCK_ROWS)
    # Block and batch ids fit 32 bits below 2^37 rows: half the memory of int64.
    ids = np.int32 if num_blocks < 2**31 else np.int64
    blocks = _rng(seed, epoch, 1).permutation(num_blocks).astype(ids)
    plan = TokenBatchPlan(lengths, budget, seed, epoch, blocks, {}, np.empty(0, np.int64), 0,
                          too_long)
    num_buckets = -(-num_blocks // (budget.bucket_rows // _BLOCK_ROWS))
    parts = [_cut_bucket(values, counts, limit, b)
             for b, (values, counts) in enumerate(_bucket_histograms(plan, num_buckets))]
    # Field by field, each bucket's part freed once joined: the peak is one field more.
    fields = {k: np.concatenate([p.pop(k) for p in parts]) if parts else np.empty(0, np.int64)
              for k in ("bucket", "begin", "count", "tokens", "squares", "partial")}
    plan.bucket, plan.begin, plan.count = fields["bucket"], fields["begin"], fields["count"]
    plan.tokens, plan.squares = fields["tokens"], fields["squares"]
    partial = fields["partial"]
    del parts, fields
    measure = plan.tokens if budget.balance == "tokens" else plan.squares
    full = np.flatnonzero(~partial).astype(ids)
    # Batches far below the usual fill (a few rows near the budget's divisors)
    # have too few alike to share a step in a window: they are read after the
    # windows, sorted, where they share steps with each other.
    low = measure[full] < _LOW_SHARE * np.median(measure[full]) if len(full) else full
    tail = full[low]
    plan.order = np.concatenate([
        _balanced_order(full[~low], measure, budget.window_batches, _rng(seed, epoch, 3)),
        tail[np.argsort(measure[tail], kind="stable")[::-1]],
        np.flatnonzero(partial).astype(ids)])
    plan.num_full = len(full)
    plan.num_windowed = len(full) - len(tail)
    return plan


def _bucket_histograms(plan: TokenBatchPlan,
                       num_buckets: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Each bucket's distinct lengths (ascending) and how many rows have each:
    all a bucket's cut needs (its rows sorted by length are these, repeated).
    One pass over the lengths in row order, a chunk at a time: each row's
    bucket comes from its block's, so no row list is made."""
    lengths, limit = plan.lengths, plan.budget.batch_tokens
    n = len(lengths)
    longest = int(lengths.max()) if n else 0
    width = min(longest, limit) + 2  # lengths 0..min(longest, limit), then "too long"
    if num_buckets * width > _MAX_HISTOGRAM:  # wide lengths: per bucket, from its rows
        for b in range(num_buckets):
            rows = plan._bucket_rows(b)
            yield np.unique(lengths[rows], return_counts=True)
        return
    per = plan.budget.bucket_rows // _BLOCK_ROWS
    # Each block's first histogram slot (its bucket's), in row order.
    block_base = np.empty(len(plan._blocks), np.intp)
    block_base[plan._blocks] = np.arange(len(plan._blocks)) // per * width
    hist = np.zeros(num_buckets * width, np.int64)
    clip = longest > limit  # else every length is its own slot
    for i in range(0, n, _HISTOGRAM_CHUNK_ROWS):  # chunks start on a block
        chunk = lengths[i:i + _HISTOGRAM_CHUNK_ROWS]
        if clip:
            chunk = np.minimum(chunk, width - 1)
        first, whole = i // _BLOCK_ROWS, len(chunk) // _BLOCK_ROWS
        # A block's rows share its slot base: one broadcast add makes the keys.
        key = (chunk[:whole * _BLOCK_ROWS].reshape(whole, _BLOCK_ROWS)
               + block_base[first:first + whole, None]).ravel()
        hist += np.bincount(key, minlength=len(hist))
        if len(chunk) > whole * _BLOCK_ROWS:  # the table's last, shorter block
            hist += np.bincount(chunk[whole * _BLOCK_ROWS:] + block_base[first + whole],
                                minlength=len(hist))
    hist = hist.reshape(num_buckets, width)[:, :width - 1]  # too-long rows are not cut
    for b in range(num_buckets):
        values = np.flatnonzero(hist[b])
        yield values, hist[b, values]


def _cut_bucket(values: np.ndarray, counts: np.ndarray, limit: int,
                bucket: int) -> dict[str, np.ndarray]:
    """One bucket's batches (step 2) from its distinct lengths (ascending)
    and their row counts."""
    values = np.asarray(values, np.int64)
    counts = np.asarray(counts, np.int64)
    n = int(counts.sum())
    if n == 0:
        return {"bucket": np.empty(0, np.uint32), "begin": np.empty(0, np.uint32),
                "count": np.empty(0, np.uint32), "tokens": np.empty(0, np.int64),
                "squares": np.empty(0, np.int64), "partial": np.empty(0, bool)}
    before = np.concatenate([[0], np.cumsum(counts)])  # rows shorter than each value
    caps = limit // np.maximum(values, 1)
    run_first = np.concatenate([[0], np.flatnonzero(np.diff(caps)) + 1])
    run_starts = before[run_first]
    run_ends = np.concatenate([run_starts[1:], [n]])
    ends: list[Any] = []
    pos = 0  # the open batch's first row
    runs = zip(run_starts.tolist(), run_ends.tolist(), caps[run_first].tolist(), strict=True)
    for a, e, cap in runs:
        if a - pos >= cap:  # shorter rows left over fill a batch of this capacity: close it
            ends.append([a])
            pos = a
        full = (e - pos) // cap
        if full:
            ends.append(pos + cap * np.arange(1, full + 1))
            pos += full * cap
    partial_tail = pos < n
    if partial_tail:
        ends.append([n])
    stop = np.concatenate([np.asarray(x, dtype=np.int64) for x in ends])
    begin = np.concatenate([[0], stop[:-1]])

    # Sums over the sorted rows before each cut: whole values, then part of one.
    cuts = np.concatenate([[0], stop])
    k = np.searchsorted(before, cuts, side="right") - 1
    part = cuts - before[k]
    at = np.append(values, 0)[k]
    tokens = np.diff(np.concatenate([[0], np.cumsum(counts * values)])[k] + part * at)
    squares = np.diff(np.concatenate([[0], np.cumsum(counts * values * values)])[k]
                      + part * at * at)
    partial = np.zeros(len(stop), bool)
    if partial_tail:
        partial[-1] = 1
    return {"bucket": np.full(len(stop), bucket, np.uint32), "begin": begin.astype(np.uint32),
            "count": (stop - begin).astype(np.uint32),
            "tokens": tokens.astype(np.uint32 if limit < 2**32 else np.int64), "squares": squares,
            "partial": partial.astype(bool)}


def _balanced_order(batches: np.ndarray, measure: np.ndarray, window: int,
                    rng: np.random.Generator) -> np.ndarray:
    """Step 3: ``batches`` shuffled, then each window sorted by ``measure``,
    alternately ascending and descending."""
    shuffled = batches[rng.permutation(len(batches))]
    out = np.empty_like(shuffled)
    cut = len(shuffled) // window * window
    if cut:
        grid = shuffled[:cut].reshape(-1, window)
        ranked = np.take_along_axis(grid, np.argsort(measure[grid], axis=1, kind="stable"), 1)
        ranked[1::2] = ranked[1::2, ::-1]
        out[:cut] = ranked.ravel()
    tail = shuffled[cut:]
    tail = tail[np.argsort(measure[tail], kind="stable")]
    out[cut:] = tail[::-1] if (cut // window) % 2 else tail
    return out
