"""The merge builds a batch from its pieces with the native assembly
(cpp/icefloe/client/assemble.h, through the Arrow C Data Interface): exactly
the batch the pieces' rows make at their positions, for every column type
(nested, sliced, with nulls; the layouts it does not build, dictionaries and
views, taken through the inverse it fills), from pieces that carry their rows
and from pieces by reference to a node's shared file; malformed pieces are
refused."""

from __future__ import annotations

import decimal

import numpy as np
import pyarrow as pa
import pytest
from piece_util import Message, encode, merged

import icefloe
from icefloe import _native


def _table(n: int) -> pa.RecordBatch:
    """Every kind of column: fixed-width, bit-packed, variable-width, nested,
    with nulls, and layouts the library leaves to a take (a dictionary, a
    string view)."""
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
        "maybe_flag": pa.array([None if i % 3 == 1 else i % 2 == 0 for i in range(n)]),
        "toks": pa.array([list(range(i % 5)) if i % 11 else None for i in range(n)],
                         pa.list_(pa.int32())),
        "big": pa.array([b"x" * (i % 4) for i in range(n)], pa.large_binary()),
        "long_text": pa.array([f"{i}" * (i % 3) for i in range(n)], pa.large_string()),
        "nested": pa.array([[{"a": i, "b": None if i % 2 else str(i)}] * (i % 3)
                            for i in range(n)],
                           pa.list_(pa.struct([("a", pa.int32()), ("b", pa.string())]))),
        "pairs": pa.array([[(str(i), i)] if i % 4 else [] for i in range(n)],
                          pa.map_(pa.string(), pa.int32())),
        "point": pa.array([None if i % 9 == 0 else {"x": float(i), "tag": f"p{i}"}
                           for i in range(n)],
                          pa.struct([("x", pa.float64()), ("tag", pa.string())])),
        "nothing": pa.nulls(n),
    })


def _with_unbuilt(table: pa.RecordBatch) -> pa.RecordBatch:
    """``table`` plus a column whose layout the library does not build."""
    n = table.num_rows
    return table.append_column("kind", pa.array([f"k{i % 3}" for i in range(n)])
                               .dictionary_encode())


def _split(n: int, parts: int, seed: int) -> list[np.ndarray]:
    """Positions 0..n-1 dealt at random to ``parts`` pieces, each in a random order."""
    rng = np.random.default_rng(seed)
    owner = rng.integers(0, parts, n)
    return [rng.permutation(np.flatnonzero(owner == k)).astype(np.uint32) for k in range(parts)]


def test_the_native_library_ships_with_the_package():
    assert _native._LIB.is_file() and _native.Merger(1, 0, 1) is not None


def _at(rows: pa.RecordBatch, batch_size: int, positions, **header) -> tuple:
    """A piece of ``rows`` going to ``positions`` of a batch of ``batch_size``."""
    return rows, encode(header.pop("batch", 0), batch_size, positions=list(positions), **header)


@pytest.mark.parametrize("parts", [1, 2, 3])
def test_pieces_with_positions_are_put_in_place(parts):
    n = 1000
    table = _table(n)
    pieces = [_at(table.take(pa.array(pos)), n, pos) for pos in _split(n, parts, seed=parts)]
    assert merged(*pieces, _at(table.slice(0, 0), n, [])).equals(table)


def test_pieces_of_runs_and_a_span_of_batches_are_put_in_place():
    # A span of two batches of 50: batch 0 as runs from a span piece and a
    # piece of batch 0, batch 1 by positions.
    table = _table(100)
    evens = [(0, 10), (20, 10), (40, 10)]
    odds = [(10, 10), (30, 10)]
    second = np.random.default_rng(2).permutation(50).astype(np.uint32)

    def rows(runs):
        return table.take(pa.array(np.concatenate([np.arange(a, a + n) for a, n in runs])))

    span = (rows(evens), encode(0, 50, runs=evens, count=2, last_size=50))
    assert merged(span, (rows(odds), encode(0, 50, runs=odds)),
                  _at(table.take(pa.array(second + 50)), 50, second, batch=1),
                  count=2).equals(table)


def _runs(rows: np.ndarray) -> list[tuple[int, int]]:
    """``rows`` as source runs, consecutive rows merged."""
    breaks = np.flatnonzero(np.diff(rows) != 1) + 1
    return [(int(s[0]), len(s)) for s in np.split(rows, breaks)]


def _in_file(file: pa.RecordBatch, rows: np.ndarray, batch_size: int, positions) -> Message:
    """A piece by reference: ``rows`` of ``file`` going to ``positions``,
    left in the file until they are put in place."""
    return Message(file, encode(0, batch_size, positions=list(positions), source=_runs(rows)),
                   rows=len(rows))


@pytest.mark.parametrize("unbuilt", [False, True])
def test_pieces_by_reference_are_put_in_place_from_the_file(unbuilt):
    # The "file" holds the table's rows shuffled; each piece names blocks of
    # 8 of its rows (as a window's blocks come) and where each row goes.
    # With a column the library does not build, the rows come by a take of
    # each piece's rows out of the file.
    n = 1024
    table = _with_unbuilt(_table(n)) if unbuilt else _table(n)
    order = np.random.default_rng(3).permutation(n)
    file = table.take(pa.array(order))
    blocks = np.random.default_rng(4).permutation(n // 8)
    pieces = []
    for half in [np.sort(blocks[: n // 16]), np.sort(blocks[n // 16:])]:
        rows = (half[:, None] * 8 + np.arange(8)).ravel()
        pieces.append(_in_file(file, rows, n, order[rows]))
    assert merged(*pieces).equals(table)


def test_malformed_pieces_are_refused():
    table = _table(10)
    twice = [_at(table.slice(0, 5), 10, [0, 2, 4, 6, 8]),
             _at(table.slice(5, 5), 10, [1, 3, 5, 7, 8])]
    with pytest.raises(icefloe.InvalidArgument, match="two pieces for one position"):
        merged(*twice)
    # Only columns a take puts in place: the scatter of the inverse checks them.
    strings = [(rows.select(["name", "flag"]), header) for rows, header in twice]
    with pytest.raises(icefloe.InvalidArgument, match="two pieces for one position"):
        merged(*strings)
    with pytest.raises(icefloe.InvalidArgument, match="outside their batch"):
        merged(strings[0], _at(strings[1][0], 10, [1, 3, 5, 7, 10]))
    with pytest.raises(icefloe.InvalidArgument, match="different schemas"):
        merged(twice[0], _at(table.slice(5, 5).select([0, 1]), 10, [1, 3, 5, 7, 9]))
    # Rows 8..11 of a file of 10.
    with pytest.raises(icefloe.InvalidArgument, match="outside its shared file"):
        merged(_in_file(table, np.arange(8, 12), 4, [3, 2, 1, 0]))


def test_a_piece_with_more_positions_than_rows_is_refused_though_the_counts_add_up():
    # Three positions for two rows, and one for two: four of each in all.
    # Nothing else says it is wrong: only each piece's own count does.
    table = _table(4)
    with pytest.raises(icefloe.InvalidArgument, match="do not match its rows"):
        merged(_at(table.slice(0, 2), 4, [0, 1, 2]), _at(table.slice(2, 2), 4, [3]))


def test_sliced_batches_and_columns_the_library_leaves_to_a_take():
    # Pieces that are slices of bigger batches (offsets at every level), and
    # a batch with a dictionary column: the library fills the inverse and
    # the rows come by a take, the same batch.
    n = 600
    table = _with_unbuilt(_table(n))
    for built in (table.drop_columns(["kind"]), table):
        pieces = []
        for k, pos in enumerate(_split(n, 3, seed=11)):
            rows = built.take(pa.array(pos))
            padded = pa.concat_batches([built.slice(0, 7 + k), rows, built.slice(0, 5)])
            pieces.append(_at(padded.slice(7 + k, len(pos)), n, pos))
        assert merged(*pieces).equals(built)


def test_a_piece_with_offsets_that_go_backwards_is_refused_naming_the_column():
    table = _table(4).select(["id", "name"])
    name = table.column("name")
    offsets = np.frombuffer(name.buffers()[1], dtype=np.int32)[:5].copy()
    offsets[1], offsets[2] = offsets[2], offsets[1]
    bad = pa.Array.from_buffers(pa.string(), 4, [None, pa.py_buffer(offsets), name.buffers()[2]])
    rows = pa.record_batch([table.column("id"), bad], names=["id", "name"])
    with pytest.raises(icefloe.InvalidArgument, match="bad offsets: column 'name'"):
        merged(_at(rows, 4, [3, 2, 1, 0]))
