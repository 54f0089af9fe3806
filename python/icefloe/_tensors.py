"""Record batches to dicts of torch tensors: zero copy where Arrow's buffers
allow (DLPack), token-id lists padded to ``[B, L]`` with their lengths (a
``labels`` column padded with -100, and an ``attention_mask`` beside
``input_ids``), nulls as ``<name>_valid`` masks; a chunk of whole batches
converted at once."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import torch

from ._pieces import starts


def _is_token_list(t: pa.DataType) -> bool:
    """A variable-length list of integers (token ids): ``list`` or ``large_list``."""
    return (pa.types.is_list(t) or pa.types.is_large_list(t)) and \
        pa.types.is_integer(t.value_type)


# The label torch's cross_entropy ignores (ignore_index): a `labels` token
# column is padded with it, so padding is never trained.
IGNORE_INDEX = -100
LABELS = "labels"

# Integer types torch has no general support for, widened to one it has.
_TORCH_INT = {pa.uint16(): pa.int32(), pa.uint32(): pa.int64(), pa.uint64(): pa.int64()}


def _token_lists_to_tensor(name: str, col: pa.Array, out: dict[str, Any]) -> None:
    """A list-of-integers column as a right-padded ``[B, L]`` tensor (L the
    longest row of this batch, padded with 0; ``labels``, when signed, with
    -100) plus ``<name>_lengths`` (int64 ``[B]``), and ``<name>_valid`` when
    some rows are null (null rows: length 0, all padding). No per-row Python:
    one scatter of the flat values."""
    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks()
    value_type = _TORCH_INT.get(col.type.value_type, col.type.value_type)
    # flatten() honours the array's offset (a slice) and skips the values
    # that back null rows; list_value_length is null there.
    flat = col.flatten()
    if flat.type != value_type:
        flat = flat.cast(value_type)
    if flat.null_count:
        flat = flat.fill_null(pa.scalar(0, value_type))
    lengths_arr = pc.list_value_length(col)
    if col.null_count:
        out[f"{name}_valid"] = torch.from_numpy(col.is_valid().to_numpy(zero_copy_only=False))
        lengths_arr = lengths_arr.fill_null(0)
    lengths = lengths_arr.to_numpy(zero_copy_only=False).astype(np.int64, copy=False)
    rows = len(col)
    width = int(lengths.max()) if rows else 0
    if rows and int(lengths.min()) == width:
        # Every row the same length: the flat values are the [B, L] matrix.
        values = torch.utils.dlpack.from_dlpack(flat) if len(flat) else \
            torch.zeros(0, dtype=_torch_dtype(value_type))
        out[name] = values.reshape(rows, width)
    else:
        pad = IGNORE_INDEX if name == LABELS and pa.types.is_signed_integer(value_type) else 0
        padded = np.full((rows, width), pad, dtype=value_type.to_pandas_dtype())
        # Row-major positions of the real tokens: exactly the flat order.
        padded[np.arange(width) < lengths[:, None]] = flat.to_numpy(zero_copy_only=False)
        out[name] = torch.from_numpy(padded)
    out[f"{name}_lengths"] = torch.from_numpy(lengths.copy() if not lengths.flags.writeable
                                              else lengths)


def _torch_dtype(t: pa.DataType) -> torch.dtype:
    return torch.from_numpy(np.zeros(0, dtype=t.to_pandas_dtype())).dtype


def _column_to_tensor(name: str, col: pa.Array, out: dict[str, Any]) -> None:
    t = col.type
    if _is_token_list(t):
        _token_lists_to_tensor(name, col, out)
        return
    if col.null_count:
        # Nulls are explicit: values with nulls filled (NaN for floats, else 0)
        # plus a boolean `<name>_valid` mask.
        out[f"{name}_valid"] = torch.from_numpy(col.is_valid().to_numpy(zero_copy_only=False))
        fill = float("nan") if pa.types.is_floating(t) else 0
        if pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t):
            col = col.fill_null(pa.scalar(fill, t) if not pa.types.is_boolean(t) else False)
    if pa.types.is_integer(t) or pa.types.is_floating(t):
        out[name] = torch.utils.dlpack.from_dlpack(col) if not col.null_count else \
            torch.from_numpy(col.to_numpy(zero_copy_only=False).copy())
    elif pa.types.is_boolean(t):
        out[name] = torch.from_numpy(col.to_numpy(zero_copy_only=False))
    elif pa.types.is_timestamp(t) or pa.types.is_date(t) or pa.types.is_time(t) or \
            pa.types.is_duration(t):
        width = pa.int64() if t.bit_width == 64 else pa.int32()
        out[name] = torch.utils.dlpack.from_dlpack(col.view(width)) if not col.null_count else \
            torch.from_numpy(col.view(width).to_numpy(zero_copy_only=False).copy())
    elif pa.types.is_decimal(t):
        out[name] = torch.from_numpy(col.cast(pa.float64()).to_numpy(zero_copy_only=False))
    elif isinstance(t, pa.FixedShapeTensorType) or pa.types.is_fixed_size_list(t):
        storage = col.storage if isinstance(t, pa.FixedShapeTensorType) else col
        shape = tuple(t.shape) if isinstance(t, pa.FixedShapeTensorType) else (t.list_size,)
        # The values under every row, null rows' too (flatten() would drop
        # those and shift the rest): [B, N] stays [B, N], with `_valid`.
        width = storage.type.list_size
        values = storage.values.slice(storage.offset * width, len(storage) * width)
        tensor = torch.utils.dlpack.from_dlpack(values) if not values.null_count else \
            torch.from_numpy(values.to_numpy(zero_copy_only=False).copy())
        out[name] = tensor.reshape((len(col), *shape))
    else:
        # Strings, binary, nested lists, maps, structs: Python objects.
        out[name] = col.to_pylist()


def _dlpack(col: pa.Array) -> Any:
    return torch.utils.dlpack.from_dlpack(col)


def _column_converter(t: pa.DataType) -> Callable[[pa.Array], Any] | None:
    """The zero-copy conversion of a column of type ``t`` without nulls, decided
    once per schema; None for types _column_to_tensor handles each time
    (token lists among them: padded to each batch's own longest row, so a
    chunk of batches is never converted at once)."""
    if pa.types.is_integer(t) or pa.types.is_floating(t):
        return _dlpack
    if pa.types.is_timestamp(t) or pa.types.is_date(t) or pa.types.is_time(t) or \
            pa.types.is_duration(t):
        width = pa.int64() if t.bit_width == 64 else pa.int32()
        return lambda col: torch.utils.dlpack.from_dlpack(col.view(width))
    return None


_Plan = list[tuple[int, str, Callable[[pa.Array], Any] | None]]
# Converter plans by schema, newest first: training reads one or a few
# schemas, so each column's conversion is decided once, not per batch.
# Looked up with Schema.equals (hashing a schema costs more than converting).
_PLANS: list[tuple[pa.Schema, _Plan]] = []
_MAX_PLANS = 8


def _plan(schema: pa.Schema) -> _Plan:
    for known, plan in _PLANS:
        if known.equals(schema):
            return plan
    plan = [(i, f.name, _column_converter(f.type)) for i, f in enumerate(schema)]
    _PLANS.insert(0, (schema, plan))
    del _PLANS[_MAX_PLANS:]
    return plan


def batch_to_tensors(batch: pa.RecordBatch) -> dict[str, Any]:
    """The default conversion of a record batch to a dict of tensors.

    Fixed-width numeric, temporal, fixed-size-list and fixed-shape-tensor
    columns without nulls become tensors that share the Arrow buffers (zero
    copy, via DLPack); columns with nulls are copied with nulls filled and get
    a ``<name>_valid`` mask. Variable-length lists of integers (token ids,
    ``list<int32>``) become a right-padded ``[B, L]`` tensor (L: the batch's
    longest row, pad 0, a ``labels`` column's -100) plus ``<name>_lengths``
    (int64 ``[B]``); beside such an ``input_ids`` column, an int8
    ``attention_mask`` (1 for a token, 0 for padding) unless the batch has
    one. Strings and other types become Python lists.
    """
    out: dict[str, Any] = {}
    column = batch.column
    for i, name, convert in _plan(batch.schema):
        col = column(i)
        if convert is not None and not col.null_count:
            out[name] = convert(col)
        else:
            _column_to_tensor(name, col, out)
    lengths = out.get("input_ids_lengths")
    if lengths is not None and "attention_mask" not in out:
        width = out["input_ids"].shape[1]
        out["attention_mask"] = (torch.arange(width) < lengths[:, None]).to(torch.int8)
    return out


def _whole_columns(batch: pa.RecordBatch) -> list[tuple[str, Any]] | None:
    """Each column of ``batch`` converted zero-copy, named; None when one
    needs copying (nulls, or a type without a tensor view)."""
    plan = _plan(batch.schema)
    column = batch.column
    if any(convert is None or column(i).null_count for i, _, convert in plan):
        return None
    return [(name, convert(column(i))) for i, name, convert in plan]


def batches_to_tensors(batch: pa.RecordBatch, sizes: list[int],
                       offsets: list[int] | None = None) -> list[dict[str, Any]]:
    """``batch_to_tensors`` of each ``sizes[k]``-row slice of ``batch``, one
    after another or at row ``offsets[k]`` (a rank's batches in a span of a
    node's shared file): one conversion of each column and views of it when
    every column converts without copying (no nulls, tensor types), else
    slice by slice (so each batch's result is exactly what it would be
    alone)."""
    whole = _whole_columns(batch)
    if whole is None:
        at = zip(starts(sizes, offsets), sizes, strict=True)
        return [batch_to_tensors(batch.slice(o, n)) for o, n in at]
    if offsets is None:
        # split_with_sizes: Tensor.split's own work without its Python
        # wrapper (~3 µs a column a chunk).
        parts = [(name, t.split_with_sizes(sizes)) for name, t in whole]
        return [{name: views[k] for name, views in parts} for k in range(len(sizes))]
    return [{name: t[o:o + n] for name, t in whole} for o, n in zip(offsets, sizes, strict=True)]


# Client.iter_epoch(transform=batch_to_tensors) converts each chunk of whole
# batches at once too (icefloe._pieces.apply_many looks for `many`).
batch_to_tensors.many = batches_to_tensors  # type: ignore[attr-defined]
