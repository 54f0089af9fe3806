"""Token-id columns to tensors (icefloe.torch.batch_to_tensors): variable-length
``list<int32>`` rows become a right-padded ``[B, L]`` tensor plus lengths; packed
``fixed_size_list<int32, S>`` rows stay one zero-copy ``[B, S]`` tensor. No cluster:
record batches are built here."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
import torch

from icefloe.torch import batch_to_tensors, batches_to_tensors


def _padded(rows: list[list[int] | None]) -> tuple[list[list[int]], list[int]]:
    """The expected tensor and lengths, row by row (the slow, obvious way)."""
    width = max((len(r) for r in rows if r), default=0)
    return ([(r or []) + [0] * (width - len(r or [])) for r in rows],
            [len(r or []) for r in rows])


def _check(out: dict, name: str, rows: list[list[int] | None]) -> None:
    want, lengths = _padded(rows)
    assert out[name].shape == (len(rows), len(want[0]) if want else 0)
    assert out[name].tolist() == want
    assert out[f"{name}_lengths"].dtype == torch.int64
    assert out[f"{name}_lengths"].tolist() == lengths
    if any(r is None for r in rows):
        assert out[f"{name}_valid"].tolist() == [r is not None for r in rows]
    else:
        assert f"{name}_valid" not in out


@pytest.mark.parametrize("list_type", [pa.list_, pa.large_list])
@pytest.mark.parametrize("value_type", [pa.int32(), pa.int64(), pa.int16(), pa.uint16()])
def test_token_lists_become_padded_tensor_and_lengths(list_type, value_type):
    rows = [[1, 5, 9], [2], [7, 7, 7, 7, 7], [3, 4]]
    batch = pa.record_batch({"id": pa.array([0, 1, 2, 3], pa.int64()),
                             "input_ids": pa.array(rows, list_type(value_type))})
    out = batch_to_tensors(batch)
    _check(out, "input_ids", rows)
    assert out["id"].tolist() == [0, 1, 2, 3]
    # The value type kept where torch has it (uint16 widened to int32).
    want = {pa.int32(): torch.int32, pa.int64(): torch.int64, pa.int16(): torch.int16,
            pa.uint16(): torch.int32}[value_type]
    assert out["input_ids"].dtype == want


def test_pad_is_zero_and_width_is_this_batchs_longest_row():
    short = pa.record_batch({"t": pa.array([[4, 4], [5]], pa.list_(pa.int32()))})
    long = pa.record_batch({"t": pa.array([[1] * 9, [2]], pa.list_(pa.int32()))})
    assert batch_to_tensors(short)["t"].shape == (2, 2)
    assert batch_to_tensors(long)["t"].shape == (2, 9)
    assert batch_to_tensors(long)["t"][1].tolist() == [2] + [0] * 8


def test_null_rows_get_valid_mask_and_length_zero():
    rows = [[1, 2], None, [3, 4, 5], None]
    out = batch_to_tensors(pa.record_batch({"t": pa.array(rows, pa.list_(pa.int32()))}))
    _check(out, "t", rows)


def test_null_rows_backed_by_values_are_skipped():
    # A null row whose offsets still span values (legal Arrow; writers make
    # them): those values must not shift the next rows.
    offsets = pa.array([0, 2, 5, 6], pa.int32())
    values = pa.array([1, 2, 90, 91, 92, 3], pa.int32())
    col = pa.ListArray.from_arrays(offsets, values, mask=pa.array([False, True, False]))
    out = batch_to_tensors(pa.record_batch({"t": col}))
    _check(out, "t", [[1, 2], None, [3]])


def test_null_token_values_become_zero():
    out = batch_to_tensors(pa.record_batch({"t": pa.array([[1, None, 3], [4]],
                                                          pa.list_(pa.int32()))}))
    assert out["t"].tolist() == [[1, 0, 3], [4, 0, 0]]
    assert out["t_lengths"].tolist() == [3, 1]


@pytest.mark.parametrize("rows", [[[], [], []], [[], [1, 2], []], [[5], [6], [7]], []],
                         ids=["all-empty", "some-empty", "equal-lengths", "no-rows"])
def test_empty_lists_equal_lengths_and_empty_batches(rows):
    col = pa.array(rows, pa.list_(pa.int32()))
    out = batch_to_tensors(pa.record_batch({"t": col}))
    _check(out, "t", rows)
    assert out["t"].dtype == torch.int32


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_sliced_arrays_random(seed):
    print("seed", seed)
    rng = np.random.default_rng(seed)
    rows = [None if rng.random() < 0.1 else rng.integers(0, 32000, rng.integers(0, 20)).tolist()
            for _ in range(300)]
    batch = pa.record_batch({"t": pa.array(rows, pa.list_(pa.int32())),
                             "n": pa.array(np.arange(300))})
    for start, length in [(0, 300), (1, 17), (123, 64), (299, 1), (50, 0)]:
        part = batch.slice(start, length)
        assert part.column(0).offset == start
        out = batch_to_tensors(part)
        _check(out, "t", rows[start:start + length])
        assert out["n"].tolist() == list(range(start, start + length))


def test_equal_length_slice_with_offset():
    batch = pa.record_batch({"t": pa.array([[9, 9, 9], [1, 2], [3, 4], [5]],
                                           pa.list_(pa.int32()))}).slice(1, 2)
    _check(batch_to_tensors(batch), "t", [[1, 2], [3, 4]])


def test_chunks_of_batches_pad_each_batch_alone():
    rows = [[1], [2, 2], [3, 3, 3, 3], [4], [5, 5], [6]]
    batch = pa.record_batch({"t": pa.array(rows, pa.list_(pa.int32())),
                             "y": pa.array(range(6), pa.int64())})
    many = batches_to_tensors(batch, [2, 2, 2])
    at = batches_to_tensors(batch, [2, 2], [4, 0])
    for got, part in [(many[0], rows[0:2]), (many[1], rows[2:4]), (many[2], rows[4:6]),
                      (at[0], rows[4:6]), (at[1], rows[0:2])]:
        _check(got, "t", part)
    assert many[1]["t"].shape == (2, 4) and many[0]["t"].shape == (2, 2)


def test_packed_fixed_size_lists_stay_zero_copy():
    seq = 8
    values = pa.array(np.arange(4 * seq, dtype=np.int32))
    col = pa.FixedSizeListArray.from_arrays(values, seq)
    mask = pa.FixedSizeListArray.from_arrays(pa.array(np.ones(4 * seq, dtype=np.int8)), seq)
    batch = pa.record_batch({"input_ids": col, "attention_mask": mask}).slice(1, 2)
    out = batch_to_tensors(batch)
    assert out["input_ids"].shape == (2, seq) and out["input_ids"].dtype == torch.int32
    assert out["input_ids"].tolist() == np.arange(seq, 3 * seq).reshape(2, seq).tolist()
    assert out["attention_mask"].dtype == torch.int8
    assert "input_ids_lengths" not in out
    # Shares the Arrow buffer: no copy.
    address = values.buffers()[1].address + seq * 4
    assert out["input_ids"].data_ptr() == address


def test_lists_of_non_integers_stay_python_lists():
    out = batch_to_tensors(pa.record_batch({"f": pa.array([[1.5], []], pa.list_(pa.float32())),
                                            "s": pa.array([["a"], ["b", "c"]])}))
    assert out["f"] == [[1.5], []] and out["s"] == [["a"], ["b", "c"]]


def test_padded_rows_with_null_rows_stay_b_by_n_and_zero_copy():
    """A `pad_to` column with null texts: the null rows' values (pad ids) are
    kept in place, so the tensor is still [B, N], shares the buffer, and
    `<name>_valid` marks the null rows."""
    n = 4
    values = pa.array(np.arange(5 * n, dtype=np.int32))
    validity = pa.array([True, False, True, True, False]).buffers()[1]
    col = pa.FixedSizeListArray.from_buffers(pa.list_(pa.int32(), n), 5, [validity], 2,
                                             children=[values])
    assert col.null_count == 2
    out = batch_to_tensors(pa.record_batch({"input_ids": col}).slice(1, 3))
    assert out["input_ids"].shape == (3, n) and out["input_ids"].dtype == torch.int32
    assert out["input_ids"].tolist() == np.arange(n, 4 * n).reshape(3, n).tolist()
    assert out["input_ids_valid"].tolist() == [False, True, True]
    assert out["input_ids"].data_ptr() == values.buffers()[1].address + n * 4
