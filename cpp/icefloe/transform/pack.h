// `pack` (protocol/transform_spec.h PackSpec, docs/transforms.md): a scan
// task's documents, one per row of aligned token columns (input_ids, labels,
// a mask: equal lengths per row), laid into rows of exactly seq_len tokens,
// every column cut at the same places.
//
// - Labels: in the labels column each document's first label is -100 (as
//   transformers' DataCollatorWithFlattening sets it), so no position is
//   trained to predict across a document boundary.
// - position_ids restart at 0 at each document; a document split across
//   rows goes on counting in the next row (the collator's output cut into
//   rows of seq_len).
// - Padding: ids (every column but the labels) with `pad`, labels -100,
//   position_ids 0, attention_mask 0.
// - "concat" lays documents end to end and cuts anywhere (no padding but the
//   tail's). "ffd" packs whole documents first-fit decreasing into rows
//   padded to seq_len; a document longer than seq_len is cut into pieces
//   that each open a row. FFD holds a window of documents of at most
//   batch_rows * seq_len tokens (the input batches that hold them, charged
//   to the load's pool), packs it, and starts the next: memory stays bounded
//   by one output batch however long the task.
//
// The stream is Transform::TaskStream; this header holds what it counts.
#pragma once

#include <cstdint>

namespace icefloe::transform {

/// What packing did to a task's documents: describe's figures.
struct PackStats {
  int64_t documents = 0;            ///< documents packed (whole or split)
  int64_t tokens = 0;               ///< document tokens in the packed rows (separators included)
  int64_t pad_tokens = 0;           ///< pad tokens in the packed rows
  int64_t rows = 0;                 ///< packed rows
  int64_t overlong_split = 0;       ///< documents longer than seq_len, split across rows
  int64_t overlong_dropped = 0;     ///< documents longer than seq_len, dropped ("overlong": "drop")
  int64_t tail_dropped_tokens = 0;  ///< concat, tail "drop": the last partial row's tokens

  PackStats& operator+=(const PackStats& o) {
    documents += o.documents;
    tokens += o.tokens;
    pad_tokens += o.pad_tokens;
    rows += o.rows;
    overlong_split += o.overlong_split;
    overlong_dropped += o.overlong_dropped;
    tail_dropped_tokens += o.tail_dropped_tokens;
    return *this;
  }
  bool operator==(const PackStats&) const = default;
};

}  // namespace icefloe::transform
