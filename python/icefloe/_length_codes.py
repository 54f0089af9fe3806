"""Row length codes: each row's token count as the token-budget planner
sorts and cuts by it (docs/epochs.md section 7, "Codes").

``encode_lengths`` codes the lengths the nodes send (2 bytes a row) in a byte
a row for one budget T: exact up to 255 distinct lengths, else bins of the
lengths present, each budgeted by its longest length, so a batch cut by codes
never exceeds T. ``LengthCodes.of_lengths`` takes the lengths themselves as
exact codes. ``_codes_file.host_codes`` keeps one copy a host: a file the
first consumer makes and every other maps without fetching the lengths.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

_CHUNK_ROWS = 1 << 17  # rows of the lengths or codes scanned at once (~1 MiB of scratch)
_MAX_CODES = 256  # encode_lengths: a byte a row
_MAX_LOOKUP = 1 << 20  # length values counted and looked up one by one (8 MiB); wider: merged


@dataclasses.dataclass(frozen=True, eq=False)
class LengthCodes:
    """Each row's length as a *code* the planner sorts and cuts by.

    ``codes[row]``: the row's code; ``upper[code]``: the longest length with
    that code (ascending in the code), which budgets the row, so a budget is
    never exceeded; ``mean[code]``, ``mean_sq[code]``: the mean length and
    squared length of the rows with it, which estimate a batch's tokens.
    ``exact``: each code is one length (the codes are the lengths).
    ``batch_tokens``: the budget an ``encode_lengths`` table was made for (a
    code never straddles it, so rows longer than it are known exactly);
    None for exact codes. ``longest``: the longest row; ``generation``: of
    the dataset the lengths came from, where known."""

    codes: np.ndarray
    upper: np.ndarray
    mean: np.ndarray
    mean_sq: np.ndarray
    exact: bool
    longest: int
    batch_tokens: int | None = None
    generation: int | None = None

    @classmethod
    def of_lengths(cls, lengths: np.ndarray) -> LengthCodes:
        """The lengths themselves as codes (no copy): exact tokens, a
        histogram as wide as the longest row."""
        longest = chunked_max(lengths)
        values = np.arange(longest + 1, dtype=np.int64)
        return cls(lengths, values, values.astype(np.float64), (values * values).astype(
            np.float64), True, longest)

    def num_over(self, limit: int) -> int:
        """Rows longer than ``limit``; exact, as no code straddles it."""
        first = int(np.searchsorted(self.upper, limit, side="right"))  # codes past the limit
        if first >= len(self.upper):
            return 0
        return sum(int(np.count_nonzero(self.codes[i:i + _CHUNK_ROWS] >= first))
                   for i in range(0, len(self.codes), _CHUNK_ROWS))

    def tells(self, limit: int) -> bool:
        """Whether the codes tell the rows longer than ``limit`` from the
        others (so ``num_over(limit)`` counts exactly those): always for
        ``limit`` the budget they were made for (no code straddles it) and
        for exact codes. For a smaller ``limit``: codes are given in length
        order, so a code c holds lengths above ``upper[c-1]`` up to
        ``upper[c]``, and one made above ``batch_tokens`` only lengths above
        it; the codes whose longest exceeds ``limit`` hold only rows longer
        than it unless the lowest of them may hold lengths up to ``limit``
        too (neither bound reaches it) and some row has it, which one pass
        over the codes finds."""
        if self.batch_tokens is not None and limit > self.batch_tokens:
            return False  # lengths between the budget and limit share code 255
        if self.exact or self.batch_tokens == limit:
            return True
        first = int(np.searchsorted(self.upper, limit, side="right"))
        if first >= len(self.upper):
            return True  # every code's longest is within limit
        above = first > 0 and int(self.upper[first - 1]) >= limit
        if above or (self.batch_tokens is not None and self.upper[first] > self.batch_tokens):
            return True
        return not any(np.any(self.codes[i:i + _CHUNK_ROWS] == first)
                       for i in range(0, len(self.codes), _CHUNK_ROWS))


def chunked_max(lengths: np.ndarray) -> int:
    """The largest of ``lengths`` (0 if none), a chunk at a time."""
    return max((int(lengths[i:i + _CHUNK_ROWS].max())
                for i in range(0, len(lengths), _CHUNK_ROWS)), default=0)


def encode_lengths(lengths: np.ndarray, batch_tokens: int, *,
                   generation: int | None = None) -> LengthCodes:
    """The lengths in a byte a row, for plans of budget ``batch_tokens``.

    Where at most 255 distinct lengths fit the budget each is its own code
    (exact). Else codes are bins of the lengths present: exact below ``e``,
    ``1/e`` wide relative to their length above it, with the largest ``e``
    that needs at most 255 codes (bins about 2% wide for lengths up to
    4096). Every row longer than the budget gets the one code 255. A chunk
    of the lengths at a time: the scratch is bounded, not a row's size."""
    lengths = np.asarray(lengths)
    longest = chunked_max(lengths)
    top = min(longest, batch_tokens)  # lengths above the budget need no resolution
    clip = longest > top  # top + 1 then fits the lengths' type

    def clipped(i: int) -> np.ndarray:
        chunk = lengths[i:i + _CHUNK_ROWS]
        return np.minimum(chunk, top + 1) if clip else chunk

    present, rows_of_present, over = _distinct_lengths(lengths, top, clipped)
    bins = _length_bins(present, _MAX_CODES - 1)
    code_of_present = np.unique(bins, return_inverse=True)[1].reshape(-1)
    num_codes = int(code_of_present[-1]) + 1 if len(present) else 0
    counts = np.bincount(code_of_present, weights=rows_of_present, minlength=num_codes)
    sums = np.bincount(code_of_present, weights=rows_of_present * present.astype(np.float64),
                       minlength=num_codes)
    squares = np.bincount(code_of_present,
                          weights=rows_of_present * present.astype(np.float64) ** 2,
                          minlength=num_codes)
    upper = np.zeros(num_codes, np.int64)
    np.maximum.at(upper, code_of_present, present)
    mean, mean_sq = sums / np.maximum(counts, 1), squares / np.maximum(counts, 1)
    if over:  # rows longer than the budget: code 255, budgeted as the longest
        pad = _MAX_CODES - 1 - num_codes
        upper = np.concatenate([upper, np.full(pad, upper[-1] if num_codes else 0), [longest]])
        mean = np.concatenate([mean, np.zeros(pad), [float(longest)]])
        mean_sq = np.concatenate([mean_sq, np.zeros(pad), [float(longest) ** 2]])
    codes = np.empty(len(lengths), np.uint8)
    if top + 2 <= _MAX_LOOKUP:  # a code per length value: one lookup a row
        lut = np.full(top + 2, _MAX_CODES - 1, np.uint8)
        lut[present] = code_of_present
        for i in range(0, len(lengths), _CHUNK_ROWS):
            codes[i:i + _CHUNK_ROWS] = lut[clipped(i)]
    else:  # wide lengths: each row's place among the present ones
        with_over = np.append(code_of_present, _MAX_CODES - 1).astype(np.uint8)
        for i in range(0, len(lengths), _CHUNK_ROWS):
            codes[i:i + _CHUNK_ROWS] = with_over[np.searchsorted(present, clipped(i))]
    return LengthCodes(codes, upper, mean, mean_sq, len(present) == num_codes, longest,
                       batch_tokens, generation)


def _distinct_lengths(lengths: np.ndarray, top: int,
                      clipped: Any) -> tuple[np.ndarray, np.ndarray, int]:
    """The distinct lengths up to ``top`` (ascending), how many rows have
    each, and how many rows are longer: a count per value where the values
    are few, else each chunk's distinct values, merged."""
    if top + 2 <= _MAX_LOOKUP:
        hist = np.zeros(top + 2, np.int64)
        for i in range(0, len(lengths), _CHUNK_ROWS):
            hist += np.bincount(clipped(i), minlength=top + 2)
        present = np.flatnonzero(hist[:top + 1])
        return present, hist[present], int(hist[top + 1])
    values, rows = np.empty(0, np.int64), np.empty(0, np.int64)
    for i in range(0, len(lengths), _CHUNK_ROWS):
        v, c = np.unique(clipped(i), return_counts=True)
        values, where = np.unique(np.concatenate([values, v]), return_inverse=True)
        rows = np.bincount(where, weights=np.concatenate([rows, c]),
                           minlength=len(values)).astype(np.int64)
    over = int(rows[-1]) if len(values) and values[-1] > top else 0
    return (values[:-1], rows[:-1], over) if over else (values, rows, 0)


def _length_bins(present: np.ndarray, most: int) -> np.ndarray:
    """A bin id per present length (ascending), at most ``most`` distinct:
    the finest geometric bins (exact below ``e``, ``log1p(1/e)`` wide above)
    that fit, by bisection on ``e``."""
    if len(present) <= most:
        return present
    values = np.maximum(present, 1).astype(np.float64)

    def bins(e: int) -> np.ndarray:
        return np.where(values < e, values, e + np.floor(np.log(values / e) / np.log1p(1 / e)))

    lo, hi = 1, int(present[-1]) + 1  # e = 1 fits (log2 bins), e past the longest is exact
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if len(np.unique(bins(mid))) <= most else (lo, mid)
    return bins(lo)
