#include "icefloe/node/shared_export.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <vector>

#include <arrow/buffer.h>
#include <arrow/io/memory.h>
#include <arrow/ipc/reader.h>
#include <arrow/ipc/writer.h>
#include <arrow/record_batch.h>

#include "icefloe/node/ipc_file.h"

namespace icefloe {
namespace {

// Asks the kernel to allocate the shared file's pages, as they are first
// written through `address`, as transparent huge pages. Readers gather rows
// from all over the file, and with 4 KiB pages nearly every read misses the
// TLB as well as the cache (a window epoch reads ~1.25x faster from huge
// pages; docs/protocol.md, "Huge pages"). Every mapping of a file of huge
// pages maps them whole, readers' too. Only a hint: the kernel honours it
// where /sys/kernel/mm/transparent_hugepage/shmem_enabled is `advise`
// (`always` and `within_size` need none) and ignores or refuses it (EINVAL)
// elsewhere.
void AskForHugePages(void* address, int64_t size) {
  (void)madvise(address, static_cast<size_t>(size), MADV_HUGEPAGE);
}

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

// Writes `all` as an IPC file of one record batch to `sink`.
arrow::Status WriteFile(const arrow::RecordBatch& all, arrow::io::OutputStream* sink) {
  ARROW_ASSIGN_OR_RAISE(auto writer, OpenIpcFile(sink, all.schema()));
  ARROW_RETURN_NOT_OK(writer->WriteRecordBatch(all));
  return writer->Close();
}

// `like`'s batches (their global ids) cut again from `all`, its rows batch
// after batch, as a dataset; `pool` (may be null) holds `all`'s buffers.
arrow::Result<std::shared_ptr<CachedDataset>> CutLike(
    const std::string& name, uint64_t generation, const std::shared_ptr<arrow::Schema>& schema,
    const std::vector<std::pair<uint64_t, int64_t>>& cuts,
    const std::shared_ptr<arrow::RecordBatch>& all, std::shared_ptr<arrow::MemoryPool> pool) {
  std::vector<CachedBatch> batches;
  batches.reserve(cuts.size());
  int64_t offset = 0;
  for (const auto& [global_start, rows] : cuts) {
    batches.push_back({global_start, all->Slice(offset, rows)});
    offset += rows;
  }
  if (offset != all->num_rows()) {
    return arrow::Status::UnknownError("dataset '", name, "': ", all->num_rows(),
                                       " rows shared for ", offset);
  }
  return CachedDataset::Make(name, generation, schema, std::move(batches), std::move(pool));
}

// The global rows `cuts` (each batch's first global id and rows, in file
// order) hold, as SharedExport::held() names them.
std::vector<uint64_t> HeldRanges(const std::vector<std::pair<uint64_t, int64_t>>& cuts) {
  std::vector<uint64_t> held;
  for (size_t i = 0; i < cuts.size();) {
    const uint64_t start = cuts[i].first;
    uint64_t stop = start + static_cast<uint64_t>(cuts[i].second);
    for (++i; i < cuts.size() && cuts[i].first == stop; ++i) {
      stop += static_cast<uint64_t>(cuts[i].second);
    }
    held.push_back(start);
    held.push_back(stop);
  }
  return held;
}

}  // namespace

SharedExport::~SharedExport() {
  if (data_ != nullptr) munmap(const_cast<uint8_t*>(data_), static_cast<size_t>(size_));
  if (fd_ >= 0) close(fd_);
  if (budget_ && charged_ > 0) budget_->Release(charged_);
}

// The file's part of ExportShared: `all` written to a sealed memfd, mapped
// read-only, read back as one record batch of views.
struct Sharing {
  struct Written {
    std::shared_ptr<const SharedExport> file;
    std::shared_ptr<arrow::RecordBatch> mapped;
  };
  static arrow::Result<Written> Write(const std::string& name, const arrow::RecordBatch& all,
                                      std::vector<uint64_t> held,
                                      std::shared_ptr<MemoryBudget> budget) {
    arrow::io::MockOutputStream counter;
    ARROW_RETURN_NOT_OK(WriteFile(all, &counter));
    ARROW_ASSIGN_OR_RAISE(const int64_t size, counter.Tell());
    std::shared_ptr<SharedExport> out(new SharedExport());
    out->held_ = std::move(held);
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
    AskForHugePages(rw, size);
    {
      arrow::io::FixedSizeBufferWriter sink(
          std::make_shared<arrow::MutableBuffer>(static_cast<uint8_t*>(rw), size));
      arrow::Status written = WriteFile(all, &sink);
      munmap(rw, static_cast<size_t>(size));  // F_SEAL_WRITE needs no writable mapping
      ARROW_RETURN_NOT_OK(written);
    }
    if (fcntl(out->fd_, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) !=
        0) {
      return SysError("fcntl(F_ADD_SEALS)", name);
    }
    struct stat st {};
    if (fstat(out->fd_, &st) != 0) return SysError("fstat", name);
    out->inode_ = static_cast<uint64_t>(st.st_ino);
    void* ro = mmap(nullptr, static_cast<size_t>(size), PROT_READ, MAP_SHARED, out->fd_, 0);
    if (ro == MAP_FAILED) return SysError("mmap", name);
    out->data_ = static_cast<const uint8_t*>(ro);
    out->size_ = size;
    auto file = std::make_shared<arrow::io::BufferReader>(std::make_shared<ExportBuffer>(out));
    ARROW_ASSIGN_OR_RAISE(auto reader, arrow::ipc::RecordBatchFileReader::Open(file));
    if (reader->num_record_batches() != 1) {
      return arrow::Status::UnknownError("sharing dataset '", name, "': the file holds ",
                                         reader->num_record_batches(), " batches, not 1");
    }
    ARROW_ASSIGN_OR_RAISE(auto mapped, reader->ReadRecordBatch(0));
    if (mapped->num_rows() != all.num_rows()) {
      return arrow::Status::UnknownError("sharing dataset '", name, "': wrote ", all.num_rows(),
                                         " rows but read back ", mapped->num_rows());
    }
    return Written{std::move(out), std::move(mapped)};
  }
};

Shared ExportShared(std::shared_ptr<CachedDataset> dataset, std::shared_ptr<MemoryBudget> budget) {
  const std::string name = dataset->name();
  const uint64_t generation = dataset->generation();
  const auto schema = dataset->schema();
  std::vector<std::pair<uint64_t, int64_t>> cuts;  // each batch's first global id and rows
  std::vector<std::shared_ptr<arrow::RecordBatch>> parts;
  for (const auto& b : dataset->batches()) {
    cuts.emplace_back(b.global_start, b.batch->num_rows());
    parts.push_back(b.batch);
  }
  if (parts.empty()) {
    return {std::move(dataset), arrow::Status::Invalid("dataset '", name, "' has no rows")};
  }
  auto pool = std::make_shared<TrackingPool>(budget ? budget : std::make_shared<MemoryBudget>(0),
                                             "sharing dataset '" + name + "'");
  auto all = arrow::ConcatenateRecordBatches(parts, pool.get());
  parts.clear();
  if (!all.ok()) return {std::move(dataset), all.status()};
  auto compact = CutLike(name, generation, schema, cuts, *all, pool);
  if (!compact.ok()) return {std::move(dataset), compact.status()};
  dataset.reset();  // the rows now live in `all` alone (when the caller let go too)
  auto written = Sharing::Write(name, **all, HeldRanges(cuts), std::move(budget));
  if (!written.ok()) return {std::move(*compact), written.status()};
  auto shared = CutLike(name, generation, schema, cuts, written->mapped, nullptr);
  if (!shared.ok()) return {std::move(*compact), shared.status()};
  (*shared)->AttachShared(std::move(written->file));
  return {std::move(*shared), arrow::Status::OK()};
}

arrow::Result<std::string> ShmemHugePages() {
  constexpr const char* kPath = "/sys/kernel/mm/transparent_hugepage/shmem_enabled";
  std::ifstream in(kPath);
  std::string line;
  if (!in || !std::getline(in, line)) {
    return arrow::Status::IOError("cannot read ", kPath, ": ", std::strerror(errno));
  }
  const size_t open = line.find('['), close = line.find(']', open);
  if (open == std::string::npos || close == std::string::npos) {
    return arrow::Status::Invalid(kPath, " chooses no policy: '", line, "'");
  }
  return line.substr(open + 1, close - open - 1);
}

}  // namespace icefloe
