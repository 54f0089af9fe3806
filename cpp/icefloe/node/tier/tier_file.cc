#include "icefloe/node/tier/tier_file.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <utility>

#include <arrow/array/data.h>
#include <arrow/buffer.h>
#include <arrow/io/memory.h>
#include <arrow/ipc/reader.h>
#include <arrow/util/byte_size.h>
#include <arrow/util/crc32.h>
#include <sys/mman.h>

#include "icefloe/node/copy/ipc_file.h"

namespace icefloe {

namespace {

// `batches` cut into slices of at most kTierBatchBytes (a row that alone is
// more goes alone).
arrow::Result<std::vector<std::shared_ptr<arrow::RecordBatch>>> TierBatches(
    const std::vector<std::shared_ptr<arrow::RecordBatch>>& batches) {
  std::vector<std::shared_ptr<arrow::RecordBatch>> out;
  for (const auto& batch : batches) {
    ARROW_ASSIGN_OR_RAISE(const int64_t bytes, arrow::util::ReferencedBufferSize(*batch));
    const int64_t rows = batch->num_rows();
    if (bytes <= kTierBatchBytes || rows <= 1) {
      out.push_back(batch);
      continue;
    }
    const int64_t per_row = (bytes + rows - 1) / rows;
    const int64_t step = std::max<int64_t>(1, kTierBatchBytes / per_row);
    for (int64_t at = 0; at < rows; at += step) out.push_back(batch->Slice(at, step));
  }
  return out;
}

arrow::Status WriteIpc(arrow::io::OutputStream* out, const std::shared_ptr<arrow::Schema>& schema,
                       const std::vector<std::shared_ptr<arrow::RecordBatch>>& batches) {
  ARROW_ASSIGN_OR_RAISE(auto writer, OpenIpcFile(out, schema));
  for (const auto& batch : batches) ARROW_RETURN_NOT_OK(writer->WriteRecordBatch(*batch));
  return writer->Close();
}

arrow::Status Named(const arrow::Status& st, const std::string& path) {
  if (st.ok()) return st;
  return st.WithMessage("tier file ", path, ": ", st.message());
}

}  // namespace

// Forwards writes to a tier file being written, keeping the CRC-32 of every
// byte; with `disk`, each write is charged to that budget first.
class TierFileWriter::Stream : public arrow::io::OutputStream {
 public:
  Stream(std::shared_ptr<arrow::io::OutputStream> inner, std::string path,
         std::shared_ptr<MemoryBudget> disk)
      : inner_(std::move(inner)), path_(std::move(path)), disk_(std::move(disk)) {}
  ~Stream() override {
    if (disk_ && charged_ > 0) disk_->Release(charged_);
  }
  arrow::Status Write(const void* data, int64_t nbytes) override {
    if (disk_ && !disk_->TryReserve(nbytes)) {
      return arrow::Status::OutOfMemory("tier file ", path_, " needs ", charged_ + nbytes,
                                        " bytes so far; the node's disk budget has ",
                                        disk_->available_bytes(), " of ", disk_->limit_bytes(),
                                        " left");
    }
    charged_ += nbytes;
    crc_ = arrow::internal::crc32(crc_, data, static_cast<size_t>(nbytes));
    return inner_->Write(data, nbytes);
  }
  arrow::Status Close() override { return inner_->Close(); }
  bool closed() const override { return inner_->closed(); }
  arrow::Result<int64_t> Tell() const override { return inner_->Tell(); }
  uint32_t crc() const { return crc_; }
  // The bytes charged, handed to the finished TierFile.
  int64_t TakeCharge() { return std::exchange(charged_, 0); }

 private:
  std::shared_ptr<arrow::io::OutputStream> inner_;
  std::string path_;
  std::shared_ptr<MemoryBudget> disk_;
  int64_t charged_ = 0;
  uint32_t crc_ = 0;
};

arrow::Result<std::shared_ptr<TierFile>> TierFile::Charged(const std::string& path, int64_t bytes,
                                                           std::shared_ptr<MemoryBudget> disk) {
  if (disk && !disk->TryReserve(bytes)) {
    return arrow::Status::OutOfMemory(
        "tier file ", path, " needs ", bytes, " bytes; the node's disk budget has ",
        disk->available_bytes(), " of ", disk->limit_bytes(), " left");
  }
  std::shared_ptr<TierFile> file(new TierFile());
  file->path_ = path;
  file->bytes_ = bytes;
  file->disk_ = std::move(disk);  // released by the destructor, on every path
  return file;
}

arrow::Result<std::shared_ptr<TierFile>> TierFile::Write(
    const std::string& path, const std::shared_ptr<arrow::Schema>& schema,
    const std::vector<std::shared_ptr<arrow::RecordBatch>>& batches,
    std::shared_ptr<MemoryBudget> disk) {
  ARROW_ASSIGN_OR_RAISE(const auto cut, TierBatches(batches));
  return WriteCut(path, schema, cut, std::move(disk));
}

arrow::Result<std::shared_ptr<TierFile>> TierFile::WriteCut(
    const std::string& path, const std::shared_ptr<arrow::Schema>& schema,
    const std::vector<std::shared_ptr<arrow::RecordBatch>>& batches,
    std::shared_ptr<MemoryBudget> disk) {
  arrow::io::MockOutputStream counter;
  ARROW_RETURN_NOT_OK(Named(WriteIpc(&counter, schema, batches), path));
  ARROW_ASSIGN_OR_RAISE(const int64_t bytes, counter.Tell());
  ARROW_ASSIGN_OR_RAISE(auto file, Charged(path, bytes, std::move(disk)));
  const std::string partial = path + ".partial";
  auto written = [&]() -> arrow::Status {
    ARROW_ASSIGN_OR_RAISE(auto out, arrow::io::FileOutputStream::Open(partial));
    TierFileWriter::Stream crc(out, path, nullptr);  // charged above, whole
    arrow::Status st = WriteIpc(&crc, schema, batches);
    if (st.ok()) st = crc.Close();
    if (!st.ok()) {
      (void)out->Close();
      return st;
    }
    file->crc32_ = crc.crc();
    if (std::rename(partial.c_str(), path.c_str()) != 0) {
      return arrow::Status::IOError("renaming ", partial, ": ", std::strerror(errno));
    }
    return arrow::Status::OK();
  }();
  if (!written.ok()) {
    std::remove(partial.c_str());
    return Named(written, path);
  }
  file->owned_ = true;
  ARROW_RETURN_NOT_OK(Named(file->Map(path, std::nullopt), path));
  return file;
}

arrow::Result<std::shared_ptr<TierFile>> TierFile::Open(const std::string& path, int64_t bytes,
                                                        uint32_t crc32,
                                                        std::shared_ptr<MemoryBudget> disk) {
  ARROW_ASSIGN_OR_RAISE(auto file, Charged(path, bytes, std::move(disk)));
  file->crc32_ = crc32;
  const arrow::Status mapped = file->Map(path, crc32);
  if (!mapped.ok()) return mapped.IsInvalid() ? mapped : Named(mapped, path);
  file->owned_ = true;  // proven
  return file;
}

arrow::Status TierFile::Map(const std::string& path, std::optional<uint32_t> crc32) {
  ARROW_ASSIGN_OR_RAISE(map_, arrow::io::MemoryMappedFile::Open(path, arrow::io::FileMode::READ));
  ARROW_ASSIGN_OR_RAISE(const int64_t size, map_->GetSize());
  if (size != bytes_) {
    return arrow::Status::IOError("holds ", size, " bytes, not the ", bytes_, " written");
  }
  ARROW_ASSIGN_OR_RAISE(region_, map_->ReadAt(0, size));  // a view, no copy
  if (crc32) ARROW_RETURN_NOT_OK(Verify(*crc32));         // before anything reads it as IPC
  ARROW_ASSIGN_OR_RAISE(auto reader, arrow::ipc::RecordBatchFileReader::Open(map_));
  batches_.clear();
  batches_.reserve(static_cast<size_t>(reader->num_record_batches()));
  for (int i = 0; i < reader->num_record_batches(); ++i) {
    ARROW_ASSIGN_OR_RAISE(auto batch, reader->ReadRecordBatch(i));
    batches_.push_back(std::move(batch));
  }
  // Reading the batches' headers (and the CRC, whole) mapped pages in: the
  // kernel maps the neighbours of each touched page too, megabytes per file
  // that count in this process's RSS beside the memory budget (issue 42).
  // Unmapped here, they stay in the page cache, and a read maps them back.
  if (size > 0 && ::madvise(const_cast<uint8_t*>(region_->data()), static_cast<size_t>(size),
                            MADV_DONTNEED) != 0) {
    return arrow::Status::IOError("madvise: ", std::strerror(errno));
  }
  return arrow::Status::OK();
}

std::optional<TierFile::Location> TierFile::Locate(const arrow::RecordBatch& batch) const {
  auto same = [](const std::shared_ptr<arrow::Buffer>& a, const std::shared_ptr<arrow::Buffer>& b) {
    if (a == nullptr || b == nullptr) return a == b;
    return a->data() == b->data() && a->size() == b->size();
  };
  for (size_t k = 0; k < batches_.size(); ++k) {
    const arrow::RecordBatch& file = *batches_[k];
    if (file.num_columns() != batch.num_columns() || file.num_columns() == 0) continue;
    const int64_t offset = batch.column_data(0)->offset - file.column_data(0)->offset;
    if (offset < 0 || offset + batch.num_rows() > file.num_rows()) continue;
    bool views = true;
    for (int c = 0; c < file.num_columns() && views; ++c) {
      const arrow::ArrayData& a = *batch.column_data(c);
      const arrow::ArrayData& b = *file.column_data(c);
      views = a.offset == b.offset + offset && a.buffers.size() == b.buffers.size() &&
              a.child_data.size() == b.child_data.size();
      for (size_t i = 0; views && i < a.buffers.size(); ++i)
        views = same(a.buffers[i], b.buffers[i]);
      // Nested columns: their children are the file's too where their buffers are.
      for (size_t i = 0; views && i < a.child_data.size(); ++i) {
        views = a.child_data[i]->buffers.size() == b.child_data[i]->buffers.size();
        for (size_t j = 0; views && j < a.child_data[i]->buffers.size(); ++j) {
          views = same(a.child_data[i]->buffers[j], b.child_data[i]->buffers[j]);
        }
      }
    }
    if (views) return Location{static_cast<int64_t>(k), offset};
  }
  return std::nullopt;
}

TierLocator LocateOnTier(const CachedDataset& copy) {
  return [&copy](size_t i) -> std::optional<TierBatch> {
    const MappedSpan& span = copy.on_disk()[i];
    for (const auto& region : copy.held()) {
      auto file = std::dynamic_pointer_cast<const TierFile>(region);
      if (file == nullptr || !file->Contains(span.data, span.data + span.size)) continue;
      auto at = file->Locate(*copy.batches()[i].batch);
      if (!at) return std::nullopt;
      return TierBatch{file, file->fd(), at->batch, at->offset};
    }
    return std::nullopt;
  };
}

arrow::Status TierFile::Verify(uint32_t crc32) const {
  const uint32_t got = arrow::internal::crc32(0, data(), static_cast<size_t>(size()));
  if (got != crc32) {
    return arrow::Status::Invalid("tier file ", path_, " is corrupt: its CRC-32 is ", got,
                                  ", not the ", crc32, " written");
  }
  return arrow::Status::OK();
}

arrow::Result<std::unique_ptr<TierFileWriter>> TierFileWriter::Open(
    const std::string& path, const std::shared_ptr<arrow::Schema>& schema,
    std::shared_ptr<MemoryBudget> disk) {
  std::unique_ptr<TierFileWriter> w(new TierFileWriter());
  w->path_ = path;
  w->disk_ = disk;
  auto opened = [&]() -> arrow::Status {
    ARROW_ASSIGN_OR_RAISE(w->file_, arrow::io::FileOutputStream::Open(path + ".partial"));
    w->stream_ = std::make_shared<Stream>(w->file_, path, std::move(disk));
    ARROW_ASSIGN_OR_RAISE(w->writer_, OpenIpcFile(w->stream_.get(), schema));
    return arrow::Status::OK();
  }();
  ARROW_RETURN_NOT_OK(Named(opened, path));
  return w;
}

arrow::Status TierFileWriter::Append(const std::shared_ptr<arrow::RecordBatch>& batch) {
  if (finished_) return arrow::Status::Invalid("tier file ", path_, " is finished");
  ARROW_ASSIGN_OR_RAISE(const auto cut, TierBatches({batch}));
  for (const auto& b : cut) {
    const arrow::Status st = writer_->WriteRecordBatch(*b);
    if (!st.ok()) return st.IsOutOfMemory() ? st : Named(st, path_);
  }
  return arrow::Status::OK();
}

arrow::Result<std::shared_ptr<TierFile>> TierFileWriter::Finish() {
  if (finished_) return arrow::Status::Invalid("tier file ", path_, " is finished");
  finished_ = true;
  const std::string partial = path_ + ".partial";
  auto closed = [&]() -> arrow::Status {
    ARROW_RETURN_NOT_OK(writer_->Close());
    ARROW_RETURN_NOT_OK(stream_->Close());
    if (std::rename(partial.c_str(), path_.c_str()) != 0) {
      return arrow::Status::IOError("renaming ", partial, ": ", std::strerror(errno));
    }
    return arrow::Status::OK();
  }();
  if (!closed.ok()) {
    std::remove(partial.c_str());
    return closed.IsOutOfMemory() ? closed : Named(closed, path_);
  }
  std::shared_ptr<TierFile> file(new TierFile());
  file->path_ = path_;
  file->crc32_ = stream_->crc();
  file->bytes_ = stream_->TakeCharge();  // the file's bytes, charged as written
  file->disk_ = disk_;
  file->owned_ = true;
  ARROW_RETURN_NOT_OK(Named(file->Map(path_, std::nullopt), path_));
  return file;
}

TierFileWriter::~TierFileWriter() {
  if (finished_) return;
  if (file_) (void)file_->Close();
  std::remove((path_ + ".partial").c_str());
}

TierFile::~TierFile() {
  if (owned_) std::remove(path_.c_str());
  if (disk_ && bytes_ > 0) disk_->Release(bytes_);
}

}  // namespace icefloe
