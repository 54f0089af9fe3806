// A node's disk tier: record batches written once to a local file and served
// as zero-copy views of a read-only memory map (issue: the disk tier, item 1).
//
// A tier file is an uncompressed Arrow IPC file (so its buffers can be mapped
// as they are) in the node's --disk-dir. It is written to a temporary name
// and renamed when complete, so a file under its final name is whole; its
// bytes are charged to the node's disk budget first, and a full disk or
// budget fails the write cleanly (nothing left behind). Opening checks the
// size and the IPC footer; Verify checks every byte against the CRC-32 taken
// while writing (for a file found again after a restart). A missing,
// truncated or corrupt file is an error naming the path, never wrong rows.
//
// Rows are written as record batches of about kTierBatchBytes at most (a
// larger batch is cut into slices): the unit the node's read-ahead reads
// ahead of its streams and evicts (readahead.h) is one such batch, whose
// columns lie back to back in the file, so loading it is one contiguous read.
//
// The file must not change while mapped: a truncation under a live mapping
// faults the reader (SIGBUS). Nothing but the node writes its --disk-dir.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <arrow/buffer.h>
#include <arrow/io/file.h>
#include <arrow/ipc/writer.h>
#include <arrow/record_batch.h>
#include <arrow/result.h>

#include "icefloe/common/memory.h"
#include "icefloe/node/copy/dataset.h"
#include "icefloe/node/copy/shared_export.h"

namespace icefloe {

/// Arrow bytes of one record batch in a tier file: a larger batch is cut into
/// slices of about this many (by its mean row size; a row never splits).
inline constexpr int64_t kTierBatchBytes = int64_t{2} << 20;

class TierFile : public MappedRegion {
 public:
  /// Writes `batches` (all of `schema`) to `path`, charging its bytes to
  /// `disk` (null: no budget) for as long as the TierFile lives, and maps it.
  /// OutOfMemory naming the path, the bytes and what the budget has left;
  /// IOError naming the path and the system's words (a full disk, say).
  /// Nothing is left at `path` on failure.
  static arrow::Result<std::shared_ptr<TierFile>> Write(
      const std::string& path, const std::shared_ptr<arrow::Schema>& schema,
      const std::vector<std::shared_ptr<arrow::RecordBatch>>& batches,
      std::shared_ptr<MemoryBudget> disk);

  /// Maps an existing tier file (a restart's) after proving it intact: its
  /// size is `bytes` and every byte's CRC-32 is `crc32` (Verify). Charged to
  /// `disk` like Write's. IOError when it is missing or of another size,
  /// Invalid when it is corrupt or not a whole IPC file.
  static arrow::Result<std::shared_ptr<TierFile>> Open(const std::string& path, int64_t bytes,
                                                       uint32_t crc32,
                                                       std::shared_ptr<MemoryBudget> disk);

  /// Removes the file (its mapping stays readable until the last view goes)
  /// and returns its bytes to the budget.
  ~TierFile() override;
  TierFile(const TierFile&) = delete;
  TierFile& operator=(const TierFile&) = delete;

  const std::string& path() const { return path_; }
  int64_t bytes() const { return bytes_; }
  /// CRC-32 (zlib's) of the file's bytes, as written (or proven by Open).
  uint32_t crc32() const { return crc32_; }
  /// The mapping (MappedRegion): what the batches are views of.
  const uint8_t* data() const override { return region_->data(); }
  int64_t size() const override { return region_->size(); }
  /// The file's record batches: views of the mapping, which they keep alive.
  const std::vector<std::shared_ptr<arrow::RecordBatch>>& batches() const { return batches_; }

  /// The file, open read-only for as long as the TierFile lives (a same-host
  /// reader opens it as /proc/<pid>/fd/<fd>: shared_export.h).
  int fd() const { return map_->file_descriptor(); }
  /// Where `batch` (a view of the file's rows) lies in the IPC file: the
  /// index of the record batch it is rows of, and the first of those rows;
  /// nullopt when it views no batch of this file whole-column (every column
  /// of one of batches(), at one row offset).
  struct Location {
    int64_t batch = 0;
    int64_t offset = 0;
  };
  std::optional<Location> Locate(const arrow::RecordBatch& batch) const;

  /// Reads every byte: Invalid naming the path when its CRC-32 is not `crc32`.
  arrow::Status Verify(uint32_t crc32) const;

 private:
  friend class TierFileWriter;
  TierFile() = default;
  // Write, of batches already cut to kTierBatchBytes.
  static arrow::Result<std::shared_ptr<TierFile>> WriteCut(
      const std::string& path, const std::shared_ptr<arrow::Schema>& schema,
      const std::vector<std::shared_ptr<arrow::RecordBatch>>& batches,
      std::shared_ptr<MemoryBudget> disk);
  // A TierFile of `bytes` at `path`, charged to `disk`; OutOfMemory when it cannot be.
  static arrow::Result<std::shared_ptr<TierFile>> Charged(const std::string& path, int64_t bytes,
                                                          std::shared_ptr<MemoryBudget> disk);
  // Maps the file and reads its batches; with `crc32`, proves every byte
  // first (Verify), so that nothing reads a corrupt file as IPC.
  arrow::Status Map(const std::string& path, std::optional<uint32_t> crc32);

  std::string path_;
  bool owned_ = false;  // the file is whole and ours: removed with the TierFile
  int64_t bytes_ = 0;
  uint32_t crc32_ = 0;
  std::shared_ptr<MemoryBudget> disk_;
  std::shared_ptr<arrow::io::MemoryMappedFile> map_;
  std::shared_ptr<arrow::Buffer> region_;  // all of map_, viewed
  std::vector<std::shared_ptr<arrow::RecordBatch>> batches_;
};

/// Where `copy`'s cached batches on the tier lie in its tier files (its held
/// TierFiles), for ExportShared: the file, its fd and the record batch and
/// row of it a batch is. `copy` must outlive the locator.
TierLocator LocateOnTier(const CachedDataset& copy);

/// Writes one tier file batch by batch, as a load streams a task's rows to
/// the tier: each batch is cut to kTierBatchBytes, charged to the disk
/// budget and written as it comes, so no task is held whole in memory.
/// Finish closes, renames and maps the file. A writer destroyed unfinished
/// removes its partial file and returns its bytes to the budget.
class TierFileWriter {
 public:
  /// Starts `path` (written as `path`.partial until Finish). IOError naming
  /// the path.
  static arrow::Result<std::unique_ptr<TierFileWriter>> Open(
      const std::string& path, const std::shared_ptr<arrow::Schema>& schema,
      std::shared_ptr<MemoryBudget> disk);
  ~TierFileWriter();
  TierFileWriter(const TierFileWriter&) = delete;
  TierFileWriter& operator=(const TierFileWriter&) = delete;

  /// Writes `batch` (of the schema). OutOfMemory naming the path when the
  /// disk budget cannot hold it; IOError naming it when the disk cannot.
  arrow::Status Append(const std::shared_ptr<arrow::RecordBatch>& batch);
  /// The file, whole, renamed and mapped: its batches are views of the map.
  arrow::Result<std::shared_ptr<TierFile>> Finish();

 private:
  friend class TierFile;  // its whole writes checksum through a Stream too
  class Stream;
  TierFileWriter() = default;

  std::string path_;
  std::shared_ptr<MemoryBudget> disk_;
  std::shared_ptr<arrow::io::FileOutputStream> file_;
  std::shared_ptr<Stream> stream_;  // charges and checksums what file_ is sent
  std::shared_ptr<arrow::ipc::RecordBatchWriter> writer_;
  bool finished_ = false;
};

}  // namespace icefloe
