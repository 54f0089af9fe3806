"""Token-budget batches: an epoch cut into batches bounded by tokens, not rows.

``plan_epoch`` turns one epoch's (seed, epoch, per-row token counts) into a
*sequence of batches* that does not depend on the world size, so every rank
plans it alike with no collective, and a job resumes at any step with another
world size (the position is a count of batches of that sequence). Steps take
the sequence's batches ``world_size`` at a time, rank ``r`` the ``r``-th
(docs/epochs.md, "Token-budget batches"). All numpy: no per-row Python.

Rows are planned by their length *codes* (``LengthCodes``): the lengths
themselves (exact), or ``encode_lengths``'s byte a row, each code budgeted
by its longest length, so the budget holds exactly either way.

How the sequence is made:

1. Rows are shuffled in blocks of ``_BLOCK_ROWS`` consecutive rows (a keyed
   permutation of the blocks) and cut into *buckets* of ``bucket_rows`` rows
   of that order; a bucket's rows are listed column by column (the i-th
   row of each of its blocks in turn, i in a keyed order) and sorted by code
   (stable), so rows of a batch have alike lengths and padding stays small,
   and rows of one block are spread over the code's batches. Reading a
   batch's rows orders its codes alone (``TokenBatchPlan._bucket_take``).
2. A bucket is cut into batches in that order. A row whose code's longest
   length is ``L`` fits ``T // L`` rows of its code in a budget of ``T``: runs
   of equal capacity are cut into batches of that many rows, rows left over
   from a run open the next batch (they are shorter, so the longer run's
   capacity still bounds it). Padded size ``rows x longest <= T`` always (and so ``sum <= T``, the
   ``varlen`` bound). Each bucket leaves at most one *partial* batch.
3. The full batches are read in two parts. The *band*: batches that hold
   at least ``_BAND`` (90%) of the most tokens any batch can hold (their
   true tokens, bounded below by their codes), so any of them are within
   10% of each other: a step of band batches is balanced whatever the
   world size and start. They are shuffled and cut into windows of
   ``window_batches``; each window is sorted by its batches' tokens, one
   ascending, the next descending (the last descending), so a step's
   batches are alike closer still. The *tail*, the rest (rows just above
   a divisor of T, the shortest rows' batch of a bucket: padding bounds
   them), sorted by tokens, is read in runs of ``_TOUR_BATCHES`` or more
   spread over the epoch (``_with_tours``): a step there reads neighbours
   of the sorted tail, the closest batches there are; runs of a cluster
   below a gap of the tail start and end on multiples of ``_ALIGN``, so
   steps of a world size dividing it cross no gap there. The partial
   batches end the sequence (``drop_last`` drops them with the steps'
   remainder). ``balance="sq"`` has no band (sums of squares spread over
   orders of magnitude): all its full batches are windowed, sorted by the
   sum of squared lengths.
"""

from __future__ import annotations

import dataclasses
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import pyarrow as pa

from ._length_codes import _CHUNK_ROWS, LengthCodes, chunked_max, encode_lengths
from .errors import InvalidArgument

_BLOCK_ROWS = 64  # rows shuffled together in step 1: a gather of 64 rows is a memcpy
BALANCES = ("tokens", "sq")
_MAX_HISTOGRAM = 1 << 22  # bucket x length counts held at once (32 MiB); wider: per bucket
_MAX_EXACT = 1 << 20  # longest row planned from exact lengths (else from codes)
_BAND = 0.9  # of the most tokens a batch can hold: the band's floor (step 3)
_TOUR_BATCHES = 4096  # the fewest tail batches of a tour (step 3)
_ALIGN = 192  # a cluster's segments start and end on multiples of it (step 3): 64 x 3
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

    Batch ids run bucket by bucket: bucket ``b``'s batches are ids
    ``bucket_first[b]`` to ``bucket_first[b + 1] - 1``, each ``count`` rows
    of its bucket's sorted order in turn (``bucket`` and ``begin`` give them
    per batch, made on demand). Per batch: ``count``, ``tokens`` and
    ``squares`` (sum of lengths, of squared lengths: exact from exact codes,
    estimated from each code's mean otherwise).
    ``order``: the sequence, batch ids in the order steps read them; its
    first ``num_full`` are full batches, the rest partial. ``low``: per
    batch, whether it is below the band (read in the tail's tours);
    ``num_windowed``: the band's batches.
    ``too_long_rows``: rows dropped for being longer than the budget."""

    def __init__(self, lengths: LengthCodes, budget: TokenBudget, seed: int, epoch: int,
                 blocks: np.ndarray, fields: dict[str, np.ndarray], order: np.ndarray,
                 num_full: int, too_long_rows: int) -> None:
        self.lengths = lengths  # the rows' codes it was planned from
        # Codes below this fit the budget (upper is ascending).
        self.codes_fit = int(np.searchsorted(lengths.upper, budget.batch_tokens, side="right"))
        self.budget = budget
        self.seed, self.epoch = seed, epoch
        self._blocks = blocks
        empty = np.empty(0, np.int64)
        self.bucket_first = fields.get("bucket_first", np.zeros(1, np.int64))
        self._histograms: list[tuple[np.ndarray, np.ndarray]] = []  # per bucket: codes, rows
        self.count = fields.get("count", empty)
        self.tokens = fields.get("tokens", empty)
        self.squares = fields.get("squares", empty)
        self.order = order
        self.num_full = num_full
        self.num_windowed = num_full  # full batches of the band, read in windows (step 3)
        self.low = np.zeros(len(self.count), bool)  # per batch: below the band (step 3)
        self.too_long_rows = too_long_rows

    @property
    def bucket(self) -> np.ndarray:
        """Each batch's bucket (made on demand: not kept)."""
        return np.repeat(np.arange(len(self.bucket_first) - 1, dtype=np.uint32),
                         np.diff(self.bucket_first))

    @property
    def begin(self) -> np.ndarray:
        """Each batch's first row in its bucket's sorted order (made on demand)."""
        starts = np.cumsum(self.count, dtype=np.int64) - self.count
        firsts = np.append(starts, 0)[self.bucket_first[:-1]]  # each bucket's first batch's
        return starts - np.repeat(firsts, np.diff(self.bucket_first))

    def _bucket_of(self, batches: np.ndarray) -> np.ndarray:
        return np.searchsorted(self.bucket_first, batches, side="right") - 1

    def _begins(self, bucket: int, batches: np.ndarray) -> np.ndarray:
        """``batches``' (of ``bucket``) first rows in its sorted order."""
        first = int(self.bucket_first[bucket])
        counts = self.count[first:int(self.bucket_first[bucket + 1])]
        return (np.cumsum(counts, dtype=np.int64) - counts)[batches - first]

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
        n = len(self.lengths.codes)
        if n % _BLOCK_ROWS and (blocks == n // _BLOCK_ROWS).any():
            rows = rows[rows < n]
        if self.too_long_rows:
            rows = rows[self.lengths.codes[rows] < self.codes_fit]
        return rows

    def rows(self, batch: int) -> np.ndarray:
        """Global row ids of batch ``batch`` (a batch id), shortest first."""
        return self.rows_of(np.asarray([batch]))[0]

    def rows_of(self, batches: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The rows of ``batches``, concatenated, and each batch's row count:
        one pass over the codes of each bucket they are in (``_bucket_take``)."""
        batches = np.asarray(batches, dtype=np.int64)
        counts = self.count[batches].astype(np.int64)
        out = np.empty(int(counts.sum()), dtype=np.int64)
        where = np.concatenate([[0], np.cumsum(counts)])
        buckets = self._bucket_of(batches)
        for bucket in np.unique(buckets):
            mine = np.flatnonzero(buckets == bucket)
            sizes = counts[mine]
            # Each batch's positions in its bucket's order: its begin plus 0 .. count-1.
            within = np.arange(int(sizes.sum())) - np.repeat(np.cumsum(sizes) - sizes, sizes)
            positions = np.repeat(self._begins(int(bucket), batches[mine]), sizes) + within
            out[np.repeat(where[mine], sizes) + within] = self._bucket_take(int(bucket),
                                                                            positions)
        return out, counts

    def _bucket_take(self, bucket: int, positions: np.ndarray) -> np.ndarray:
        """The rows at ``positions`` of the bucket's order: its rows sorted by
        code (stable) as listed column by column, the i-th row of each of its
        blocks in turn, i in a keyed order (a shuffle that needs no
        permutation of the rows: rows of one code and block end up a 64th of
        the code's rows apart, in different batches). Only the codes the
        positions fall in are ordered: the bucket's codes are scanned once (a
        gather of its blocks), its rows of other codes never listed."""
        present, counts = self._histograms[bucket]
        before = np.concatenate([[0], np.cumsum(counts)])  # each present code's first position
        k = np.searchsorted(before, positions, side="right") - 1  # the position's code index
        needed = np.zeros(len(present), bool)
        needed[np.unique(k)] = True
        lut = np.zeros(len(self.lengths.upper), bool)
        lut[present[needed]] = True
        per = self.budget.bucket_rows // _BLOCK_ROWS
        blocks = self._blocks[bucket * per:(bucket + 1) * per]
        columns = _rng(self.seed, self.epoch, 2, bucket).permutation(_BLOCK_ROWS)
        grid = np.ascontiguousarray(_gather_blocks(self.lengths.codes, blocks)[:, columns].T)
        picked = np.flatnonzero(lut[grid])
        rows = (blocks[picked % len(blocks)].astype(np.int64) * _BLOCK_ROWS
                + columns[picked // len(blocks)])
        codes = grid.reshape(-1)[picked]
        del grid, picked
        real = rows < len(self.lengths.codes)  # the table's last block may be short
        rows = rows[real][np.argsort(codes[real], kind="stable")]  # a radix sort of codes
        # Picked rows hold every row of the needed codes, in the bucket's order.
        picked_before = np.concatenate([[0], np.cumsum(np.where(needed, counts, 0))])
        return rows[picked_before[k] + positions - before[k]]


def _gather_blocks(codes: np.ndarray, blocks: np.ndarray) -> np.ndarray:
    """``codes`` of ``blocks``' rows, a row of ``_BLOCK_ROWS`` per block;
    past the table's end (its last block may be short), code 0."""
    n = len(codes)
    whole = n // _BLOCK_ROWS
    short = blocks >= whole
    grid = codes[:whole * _BLOCK_ROWS].reshape(whole, _BLOCK_ROWS)[
        np.where(short, 0, blocks)] if whole else np.zeros((len(blocks), _BLOCK_ROWS),
                                                           codes.dtype)
    for i in np.flatnonzero(short):  # at most one
        tail = codes[whole * _BLOCK_ROWS:]
        grid[i] = 0
        grid[i, :len(tail)] = tail
    return grid


def _rng(seed: int, epoch: int, purpose: int, index: int = 0) -> np.random.Generator:
    return np.random.default_rng([int(seed), int(epoch), purpose, index])


def plan_epoch(lengths: np.ndarray | LengthCodes, budget: TokenBudget, *, seed: int,
               epoch: int) -> TokenBatchPlan:
    """The epoch's token-budget batches from each row's token count
    (``lengths[row]``, any unsigned or non-negative integer array: exact,
    planned from a histogram as wide as the longest row) or from its code
    (``encode_lengths``: a byte a row, batches budgeted by each code's
    longest length, tokens estimated). InvalidArgument, before anything is
    read, when rows are longer than the budget and ``budget.too_long`` is
    ``"refuse"``, or when codes were made for another budget that cannot
    tell the rows longer than this one (``LengthCodes.tells``).

    Codes made for a larger budget T plan a budget ``limit`` < T (a
    mixture's share of T) within it: (1) every row's length is at most its
    code's ``upper``, whatever budget the codes were made for, and a batch
    of k rows whose highest code is c is cut only where ``k x upper[c] <=
    limit``, so its true padded size (and total tokens) is too; (2) the cut
    leaves out the rows of codes whose ``upper`` exceeds ``limit`` as too
    long, which are exactly the rows longer than ``limit`` where
    ``codes.tells(limit)`` (checked here; else refused), so ``too_long``
    refuses or drops those rows and no other."""
    limit = budget.batch_tokens
    if isinstance(lengths, LengthCodes):
        codes = lengths
        if not codes.tells(limit):
            raise InvalidArgument(
                f"row length codes coded for batch_tokens={codes.batch_tokens}, not {limit}, "
                "cannot tell which rows are longer than it: encode the lengths for this budget")
    else:
        lengths = np.asarray(lengths)
        # Exact where a histogram as wide as the longest row is small.
        codes = (LengthCodes.of_lengths(lengths) if chunked_max(lengths) < _MAX_EXACT
                 else encode_lengths(lengths, limit))
    n = len(codes.codes)
    too_long = codes.num_over(limit)
    if too_long and budget.too_long == "refuse":
        raise InvalidArgument(
            f"{too_long} row{'s' if too_long != 1 else ''} of column {budget.token_column!r} "
            f"{'are' if too_long != 1 else 'is'} longer than batch_tokens={limit} (the longest "
            f"has {codes.longest} tokens); raise batch_tokens, or pass too_long='drop' to drop "
            "and count them")
    num_blocks = -(-n // _BLOCK_ROWS)
    # Block and batch ids fit 32 bits below 2^37 rows: half the memory of int64.
    ids = np.int32 if num_blocks < 2**31 else np.int64
    blocks = _rng(seed, epoch, 1).permutation(num_blocks).astype(ids)
    plan = TokenBatchPlan(codes, budget, seed, epoch, blocks, {}, np.empty(0, np.int64), 0,
                          too_long)
    num_buckets = -(-num_blocks // (budget.bucket_rows // _BLOCK_ROWS))
    # Each bucket's codes and counts, kept (small) for reading its rows later.
    plan._histograms = list(_bucket_histograms(plan, num_buckets))
    floor = _band_floor(plan._histograms, codes, limit) if budget.balance == "tokens" else 0.0
    parts = [_cut_bucket(present, counts, codes, limit, floor)
             for present, counts in plan._histograms]
    plan.bucket_first = np.concatenate([[0], np.cumsum([len(p["count"]) for p in parts],
                                                       dtype=np.int64)])
    # Field by field, each bucket's part freed once joined: the peak is one field more.
    fields = {k: np.concatenate([p.pop(k) for p in parts]) if parts else np.empty(0, np.int64)
              for k in ("count", "tokens", "squares", "partial", "low")}
    plan.count, plan.tokens, plan.squares = fields["count"], fields["tokens"], fields["squares"]
    partial, low = fields["partial"], fields["low"].astype(bool, copy=False)
    del parts, fields
    measure = plan.tokens if budget.balance == "tokens" else plan.squares
    full = np.flatnonzero(~partial).astype(ids)
    band = full[~low[full]]
    plan.order = np.concatenate([
        _with_tours(_balanced_order(band, measure, budget.window_batches, _rng(seed, epoch, 3)),
                    _descending(full[low[full]], measure), budget.window_batches, measure,
                    min((float(measure[band[i:i + _CHUNK_ROWS]].min())
                         for i in range(0, len(band), _CHUNK_ROWS)), default=None)),
        _descending(np.flatnonzero(partial).astype(ids), measure)])
    plan.num_full = len(full)
    plan.num_windowed = len(band)
    plan.low = low
    return plan


def _bucket_histograms(plan: TokenBatchPlan,
                       num_buckets: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Each bucket's codes present (ascending) and how many rows have each:
    all a bucket's cut needs (its rows sorted by code are these, repeated).
    One pass over the codes in row order, a chunk at a time: each row's
    bucket comes from its block's, so no row list is made."""
    codes, fit = plan.lengths.codes, plan.codes_fit
    width = fit + 1  # the codes that fit, then "too long"
    if num_buckets * width > _MAX_HISTOGRAM:  # wide codes: per bucket, from its rows
        for b in range(num_buckets):
            rows = plan._bucket_rows(b)
            yield np.unique(codes[rows], return_counts=True)
        return
    per = plan.budget.bucket_rows // _BLOCK_ROWS
    # Each block's first histogram slot (its bucket's), in row order; the
    # keys fit 32 bits (the histogram is bounded), half the scratch of intp.
    block_base = np.empty(len(plan._blocks), np.uint32)
    block_base[plan._blocks] = np.arange(len(plan._blocks), dtype=np.uint32) // per * width
    hist = np.zeros(num_buckets * width, np.int64)
    clip = len(plan.lengths.upper) > width  # else every code is its own slot
    step = _CHUNK_ROWS
    for i in range(0, len(codes), step):  # chunks start on a block
        chunk = codes[i:i + step]
        if clip:
            chunk = np.minimum(chunk, fit)
        first, whole = i // _BLOCK_ROWS, len(chunk) // _BLOCK_ROWS
        # A block's rows share its slot base: one broadcast add makes the keys
        # (codes here are below width, so the cast to 32 bits keeps them).
        key = np.add(chunk[:whole * _BLOCK_ROWS].reshape(whole, _BLOCK_ROWS),
                     block_base[first:first + whole, None], dtype=np.uint32,
                     casting="unsafe").ravel()
        hist += np.bincount(key, minlength=len(hist))
        if len(chunk) > whole * _BLOCK_ROWS:  # the table's last, shorter block
            hist += np.bincount(chunk[whole * _BLOCK_ROWS:] + block_base[first + whole],
                                minlength=len(hist))
    hist = hist.reshape(num_buckets, width)[:, :fit]  # too-long rows are not cut
    for b in range(num_buckets):
        present = np.flatnonzero(hist[b])
        yield present, hist[b, present]


def _band_floor(histograms: list[tuple[np.ndarray, np.ndarray]], codes: LengthCodes,
                limit: int) -> float:
    """The band's floor (step 3): ``_BAND`` of the most tokens a batch can
    hold. A batch whose longest code is ``c`` holds at most ``limit //
    upper[c]`` rows of at most ``upper[c]`` tokens, so no batch's true
    tokens exceed the largest such product over the codes present."""
    present = np.unique(np.concatenate([p for p, _ in histograms] or [np.empty(0, np.int64)]))
    upper = codes.upper[present].astype(np.int64)
    return _BAND * float((limit // np.maximum(upper, 1) * upper).max(initial=0))


def _cut_bucket(present: np.ndarray, counts: np.ndarray, codes: LengthCodes,
                limit: int, floor: float) -> dict[str, np.ndarray]:
    """One bucket's batches (step 2) from its codes present (ascending) and
    their row counts. A batch of ``k`` rows of codes up to ``c`` is budgeted
    as ``k x upper[c]``, which bounds the rows' true padded size. ``low``:
    the batches whose true tokens may be below ``floor`` (each code's rows
    are longer than the code below's longest: that bounds them)."""
    counts = np.asarray(counts, np.int64)
    n = int(counts.sum())
    if n == 0:
        return {"count": np.empty(0, np.uint32), "tokens": np.empty(0, np.int64),
                "squares": np.empty(0, np.int64), "partial": np.empty(0, bool),
                "low": np.empty(0, bool)}
    before = np.concatenate([[0], np.cumsum(counts)])  # rows of lower codes than each
    caps = limit // np.maximum(codes.upper[present], 1)
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

    # Sums over the sorted rows before each cut: whole codes, then part of one
    # (exact for exact codes: float64 holds integers to 2^53).
    cuts = np.concatenate([[0], stop])
    k = np.searchsorted(before, cuts, side="right") - 1
    part = cuts - before[k]
    mean = np.append(codes.mean[present], 0)
    mean_sq = np.append(codes.mean_sq[present], 0)
    tokens = _sums(counts, mean, k, part)
    squares = _sums(counts, mean_sq, k, part)
    if codes.exact:
        low = tokens < floor
    else:  # the least tokens a batch's rows can have: each code's above the one below's
        below = np.where(present > 0, codes.upper[np.maximum(present - 1, 0)] + 1, 0)
        least = np.append(below, 0).astype(np.float64)
        low = _sums(counts, least, k, part) < floor
    partial = np.zeros(len(stop), bool)
    if partial_tail:
        partial[-1] = 1
    # Narrow types where the budget bounds them: tokens <= T, squares <= T^2.
    return {"count": (stop - begin).astype(np.uint32),
            "tokens": np.rint(tokens).astype(np.uint32 if limit < 2**32 else np.int64),
            "squares": np.rint(squares).astype(np.uint32 if limit < 2**16 else np.int64),
            "partial": partial, "low": low}


def _sums(counts: np.ndarray, per_row: np.ndarray, k: np.ndarray, part: np.ndarray) -> np.ndarray:
    """Each batch's sum of ``per_row`` (per present code, then 0) over its
    rows: whole codes before each cut, then ``part`` rows of code ``k``."""
    return np.diff(np.concatenate([[0], np.cumsum(counts * per_row[:-1])])[k] + part * per_row[k])


def _descending(batches: np.ndarray, measure: np.ndarray) -> np.ndarray:
    """``batches`` sorted by ``measure``, largest first (ties in id order):
    a radix sort where the measure fits 16 bits (tokens of T < 2^16)."""
    key = measure[batches]
    top = int(key.max()) if len(key) else 0
    key = (np.subtract(top, key, dtype=np.uint16, casting="unsafe") if top < 2**16
           else np.subtract(top, key.astype(np.int64)))
    return batches[np.argsort(key, kind="stable")]


def _with_tours(windows: np.ndarray, tail: np.ndarray, window: int, measure: np.ndarray,
                least: float | None) -> np.ndarray:
    """Step 3's sequence: the band's ``windows`` (``_balanced_order``, their
    least batch ``least``) with the tail (descending), in runs spread
    evenly over the epoch, of ``_TOUR_BATCHES`` or more (``_tour``). The
    tail's batches down to its first *gap* (two neighbours more than 10%
    apart) are read in tours, each after a descending window: a tour
    leaves and meets the windows at their least batches and the tail's
    largest, alike. Each cluster below a gap is read in segments whose
    lengths and starts are multiples of ``_ALIGN``: a job whose world size
    divides it and which started at such a position has no step across
    the gap. The rest (each cluster's remainder, the last tour) ends the
    full batches descending, down to the tail's least batch (which
    ``drop_last``'s remainder drops first). Runs are views of the tail,
    copied once, into the sequence."""
    bounds = np.concatenate([[0], _gaps(tail, measure, least), [len(tail)]])
    near = tail[:bounds[1]]  # empty where the tail starts below a gap
    count = -(-len(windows) // window)
    down = np.arange(count - 1, -1, -2)[::-1]  # descending windows: the last, every other
    m = max(1, min(len(near) // _TOUR_BATCHES, len(down)))
    after = down[(np.arange(1, m + 1) * len(down) + m - 1) // m - 1] if len(down) else [0]
    # (band offset, order among equals, run): runs go in after that many band batches.
    events = [(int(min((a + 1) * window, len(windows))), 1, _tour(near, k, m))
              for k, a in enumerate(after[:-1])]
    last = _tour(near, m - 1, m, down_only=True)
    for a, b in zip(bounds[1:-1].tolist(), bounds[2:].tolist(), strict=True):
        run = tail[a:b]  # a cluster below a gap
        units = len(run) // _ALIGN
        parts = max(1, units * _ALIGN // _TOUR_BATCHES) if units else 0
        whole = units // max(parts, 1) * _ALIGN * parts
        for k in range(parts):
            events.append((int(len(windows) * (k + 0.5) / parts), 0, _tour(run[:whole], k, parts)))
        last.append(run[whole:])
    out, pos, at = [], 0, 0
    for offset, aligned, runs in sorted(events, key=lambda e: (e[0], e[1])):
        size = sum(len(r) for r in runs)
        cut = max(offset, at)
        if not aligned:  # a cluster's segment starts on a multiple of _ALIGN
            cut += (at - pos - cut) % _ALIGN
            if cut > len(windows):
                last[1:1] = runs  # no band left to align it: read with the rest
                continue
        out += [windows[at:cut], *runs]
        pos += cut - at + size
        at = cut
    return np.concatenate(out + [windows[at:]] + last)


def _gaps(tail: np.ndarray, measure: np.ndarray, least: float | None) -> np.ndarray:
    """Positions of ``tail`` (descending) more than 10% below the batch
    before (the first: below ``least``, or always where it is None), a
    chunk at a time: the scratch is bounded, not a batch's size."""
    out, prev = [np.empty(0, np.int64)], np.inf if least is None else float(least)
    for i in range(0, len(tail), _CHUNK_ROWS):
        v = measure[tail[i:i + _CHUNK_ROWS]].astype(np.float64)
        out.append(np.flatnonzero(v < _BAND * np.concatenate([[prev], v[:-1]])) + i)
        prev = v[-1]
    return np.concatenate(out)


def _tour(tail: np.ndarray, k: int, m: int, down_only: bool = False) -> list[np.ndarray]:
    """Run ``k`` of ``m`` over ``tail`` (descending), as views: every
    ``m``-th batch, dealt so the last run holds the least; its even batches
    descending, then its odd ones ascending (or all descending)."""
    run = tail[(k + len(tail) - m) % m::m] if len(tail) else tail
    return [run] if down_only else [run[0::2], run[1::2][::-1]]


def _balanced_order(batches: np.ndarray, measure: np.ndarray, window: int,
                    rng: np.random.Generator) -> np.ndarray:
    """Step 3: ``batches`` shuffled, then each window sorted by ``measure``,
    alternately ascending and descending, the last descending (into the
    tail's descending run). A slab of windows at a time: the sort's scratch
    is bounded, not a batch's size."""
    shuffled = rng.permutation(batches)  # the order batches[rng.permutation(len)] has
    out = np.empty_like(shuffled)
    cut = len(shuffled) // window * window
    windows = -(-len(shuffled) // window)
    grid = shuffled[:cut].reshape(-1, window)
    slab = max(1, _CHUNK_ROWS // window)  # windows sorted at once
    for w in range(0, len(grid), slab):
        part = grid[w:w + slab]
        ranked = np.take_along_axis(part, np.argsort(measure[part], axis=1, kind="stable"), 1)
        down = (windows - 1 - w - np.arange(len(part))) % 2 == 0  # the last window's parity
        ranked[down] = ranked[down, ::-1]
        out[w * window:(w + len(part)) * window] = ranked.ravel()
    tail = shuffled[cut:]
    out[cut:] = tail[np.argsort(measure[tail], kind="stable")][::-1]  # the last window
    return out


# -- reading an epoch ----------------------------------------------------------

_ROWS_PER_TAKE = 65536  # rows asked of the nodes at once (several batches per take)
_ROWS_PER_PASS = 1 << 21  # rows of the takes whose ids one pass over the buckets makes
_PLANS: OrderedDict[tuple[Any, ...], TokenBatchPlan] = OrderedDict()  # the latest few
_MAX_PLANS = 4
_plans_lock = threading.Lock()


def budget_of(fields: dict[str, Any]) -> TokenBudget:
    """Takes the TokenBudget's keys (``batch_tokens``, ``token_column``, ...)
    out of ``fields``."""
    names = [f.name for f in dataclasses.fields(TokenBudget)]
    return TokenBudget(**{k: fields.pop(k) for k in names if k in fields})


def epoch_plan(client: Any, name: str, budget: TokenBudget, seed: int,
               epoch: int, generation: int | None = None,
               world_size: int | None = None) -> TokenBatchPlan:
    """The epoch's plan from the dataset's row length codes (fetched and
    coded once per generation and budget by the client, a byte a row) of
    the copy at ``generation`` (None: the one the head bound this epoch of
    a job of ``world_size`` ranks to, so every rank plans from one copy
    however a refresh falls between their requests; without ``world_size``
    the current one), kept for the latest few epochs."""
    key = (int(seed), int(epoch), int(world_size)) if world_size is not None else None
    codes = client.row_length_codes(name, budget.token_column, budget.batch_tokens,
                                    generation, epoch_key=key)
    key = (name, id(codes), budget, int(seed), int(epoch))
    with _plans_lock:
        plan = _PLANS.get(key)
        if plan is not None and plan.lengths is codes:
            _PLANS.move_to_end(key)
            return plan
    plan = plan_epoch(codes, budget, seed=seed, epoch=epoch)
    with _plans_lock:
        _PLANS[key] = plan
        while len(_PLANS) > _MAX_PLANS:
            _PLANS.popitem(last=False)
    return plan


def consumer_batches(plan: TokenBatchPlan, world_size: int, rank: int, num_workers: int,
                     worker: int, start: int, drop_last: bool) -> np.ndarray:
    """The batch ids one DataLoader worker of one rank reads: the rank's
    steps ``worker, worker + K, ...`` (docs/epochs.md, section 3)."""
    return plan.rank_batches(world_size, rank, start, drop_last)[worker::max(1, num_workers)]


def take_groups(plan: TokenBatchPlan, batches: np.ndarray) -> list[np.ndarray]:
    """``batches`` in groups of whole batches, what one ``Client.take`` reads
    each (``ramped_groups``: the first one batch)."""
    return [batches[g] for g in ramped_groups(plan.count[batches])]


def ramped_groups(sizes: np.ndarray, limit: int | None = None) -> list[np.ndarray]:
    """Indices ``0 .. len(sizes) - 1`` in consecutive groups for takes of
    about ``limit`` rows (default ``_ROWS_PER_TAKE``), ``sizes[i]`` rows in
    item ``i`` (a batch, a step). The first groups ramp up: the first is one
    item, each next about twice the rows of the one before, so a consumer's
    first batch waits for one batch's take, not a whole group's; then
    groups of ``limit``, each closed by the item that crosses a multiple of
    it. In order: the items read are the same, in the same order."""
    limit = _ROWS_PER_TAKE if limit is None else limit
    n = len(sizes)
    if not n:
        return []
    ends = np.cumsum(np.asarray(sizes, dtype=np.int64))
    out, at, target = [np.arange(1)], 1, 2 * max(1, int(ends[0]))
    while at < n and target < limit:  # at most log2(limit) groups
        base = int(ends[at - 1])
        stop = max(at + 1, int(np.searchsorted(ends, base + target, side="right")))
        out.append(np.arange(at, stop))
        at, target = stop, 2 * target
    if at < n:
        rest = ends[at:] - int(ends[at - 1])
        cuts = np.unique(np.searchsorted(rest, np.arange(1, int(rest[-1]) // limit + 1) * limit))
        out += [g for g in np.split(np.arange(at, n), cuts + 1) if len(g)]
    return out


class RowPasses:
    """The rows of a consumer's groups of batches (``take_groups``), made a
    *pass* of consecutive groups at a time, up to ``_ROWS_PER_PASS`` rows: a
    take has batches of nearly every bucket, and one pass reads each
    bucket's codes once for all its groups instead of once a group. Holds
    one pass's rows (8 bytes a row). Not thread-safe: one reader."""

    def __init__(self, plan: TokenBatchPlan, groups: list[np.ndarray]) -> None:
        self.plan, self.groups = plan, groups
        sizes = np.array([int(plan.count[g].astype(np.int64).sum()) for g in groups], np.int64)
        starts = np.cumsum(sizes) - sizes
        self.pass_of = starts // _ROWS_PER_PASS  # a group over the limit is a pass alone
        self._pass = -1
        self._rows: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    def rows(self, group: int) -> tuple[np.ndarray, np.ndarray]:
        """Group ``group``'s rows and each of its batches' row count."""
        which = int(self.pass_of[group])
        if which != self._pass:
            members = np.flatnonzero(self.pass_of == which)
            rows, counts = self.plan.rows_of(np.concatenate([self.groups[i] for i in members]))
            row_ends = np.cumsum(counts)
            self._rows.clear()
            first = 0
            for i in members:
                last = first + len(self.groups[i])
                lo = int(row_ends[first - 1]) if first else 0
                self._rows[int(i)] = (rows[lo:int(row_ends[last - 1])], counts[first:last])
                first = last
            self._pass = which
        return self._rows[group]


def iter_token_epoch(client: Any, name: str, epoch_plan_: Any, *,
                     convert: Callable[[pa.RecordBatch], Any] | None, prefetch: int,
                     on_shape: Callable[[dict[str, Any]], None] | None = None,
                     **fields: Any) -> Iterator[Any]:
    """``Client.iter_epoch`` with ``batch_tokens``: this consumer's
    token-budget batches, read with ``Client.take`` a few batches at a time
    (the next group on a background thread when ``prefetch`` > 0).
    ``fields``: the TokenBudget's and the EpochPlan's (seed, epoch,
    world_size, rank, num_workers, worker, drop_last, columns, start: a
    position of the batch sequence, first_batch: of this consumer's,
    generation: the copy to plan from and read, None for the current one).
    ``on_shape`` gets the consumer's batches, ``start`` and the generation."""
    budget = budget_of(fields)
    p = epoch_plan_.replace(**fields)
    plan = epoch_plan(client, name, budget, p.seed or 0, p.epoch or 0, p.generation,
                      p.world_size or 1)
    drop_last = True if p.drop_last is None else bool(p.drop_last)
    mine = consumer_batches(plan, p.world_size or 1, p.rank or 0, p.num_workers or 0,
                            p.worker or 0, p.start or 0, drop_last)[p.first_batch or 0:]
    if on_shape is not None:
        on_shape({"batches": len(mine), "start": p.start or 0,
                  "generation": plan.lengths.generation})
    columns = list(p.columns) if p.columns is not None else None
    groups = take_groups(plan, mine)
    passes = RowPasses(plan, groups)
    generation = plan.lengths.generation

    def read(group: int) -> list[pa.RecordBatch]:
        rows, counts = passes.rows(group)
        # The rows of the copy the plan was made from, even after a refresh
        # replaced it (the head keeps it for its readers): InvalidArgument
        # naming both generations once it is freed.
        table = client.take(name, rows, columns, generation).combine_chunks()
        batch = table.to_batches()[0] if table.num_rows else pa.RecordBatch.from_pylist(
            [], schema=table.schema)
        offsets = np.concatenate([[0], np.cumsum(counts)])
        return [batch.slice(int(offsets[i]), int(counts[i])) for i in range(len(counts))]

    if prefetch <= 0 or len(groups) < 2:
        for group in range(len(groups)):
            for batch in read(group):
                yield convert(batch) if convert is not None else batch
        return
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="icefloe-token-batches") as pool:
        pending = pool.submit(read, 0)
        for k in range(len(groups)):
            batches = pending.result()
            if k + 1 < len(groups):
                pending = pool.submit(read, k + 1)
            for batch in batches:
                yield convert(batch) if convert is not None else batch
