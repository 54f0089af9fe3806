#include "icefloe/node/shared_export.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include <arrow/buffer.h>
#include <arrow/io/memory.h>
#include <arrow/ipc/reader.h>
#include <arrow/ipc/writer.h>
#include <arrow/record_batch.h>

namespace icefloe {
namespace {

arrow::Status SysError(const char* call, const std::string& dataset) {
  return arrow::Status::IOError(call, " failed while sharing dataset '", dataset,
                                "': ", std::strerror(errno));
}

// The whole mapping as a Buffer that keeps the export alive: every batch
// read from it (zero-copy slices) holds it.
class ExportBuffer : public arrow::Buffer {
 public:
  explicit ExportBuffer(std::shared_ptr<const SharedExport> owner)
      : arrow::Buffer(owner->data(), owner->size()), owner_(std::move(owner)) {}

 private:
  std::shared_ptr<const SharedExport> owner_;
};

arrow::ipc::IpcWriteOptions WriteOptions() {
  auto options = arrow::ipc::IpcWriteOptions::Defaults();
  options.alignment = 64;  // every column buffer on a cache line, as Arrow allocates them
  return options;
}

// Writes `all` as an IPC file of one record batch to `sink`.
arrow::Status WriteFile(const arrow::RecordBatch& all, arrow::io::OutputStream* sink) {
  ARROW_ASSIGN_OR_RAISE(auto writer,
                        arrow::ipc::MakeFileWriter(sink, all.schema(), WriteOptions()));
  ARROW_RETURN_NOT_OK(writer->WriteRecordBatch(all));
  return writer->Close();
}

}  // namespace

SharedExport::~SharedExport() {
  if (data_ != nullptr) munmap(const_cast<uint8_t*>(data_), static_cast<size_t>(size_));
  if (fd_ >= 0) close(fd_);
  if (budget_ && charged_ > 0) budget_->Release(charged_);
}

arrow::Result<std::shared_ptr<CachedDataset>> ExportShared(const CachedDataset& dataset,
                                                           std::shared_ptr<MemoryBudget> budget) {
  const std::string& name = dataset.name();
  // One record batch of every row, batch after batch: a reader's rows are
  // then one array per column, taken from in one step (a take across many
  // chunks costs far more). Charged to the budget while it lives.
  const auto& source = dataset.batches();
  std::vector<std::shared_ptr<arrow::RecordBatch>> parts;
  for (const auto& b : source) parts.push_back(b.batch);
  if (parts.empty()) return arrow::Status::Invalid("dataset '", name, "' has no rows to share");
  TrackingPool pool(budget ? budget : std::make_shared<MemoryBudget>(0),
                    "sharing dataset '" + name + "'");
  ARROW_ASSIGN_OR_RAISE(auto all, arrow::ConcatenateRecordBatches(parts, &pool));
  parts.clear();
  arrow::io::MockOutputStream counter;
  ARROW_RETURN_NOT_OK(WriteFile(*all, &counter));
  ARROW_ASSIGN_OR_RAISE(const int64_t size, counter.Tell());

  std::shared_ptr<SharedExport> out(new SharedExport());
  if (budget) {
    if (!budget->TryReserve(size)) {
      return arrow::Status::OutOfMemory("sharing dataset '", name, "' needs ", size,
                                        " bytes beside its copy; the memory budget has ",
                                        budget->available_bytes());
    }
    out->budget_ = std::move(budget);
    out->charged_ = size;
  }
  const std::string label = "icefloe:" + name;
  out->fd_ = memfd_create(label.c_str(), MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (out->fd_ < 0) return SysError("memfd_create", name);
  if (ftruncate(out->fd_, size) != 0) return SysError("ftruncate", name);
  void* rw =
      mmap(nullptr, static_cast<size_t>(size), PROT_READ | PROT_WRITE, MAP_SHARED, out->fd_, 0);
  if (rw == MAP_FAILED) return SysError("mmap", name);
  {
    arrow::io::FixedSizeBufferWriter sink(
        std::make_shared<arrow::MutableBuffer>(static_cast<uint8_t*>(rw), size));
    arrow::Status written = WriteFile(*all, &sink);
    all.reset();
    munmap(rw, static_cast<size_t>(size));  // F_SEAL_WRITE needs no writable mapping
    ARROW_RETURN_NOT_OK(written);
  }
  if (fcntl(out->fd_, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) != 0) {
    return SysError("fcntl(F_ADD_SEALS)", name);
  }
  struct stat st {};
  if (fstat(out->fd_, &st) != 0) return SysError("fstat", name);
  out->inode_ = static_cast<uint64_t>(st.st_ino);
  void* ro = mmap(nullptr, static_cast<size_t>(size), PROT_READ, MAP_SHARED, out->fd_, 0);
  if (ro == MAP_FAILED) return SysError("mmap", name);
  out->data_ = static_cast<const uint8_t*>(ro);
  out->size_ = size;

  std::shared_ptr<const SharedExport> owner = out;
  auto file = std::make_shared<arrow::io::BufferReader>(std::make_shared<ExportBuffer>(owner));
  ARROW_ASSIGN_OR_RAISE(auto reader, arrow::ipc::RecordBatchFileReader::Open(file));
  ARROW_ASSIGN_OR_RAISE(auto mapped, reader->ReadRecordBatch(0));
  if (reader->num_record_batches() != 1 || mapped->num_rows() != dataset.num_rows()) {
    return arrow::Status::UnknownError("sharing dataset '", name, "': wrote ", dataset.num_rows(),
                                       " rows but read back ", mapped->num_rows());
  }
  // The node's batches as before (each a run of global ids), now views.
  std::vector<CachedBatch> batches;
  batches.reserve(source.size());
  int64_t offset = 0;
  for (const auto& b : source) {
    batches.push_back({b.global_start, mapped->Slice(offset, b.batch->num_rows())});
    offset += b.batch->num_rows();
  }
  ARROW_ASSIGN_OR_RAISE(auto copy, CachedDataset::Make(name, dataset.generation(), dataset.schema(),
                                                       std::move(batches)));
  copy->AttachShared(std::move(owner));
  return copy;
}

}  // namespace icefloe
