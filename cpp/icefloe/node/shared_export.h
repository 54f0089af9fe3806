// Same-host readers: a dataset's cached batches in a sealed memfd.
//
// A node started with --share-memory lays each copy it publishes out once, as
// an Arrow IPC file in an anonymous memory file (memfd) that is then sealed
// against any change (F_SEAL_WRITE, _SHRINK, _GROW, _SEAL), and serves its
// batches as zero-copy views of that file. A reader in the same process
// namespace, as the same user, opens the file as /proc/<pid>/fd/<fd> and maps
// it: a plan stream then carries only where each piece's rows are in the file
// (docs/protocol.md, "Shared memory"), not the rows. The seals make the
// mapping as immutable as the node's own copy: nothing can change the rows a
// reader has mapped, even after the node drops the copy or dies (the memory
// goes when the last mapping does).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include <arrow/result.h>

#include "icefloe/common/memory.h"
#include "icefloe/node/dataset.h"

namespace icefloe {

/// One sealed memfd holding a dataset copy as an Arrow IPC file, mapped
/// read-only here. Charges its bytes to the node's budget while it lives.
class SharedExport {
 public:
  ~SharedExport();
  SharedExport(const SharedExport&) = delete;
  SharedExport& operator=(const SharedExport&) = delete;

  int fd() const { return fd_; }
  int64_t size() const { return size_; }
  uint64_t inode() const { return inode_; }
  const uint8_t* data() const { return data_; }

 private:
  friend arrow::Result<std::shared_ptr<CachedDataset>> ExportShared(
      const CachedDataset& dataset, std::shared_ptr<MemoryBudget> budget);
  SharedExport() = default;
  int fd_ = -1;
  int64_t size_ = 0;
  uint64_t inode_ = 0;
  const uint8_t* data_ = nullptr;  // PROT_READ, MAP_SHARED
  std::shared_ptr<MemoryBudget> budget_;
  int64_t charged_ = 0;
};

/// A copy of `dataset` (same name, generation, rows and global ids) whose
/// batches are views of a new SharedExport (CachedDataset::shared()), which
/// they keep alive. OutOfMemory when `budget` (null: none) cannot hold the
/// file beside the original; IOError naming the system call that failed;
/// whatever the IPC writer refuses (e.g. dictionaries that differ between
/// batches). The caller keeps serving `dataset` on any error.
arrow::Result<std::shared_ptr<CachedDataset>> ExportShared(const CachedDataset& dataset,
                                                           std::shared_ptr<MemoryBudget> budget);

}  // namespace icefloe
