// Same-host readers: a dataset's cached batches in a sealed memfd.
//
// A node started with --share-memory lays each copy it publishes out once, as
// an Arrow IPC file of one record batch (every row the copy holds, batch
// after batch: one array per column, so a reader's batch is a zero-copy slice
// wherever it falls and scattered rows are one take) in an anonymous memory
// file (memfd) that is then sealed against any change (F_SEAL_WRITE, _SHRINK,
// _GROW, _SEAL), and serves its batches as zero-copy views of that file. A reader in the same
// process namespace, as the same user, opens the file as /proc/<pid>/fd/<fd> and maps it: a plan
// stream then carries only where each piece's rows are in the file (docs/protocol.md, "Shared
// memory"), not the rows. The seals make the mapping as immutable as the node's own copy: nothing
// can change the rows a reader has mapped, even after the node drops the copy or dies (the memory
// goes when the last mapping does).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

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
  /// The global rows the file holds, in its order: ranges [held[2i],
  /// held[2i + 1]) of back-to-back batches (what a reader needs to take rows
  /// from it; SharedFileReply::held).
  const std::vector<uint64_t>& held() const { return held_; }

 private:
  friend struct Sharing;
  SharedExport() = default;
  int fd_ = -1;
  int64_t size_ = 0;
  uint64_t inode_ = 0;
  const uint8_t* data_ = nullptr;  // PROT_READ, MAP_SHARED
  std::vector<uint64_t> held_;
  std::shared_ptr<MemoryBudget> budget_;
  int64_t charged_ = 0;
};

/// What to publish in place of a copy (ExportShared), and why it is not
/// shared when it is not.
struct Shared {
  std::shared_ptr<CachedDataset> dataset;
  arrow::Status status;  ///< OK: `dataset` is views of a SharedExport.
};

/// `dataset` (same name, generation, rows and global ids) as views of a new
/// SharedExport (CachedDataset::shared()), which they keep alive. The rows
/// are first concatenated into one record batch (charged to `budget`, null:
/// none), then `dataset` is let go (its memory returns when the caller held
/// the last reference), then the batch is written to the file: at most two
/// copies at once. When sharing fails, `status` says why (OutOfMemory when
/// the budget cannot hold the second copy, IOError naming the system call,
/// whatever the IPC writer refuses) and `dataset` is the copy to serve
/// instead: the one given, or its rows in one batch if it was let go.
Shared ExportShared(std::shared_ptr<CachedDataset> dataset, std::shared_ptr<MemoryBudget> budget);

/// The kernel's policy for transparent huge pages in shared memory: the
/// chosen word of /sys/kernel/mm/transparent_hugepage/shmem_enabled (`never`,
/// `advise`, `always`, `within_size`, `deny` or `force`). Shared files get
/// huge pages (they ask) unless it is `never` or `deny`; IOError when the file
/// cannot be read (a kernel without THP), Invalid when no word is chosen.
arrow::Result<std::string> ShmemHugePages();

}  // namespace icefloe
