"""The merge puts a batch's pieces in place with the native scatter
(cpp/icefloe/client): exactly the batch the pieces' rows make at their
positions, for every column type (fixed-width ones moved by the scatter, the
others taken through the inverse it scatters), from pieces that carry their
rows and from pieces by reference to a node's shared file; malformed pieces
are refused."""

from __future__ import annotations

import decimal
import functools
import os
import signal
import time

import numpy as np
import pyarrow as pa
import pytest

import icefloe
from icefloe import _native
from icefloe._pieces import Piece, SourceRows, assemble

RUN = np.dtype([("start", "<u8"), ("length", "<u4")])  # a node's source runs


def _table(n: int) -> pa.RecordBatch:
    """Every kind of column: fixed-width ones the scatter moves, and ones it
    leaves to a take (bit-packed, variable-width, with nulls)."""
    rng = np.random.default_rng(5)
    ids = np.arange(n, dtype=np.int64)
    tensor_type = pa.fixed_shape_tensor(pa.float32(), [2, 2])
    return pa.record_batch({
        "id": ids,
        "i8": pa.array((ids % 200 - 100).astype(np.int8)),
        "u16": pa.array((ids * 7 % 60000).astype(np.uint16)),
        "f16": pa.array((ids % 100).astype(np.float16)),
        "f32": pa.array(rng.random(n).astype(np.float32)),
        "f64": pa.array(rng.random(n)),
        "ts": pa.array(ids * 1000, pa.timestamp("us")),
        "date": pa.array((ids % 20000).astype(np.int32), pa.date32()),
        "dec": pa.array([decimal.Decimal(int(i)) / 100 for i in ids], pa.decimal128(12, 2)),
        "fsb": pa.array([bytes([i % 256] * 3) for i in range(n)], pa.binary(3)),
        "vec": pa.FixedSizeListArray.from_arrays(pa.array(rng.random(4 * n, dtype=np.float32)), 4),
        "tensor": pa.ExtensionArray.from_storage(tensor_type, pa.FixedSizeListArray.from_arrays(
            pa.array(rng.random(4 * n, dtype=np.float32)), 4)),
        "flag": pa.array(ids % 3 == 0),
        "name": pa.array([f"row {i}" for i in range(n)]),
        "maybe": pa.array([None if i % 7 == 0 else int(i) for i in range(n)], pa.int64()),
    })


def _split(n: int, parts: int, seed: int) -> list[np.ndarray]:
    """Positions 0..n-1 dealt at random to ``parts`` pieces, each in a random order."""
    rng = np.random.default_rng(seed)
    owner = rng.integers(0, parts, n)
    return [rng.permutation(np.flatnonzero(owner == k)).astype(np.uint32) for k in range(parts)]


def test_the_native_library_ships_with_the_package():
    assert _native._LIB.is_file() and _native.scatter is not None


@pytest.mark.parametrize("parts", [1, 2, 3])
def test_pieces_with_positions_are_put_in_place(parts):
    n = 1000
    table = _table(n)

    def pieces():
        empty = Piece(0, n, None, table.slice(0, 0), scattered=np.array([], "<u4"))
        return [Piece(0, n, None, table.take(pa.array(pos)), scattered=pos)
                for pos in _split(n, parts, seed=parts)] + [empty], None

    assert assemble(*pieces()).equals(table)


def test_pieces_of_runs_and_a_span_of_batches_are_put_in_place():
    # Batch 0 (positions 0..49) as runs from two pieces, batch 1 (50..99) by positions.
    table = _table(100)
    evens = np.array([[0, 10], [20, 10], [40, 10]], dtype="<u4")
    odds = np.array([[10, 10], [30, 10]], dtype="<u4")
    second = np.random.default_rng(2).permutation(50).astype(np.uint32)

    def rows(runs):
        return table.take(pa.array(np.concatenate([np.arange(a, a + n) for a, n in runs])))

    def pieces():
        return ([Piece(0, 50, evens, rows(evens)), Piece(0, 50, odds, rows(odds)),
                 Piece(1, 50, None, table.take(pa.array(second + 50)), scattered=second)],
                [0, 0, 50])

    assert assemble(*pieces()).equals(table)


def _runs(rows: np.ndarray) -> np.ndarray:
    """``rows`` as source runs, consecutive rows merged."""
    breaks = np.flatnonzero(np.diff(rows) != 1) + 1
    starts = np.split(rows, breaks)
    return np.array([(int(s[0]), len(s)) for s in starts], dtype=RUN)


def test_pieces_by_reference_are_put_in_place_from_the_file():
    # The "file" holds the table's rows shuffled; each piece names blocks of
    # 8 of its rows (as a window's blocks come) and where each row goes.
    n = 1024
    table = _table(n)
    order = np.random.default_rng(3).permutation(n)
    file = table.take(pa.array(order))
    blocks = np.random.default_rng(4).permutation(n // 8)
    halves = [np.sort(blocks[: n // 16]), np.sort(blocks[n // 16:])]

    def pieces():
        out = []
        for half in halves:
            rows = (half[:, None] * 8 + np.arange(8)).ravel()
            source = _runs(rows)
            take = functools.partial(file.take, pa.array(rows))
            out.append(Piece(0, n, None, SourceRows(file, source, len(rows), take),
                             scattered=order[rows].astype(np.uint32)))
        return out, [0, 0]

    assert assemble(*pieces()).equals(table)


def test_malformed_pieces_are_refused():
    table = _table(10)
    twice = [Piece(0, 10, None, table.slice(0, 5), scattered=np.array([0, 2, 4, 6, 8], "<u4")),
             Piece(0, 10, None, table.slice(5, 5), scattered=np.array([1, 3, 5, 7, 8], "<u4"))]
    outside = np.array([(8, 4)], dtype=RUN)  # rows 8..11 of a file of 10
    by_reference = [Piece(0, 4, None, SourceRows(table, outside, 4, lambda: table.slice(0, 4)),
                          scattered=np.array([3, 2, 1, 0], "<u4"))]
    with pytest.raises(icefloe.InvalidArgument, match="two pieces for one position"):
        assemble(list(twice))
    # Only columns a take puts in place: the scatter of the inverse checks them.
    strings = [Piece(p.batch, p.batch_size, None, p.data.select(["name", "flag"]),
                     scattered=p.scattered) for p in twice]
    with pytest.raises(icefloe.InvalidArgument, match="two pieces for one position"):
        assemble(list(strings))
    outside_batch = [strings[0], Piece(0, 10, None, strings[1].data,
                                       scattered=np.array([1, 3, 5, 7, 10], "<u4"))]
    with pytest.raises(icefloe.InvalidArgument, match="outside their batch"):
        assemble(outside_batch)
    mixed = [twice[0], Piece(0, 10, None, table.slice(5, 5).select([0, 1]),
                             scattered=np.array([1, 3, 5, 7, 9], "<u4"))]
    with pytest.raises(icefloe.InvalidArgument, match="different schemas"):
        assemble(mixed)
    with pytest.raises(icefloe.InvalidArgument, match="outside its shared file"):
        assemble(list(by_reference), [0])


def test_a_piece_with_fewer_positions_than_rows_is_refused_though_the_counts_add_up():
    # Three positions for two rows, and one for two: four of each in all. The
    # second piece's positions are the first of a longer array, so reading
    # past them finds a plausible position (2), and nothing else says it is
    # wrong: only each piece's own count does.
    table = _table(4)
    backing = np.array([3, 2], "<u4")
    pieces = [Piece(0, 4, None, table.slice(0, 2), scattered=np.array([0, 1, 2], "<u4")),
              Piece(0, 4, None, table.slice(2, 2), scattered=backing[:1])]
    with pytest.raises(icefloe.InvalidArgument, match="do not match its rows"):
        assemble(list(pieces))


def test_the_scatter_helper_thread_works_in_a_forked_child():
    # DataLoader workers fork the training process: a child inherits the
    # executor but not its thread, and must make its own.
    assert _native._pool().submit(lambda: 7).result(timeout=30) == 7
    pid = os.fork()
    if pid == 0:  # the child: exit 0 only if its helper thread ran the call
        code = 1
        try:
            code = 0 if _native._pool().submit(os.getpid).result(timeout=30) == os.getpid() else 1
        finally:
            os._exit(code)
    deadline = time.monotonic() + 60
    while (done := os.waitpid(pid, os.WNOHANG))[0] == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    if done[0] == 0:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        pytest.fail("the forked child's scatter helper never ran")
    assert os.waitstatus_to_exitcode(done[1]) == 0
