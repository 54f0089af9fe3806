// How a node writes the Arrow IPC files it maps back (the shared export,
// tier files): uncompressed, so that a mapped buffer is the column itself,
// and every buffer on a 64-byte line, as Arrow allocates them.
#pragma once

#include <memory>

#include <arrow/io/interfaces.h>
#include <arrow/ipc/writer.h>
#include <arrow/result.h>

namespace icefloe {

/// An IPC file writer of `schema` to `sink`, with the options above.
arrow::Result<std::shared_ptr<arrow::ipc::RecordBatchWriter>> OpenIpcFile(
    arrow::io::OutputStream* sink, const std::shared_ptr<arrow::Schema>& schema);

}  // namespace icefloe
