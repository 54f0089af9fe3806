#include "icefloe/node/copy/ipc_file.h"

namespace icefloe {

arrow::Result<std::shared_ptr<arrow::ipc::RecordBatchWriter>> OpenIpcFile(
    arrow::io::OutputStream* sink, const std::shared_ptr<arrow::Schema>& schema) {
  auto options = arrow::ipc::IpcWriteOptions::Defaults();  // uncompressed
  options.alignment = 64;
  return arrow::ipc::MakeFileWriter(sink, schema, options);
}

}  // namespace icefloe
