// Row lengths: what a lengths ticket (docs/protocol.md, flags bit 0x04) is
// answered with. Token-budget batches plan from each row's token count; a
// node reads it from the list column's offsets, so the tokens never cross
// the wire and the answer costs 2 bytes a row where every length fits.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <arrow/record_batch.h>
#include <arrow/result.h>

namespace icefloe {

/// The per-row list lengths of column `column` of `batches` (a range's
/// slices, in order), as record batches of one non-null column named `name`:
/// uint16 when every length of all the batches is below 65536, else uint32,
/// one output batch per input batch. Invalid naming the column when it is not
/// list<int32>. A null list counts 0. Pure: no I/O, thread-safe.
arrow::Result<std::vector<std::shared_ptr<arrow::RecordBatch>>> RowLengths(
    const std::vector<std::shared_ptr<arrow::RecordBatch>>& batches, int column,
    const std::string& name, std::shared_ptr<arrow::Schema>* schema);

}  // namespace icefloe
