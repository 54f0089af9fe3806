#include "icefloe/node/copy/shared_export.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <unordered_map>
#include <vector>

#include <arrow/array/data.h>
#include <arrow/buffer.h>
#include <arrow/io/file.h>
#include <arrow/io/memory.h>
#include <arrow/ipc/reader.h>
#include <arrow/ipc/writer.h>
#include <arrow/record_batch.h>
#include <arrow/util/byte_size.h>

#include "icefloe/node/copy/ipc_file.h"

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

// Whether the kernel gives shared memory huge pages on request
// (ShmemHugePages: not `never` or `deny`); read once.
bool HugePagesGranted() {
  static const bool granted = [] {
    auto policy = ShmemHugePages();
    return policy.ok() && *policy != "never" && *policy != "deny";
  }();
  return granted;
}

arrow::Status SysError(const char* call, const std::string& dataset) {
  return arrow::Status::IOError(call, " failed while sharing dataset '", dataset,
                                "': ", std::strerror(errno));
}

// The whole mapping as a Buffer that keeps the segment alive: every batch
// read from it (zero-copy slices) holds it.
class SegmentBuffer : public arrow::Buffer {
 public:
  explicit SegmentBuffer(std::shared_ptr<const SharedSegment> owner)
      : arrow::Buffer(owner->data(), owner->size()), owner_(std::move(owner)) {}

 private:
  std::shared_ptr<const SharedSegment> owner_;
};

// Writes `all` as an IPC file of one record batch to `sink`.
arrow::Status WriteFile(const arrow::RecordBatch& all, arrow::io::OutputStream* sink) {
  ARROW_ASSIGN_OR_RAISE(auto writer, OpenIpcFile(sink, all.schema()));
  ARROW_RETURN_NOT_OK(writer->WriteRecordBatch(all));
  return writer->Close();
}

// The global rows `cuts` (each batch's first global id and rows, in file
// order) hold, as SharedExport::held() names them.
std::vector<uint64_t> HeldRanges(const std::vector<CachedBatch>& batches) {
  std::vector<uint64_t> held;
  for (size_t i = 0; i < batches.size();) {
    const uint64_t start = batches[i].global_start;
    uint64_t stop = batches[i].global_stop();
    for (++i; i < batches.size() && batches[i].global_start == stop; ++i) {
      stop = batches[i].global_stop();
    }
    held.push_back(start);
    held.push_back(stop);
  }
  return held;
}

// What identifies the memory a batch's first column views: the address of
// its first buffer (the same in every slice of a segment's batch, whichever
// read of the segment made it).
const uint8_t* Key(const arrow::RecordBatch& batch) {
  if (batch.num_columns() == 0) return nullptr;
  for (const auto& b : batch.column_data(0)->buffers) {
    if (b != nullptr) return b->data();
  }
  return nullptr;
}

// Buffers at the same address (or both none).
bool SameMemory(const std::shared_ptr<arrow::Buffer>& a, const std::shared_ptr<arrow::Buffer>& b) {
  if (a == nullptr || b == nullptr) return a == b;
  return a->data() == b->data() && a->size() == b->size();
}

// Reads the one record batch of the IPC file in `file`.
arrow::Result<std::shared_ptr<arrow::RecordBatch>> ReadOnly(const std::string& name,
                                                            std::shared_ptr<arrow::Buffer> file) {
  auto in = std::make_shared<arrow::io::BufferReader>(std::move(file));
  ARROW_ASSIGN_OR_RAISE(auto reader, arrow::ipc::RecordBatchFileReader::Open(in));
  if (reader->num_record_batches() != 1) {
    return arrow::Status::UnknownError("sharing dataset '", name, "': the file holds ",
                                       reader->num_record_batches(), " batches, not 1");
  }
  return reader->ReadRecordBatch(0);
}

// Whether `batch` is rows [offset, offset + rows) of `segment`'s batch.
bool ViewsSegment(const arrow::RecordBatch& batch, const SharedSegment& segment, int64_t offset) {
  const arrow::RecordBatch& m = *segment.mapped();
  if (batch.num_columns() != m.num_columns()) return false;
  for (int c = 0; c < batch.num_columns(); ++c) {
    const arrow::ArrayData& a = *batch.column_data(c);
    const arrow::ArrayData& b = *m.column_data(c);
    if (a.offset != b.offset + offset || a.buffers.size() != b.buffers.size()) return false;
    for (size_t k = 0; k < a.buffers.size(); ++k) {
      if (!SameMemory(a.buffers[k], b.buffers[k])) return false;
    }
  }
  return true;
}

// How many of batches[i..] are exactly `segment`, in order (0: they are not).
size_t Tiles(const std::vector<CachedBatch>& batches, size_t i, const SharedSegment& segment) {
  int64_t offset = 0;
  for (size_t j = i; j < batches.size() && offset < segment.num_rows(); ++j) {
    if (!ViewsSegment(*batches[j].batch, segment, offset)) return 0;
    if (j > i && batches[j].global_start != batches[j - 1].global_stop()) return 0;
    offset += batches[j].batch->num_rows();
    if (offset == segment.num_rows()) return j - i + 1;
  }
  return 0;
}

}  // namespace

SharedSegment::~SharedSegment() {
  mapped_.reset();  // views of the mapping that own nothing
  if (data_ != nullptr) munmap(const_cast<uint8_t*>(data_), static_cast<size_t>(size_));
  if (fd_ >= 0 && tier_ == nullptr) close(fd_);  // a tier file's fd is its own
  if (budget_ && charged_ > 0) budget_->Release(charged_);
}

SharedExport::SharedExport(std::vector<std::shared_ptr<const SharedSegment>> segments,
                           std::vector<uint64_t> held, int64_t bytes_written)
    : segments_(std::move(segments)), held_(std::move(held)), bytes_written_(bytes_written) {
  starts_.reserve(segments_.size() + 1);
  int64_t at = 0;
  for (const auto& s : segments_) {
    starts_.push_back(at);
    at += s->num_rows();
  }
  starts_.push_back(at);
}

size_t SharedExport::SegmentOf(int64_t row) const {
  auto it = std::upper_bound(starts_.begin(), starts_.end() - 1, row);
  return static_cast<size_t>(it - starts_.begin()) - 1;
}

int64_t SharedExport::size() const {
  int64_t n = 0;
  for (const auto& s : segments_) n += s->on_tier() ? 0 : s->size();
  return n;
}

// A segment's part of ExportShared: `all` written to a sealed memfd, mapped
// read-only, read back as one record batch of views.
struct Sharing {
  static arrow::Result<std::shared_ptr<const SharedSegment>> Write(
      const std::string& name, const arrow::RecordBatch& all,
      const std::shared_ptr<MemoryBudget>& budget) {
    arrow::io::MockOutputStream counter;
    ARROW_RETURN_NOT_OK(WriteFile(all, &counter));
    ARROW_ASSIGN_OR_RAISE(const int64_t size, counter.Tell());
    std::shared_ptr<SharedSegment> out(new SharedSegment());
    if (budget) {
      if (!budget->TryReserve(size)) {
        return arrow::Status::OutOfMemory(
            "sharing dataset '", name, "' needs ", size, " bytes for a segment of ", all.num_rows(),
            " rows beside its copy; the memory budget has ", budget->available_bytes(), " of ",
            budget->limit_bytes(), " bytes left");
      }
      out->budget_ = budget;
      out->charged_ = size;
    }
    const std::string label = "icefloe:" + name;
    out->fd_ = memfd_create(label.c_str(), MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (out->fd_ < 0) return SysError("memfd_create", name);
    if (HugePagesGranted()) {
      // Written through a mapping that asks for huge pages (the only way to
      // ask for them under `advise`); a fault per 2 MiB.
      if (ftruncate(out->fd_, size) != 0) return SysError("ftruncate", name);
      void* rw =
          mmap(nullptr, static_cast<size_t>(size), PROT_READ | PROT_WRITE, MAP_SHARED, out->fd_, 0);
      if (rw == MAP_FAILED) return SysError("mmap", name);
      AskForHugePages(rw, size);
      arrow::io::FixedSizeBufferWriter sink(
          std::make_shared<arrow::MutableBuffer>(static_cast<uint8_t*>(rw), size));
      arrow::Status written = WriteFile(all, &sink);
      munmap(rw, static_cast<size_t>(size));  // F_SEAL_WRITE needs no writable mapping
      ARROW_RETURN_NOT_OK(written);
    } else {
      // 4 KiB pages: written with write(2), the kernel fills each page as it
      // allocates it, with no fault per page and no page zeroed first (a
      // 64 MB copy's segments in 100-158 ms against 146-276 ms through a
      // mapping, means of 5, interleaved, on the shared 2-core machine).
      const int copy = dup(out->fd_);
      if (copy < 0) return SysError("dup", name);
      ARROW_ASSIGN_OR_RAISE(auto sink, arrow::io::FileOutputStream::Open(copy));  // owns `copy`
      ARROW_RETURN_NOT_OK(WriteFile(all, sink.get()));
      ARROW_ASSIGN_OR_RAISE(const int64_t wrote, sink->Tell());
      ARROW_RETURN_NOT_OK(sink->Close());
      if (wrote != size) {
        return arrow::Status::UnknownError("sharing dataset '", name, "': wrote ", wrote,
                                           " bytes of a segment of ", size);
      }
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
    // The segment's own batch views the mapping without owning it (no
    // cycle); the batches handed out own it (Views).
    ARROW_ASSIGN_OR_RAISE(out->mapped_,
                          ReadOnly(name, std::make_shared<arrow::Buffer>(out->data_, size)));
    if (out->mapped_->num_rows() != all.num_rows()) {
      return arrow::Status::UnknownError("sharing dataset '", name, "': wrote ", all.num_rows(),
                                         " rows but read back ", out->mapped_->num_rows());
    }
    out->rows_ = all.num_rows();
    return out;
  }

  // Cached batch `batch`, which lies in a tier file where `where` says: a
  // segment naming that file (its inode and size as the reader will find
  // them), charged to nothing.
  static arrow::Result<std::shared_ptr<const SharedSegment>> OnTier(
      const std::string& name, TierBatch where, std::shared_ptr<arrow::RecordBatch> batch) {
    struct stat st {};
    if (fstat(where.fd, &st) != 0) return SysError("fstat of a tier file", name);
    if (st.st_size <= 0) {
      return arrow::Status::IOError("sharing dataset '", name, "': its tier file (fd ", where.fd,
                                    ") is empty");
    }
    std::shared_ptr<SharedSegment> out(new SharedSegment());
    out->fd_ = where.fd;
    out->inode_ = static_cast<uint64_t>(st.st_ino);
    out->size_ = static_cast<int64_t>(st.st_size);
    out->rows_ = batch->num_rows();
    out->batch_ = where.batch;
    out->offset_ = where.offset;
    out->tier_ = std::move(where.file);
    out->mapped_ = std::move(batch);  // views of the tier file's mapping
    return out;
  }
};

namespace {

// Bytes of a segment's file besides its rows (IPC metadata, the schema twice,
// padding): room kept for them when the budget sizes a segment.
constexpr int64_t kSegmentSlackBytes = 64 << 10;

// The most bytes of rows a new segment gathers: kMaxSegmentBytes, or less
// where the budget has less room. The segment's file needs room beside the
// rows, and so does their concatenation before it; where the rows it copies
// cannot go before the file is written (`own` false: someone else holds the
// copy), both at once. At least one batch, whatever this says: a segment too
// large for the room left is refused by the budget, naming the sizes.
int64_t SegmentLimit(const MemoryBudget* budget, bool own) {
  if (budget == nullptr || budget->limit_bytes() <= 0) return kMaxSegmentBytes;
  int64_t room = budget->available_bytes() - kSegmentSlackBytes;
  if (!own) room /= 2;
  return std::min(room, kMaxSegmentBytes);
}

int64_t BatchBytes(const arrow::RecordBatch& batch) {
  auto size = arrow::util::ReferencedBufferSize(batch);
  return size.ok() ? *size : 0;
}

}  // namespace

Shared ExportShared(std::shared_ptr<const CachedDataset> dataset,
                    std::shared_ptr<MemoryBudget> budget,
                    const std::vector<std::shared_ptr<const SharedExport>>& reusable,
                    const std::vector<uint64_t>& cuts, const TierLocator& on_tier) {
  const std::string name = dataset->name();
  if (dataset->batches().empty()) {
    return {std::move(dataset), arrow::Status::Invalid("dataset '", name, "' has no rows")};
  }
  // Each cached batch on the tier: where it lies in its tier file.
  std::vector<std::optional<TierBatch>> tier(dataset->batches().size());
  for (size_t i = 0; i < dataset->on_disk().size(); ++i) {
    if (dataset->on_disk()[i].size == 0) continue;
    if (on_tier) tier[i] = on_tier(i);
    if (!tier[i].has_value()) {
      return {std::move(dataset), arrow::Status::Invalid("dataset '", name, "': cached batch ", i,
                                                         " is on the disk tier but in no tier "
                                                         "file a reader can map")};
    }
  }
  // What the copy is made of, kept here so that the copy itself can go: its
  // rows (each replaced by its views of a segment once written), the pools
  // their buffers came from (which must outlive them) and its tier files.
  const uint64_t generation = dataset->generation();
  const std::shared_ptr<arrow::Schema> schema = dataset->schema();
  std::vector<CachedBatch> rows = dataset->batches();
  std::vector<std::shared_ptr<arrow::MemoryPool>> pools = dataset->pools();
  const std::vector<std::shared_ptr<const MappedRegion>> held = dataset->held();
  // A copy handed over (nobody else holds it) goes now: each segment's heap
  // rows are freed as it is written, so committing needs room for one segment
  // beside the rows, not for a second copy. A copy held elsewhere too is what
  // a failure serves, unchanged.
  const bool own = dataset.use_count() == 1;
  if (own) dataset.reset();
  auto pool = std::make_shared<TrackingPool>(budget ? budget : std::make_shared<MemoryBudget>(0),
                                             "sharing dataset '" + name + "'");
  pools.push_back(pool);  // a failure's copy may hold concatenated rows
  auto fail = [&](arrow::Status why) -> Shared {
    if (dataset != nullptr) return {std::move(dataset), std::move(why)};
    // The rows as they are now: those laid out, views of their segments.
    auto rebuilt =
        CachedDataset::Make(name, generation, schema, std::move(rows), nullptr, pools, held);
    if (!rebuilt.ok()) {
      return {nullptr,
              arrow::Status::UnknownError("sharing dataset '", name, "' failed (", why.ToString(),
                                          ") and its rows cannot be "
                                          "served privately: ",
                                          rebuilt.status().ToString())};
    }
    return {std::move(*rebuilt), std::move(why)};
  };
  // The segments a run of batches may be: those its first column's buffers name.
  std::unordered_map<const uint8_t*, std::shared_ptr<const SharedSegment>> known;
  for (const auto& e : reusable) {
    if (e == nullptr) continue;
    for (const auto& s : e->segments()) {
      if (s->on_tier()) continue;  // a batch on the tier is always its own segment
      if (const uint8_t* key = Key(*s->mapped())) known.emplace(key, s);
    }
  }
  auto reused_at = [&](size_t i) -> std::pair<std::shared_ptr<const SharedSegment>, size_t> {
    const uint8_t* key = Key(*rows[i].batch);
    auto it = key == nullptr ? known.end() : known.find(key);
    if (it == known.end() || !it->second->mapped()->schema()->Equals(*schema, false)) {
      return {nullptr, 0};
    }
    return {it->second, Tiles(rows, i, *it->second)};
  };
  std::vector<std::shared_ptr<const SharedSegment>> segments;
  int64_t written = 0;
  for (size_t i = 0; i < rows.size();) {
    if (tier[i].has_value()) {  // its own segment, in its tier file
      auto made = Sharing::OnTier(name, std::move(*tier[i]), rows[i].batch);
      if (!made.ok()) return fail(made.status());
      segments.push_back(std::move(*made));
      ++i;
      continue;
    }
    auto [segment, n] = reused_at(i);
    if (n > 0) {  // the batches already view it: they stay as they are
      segments.push_back(std::move(segment));
      i += n;
      continue;
    }
    // A new segment: batches up to the next reusable run, or a task's start
    // once it holds kMinSegmentBytes, or the batch that would take it past
    // what the budget has room for (SegmentLimit).
    const int64_t most = SegmentLimit(budget.get(), own);
    int64_t bytes = 0;
    size_t j = i;
    for (; j < rows.size(); ++j) {
      const int64_t size = BatchBytes(*rows[j].batch);
      if (j > i) {
        const bool cut = std::binary_search(cuts.begin(), cuts.end(), rows[j].global_start);
        if ((cut && bytes >= kMinSegmentBytes) || bytes + size > most || tier[j].has_value() ||
            reused_at(j).second > 0) {
          break;
        }
      }
      bytes += size;
    }
    // One batch is written as it is. Several are concatenated first, and the
    // concatenation stands in for them at once, so that their buffers go
    // before the file is written: at most one segment's rows are twice in
    // memory at a time.
    std::shared_ptr<arrow::RecordBatch> all = rows[i].batch;
    if (j > i + 1) {
      std::vector<std::shared_ptr<arrow::RecordBatch>> parts;
      for (size_t k = i; k < j; ++k) parts.push_back(rows[k].batch);
      auto joined = arrow::ConcatenateRecordBatches(parts, pool.get());
      parts.clear();
      if (!joined.ok()) return fail(joined.status());
      all = std::move(*joined);
      int64_t offset = 0;
      for (size_t k = i; k < j; ++k) {
        const int64_t n_rows = rows[k].batch->num_rows();
        rows[k].batch = all->Slice(offset, n_rows);
        offset += n_rows;
      }
    }
    auto made = Sharing::Write(name, *all, budget);
    all.reset();
    if (!made.ok()) return fail(made.status());
    // Views that own the segment: every buffer's parent is its mapping.
    auto owned = ReadOnly(name, std::make_shared<SegmentBuffer>(*made));
    if (!owned.ok()) return fail(owned.status());
    int64_t offset = 0;
    for (; i < j; ++i) {
      const int64_t n_rows = rows[i].batch->num_rows();
      rows[i].batch = (*owned)->Slice(offset, n_rows);
      offset += n_rows;
    }
    written += (*made)->size();
    segments.push_back(std::move(*made));
  }
  auto ranges = HeldRanges(rows);
  // The tier files stay the copy's: its batches on the tier are theirs.
  auto shared = CachedDataset::Make(name, generation, schema, rows, nullptr, {}, held);
  if (!shared.ok()) return fail(shared.status());
  (*shared)->AttachShared(
      std::make_shared<SharedExport>(std::move(segments), std::move(ranges), written));
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
