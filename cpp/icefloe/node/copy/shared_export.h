// Same-host readers: a dataset's cached batches in sealed memfds (segments).
//
// A node started with --share-memory lays each copy it publishes out in
// *segments*: each an Arrow IPC file of one record batch (consecutive cached
// batches, a scan task or several: one array per column, so a reader's batch
// is a zero-copy slice wherever it falls in a segment and scattered rows are
// one take) in an anonymous memory file (memfd) that is then sealed against
// any change (F_SEAL_WRITE, _SHRINK, _GROW, _SEAL), and serves its batches as
// zero-copy views of them. The copy's *shared file* is its segments laid end
// to end (its local row order). A reader in the same process namespace, as the
// same user, opens each as /proc/<pid>/fd/<fd> and maps it: a plan stream
// then carries only where each piece's rows are in the file (docs/protocol.md,
// "Shared memory"); a piece crosses segments only to readers of header
// version 2 or later, which cut or assemble it across them.
//
// Segments are shared between generations: a refresh reuses the cached
// batches of the tasks it keeps (views of the old copy's segments), and a
// run of them that is exactly one old segment is that segment again, not a
// new one, so a refresh writes only the rows it read. Each segment is owned by
// shared_ptr (by every export that names it and every batch that views it):
// a retired generation's own segments go when it is freed. The seals make a
// mapping as immutable as the node's own copy: nothing can change the rows a
// reader has mapped, even after the node drops the copy or dies (the memory
// goes when the last mapping does).
//
// A copy partly on the node's disk tier is shared too: its rows in memory are
// laid out in segments as above, and each of its cached batches on the tier
// is a segment of its own that names the tier file (an Arrow IPC file of many
// record batches, open read-only here) and the record batch and rows of it
// that the cached batch is. A reader maps the tier file as it maps a memfd;
// nothing is copied or charged to the node's memory budget for it (the page
// cache is the kernel's), and the read-ahead, which reads the tier ahead of
// streams sent over the network, has nothing to do for it. Tier files cannot
// be sealed: like the node's own mapping, a reader's relies on nothing but
// the node writing its --disk-dir (tier_file.h).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <arrow/record_batch.h>
#include <arrow/result.h>

#include "icefloe/common/memory.h"
#include "icefloe/node/copy/dataset.h"

namespace icefloe {

/// One sealed memfd holding consecutive rows of a copy as an Arrow IPC file of
/// one record batch, mapped read-only here. Charges its bytes to the node's
/// budget while it lives. Immutable; shared by the generations that reuse it.
/// Or (on_tier()) one cached batch of a tier file: rows [offset(), offset() +
/// num_rows()) of record batch batch() of the file open as fd(), which the
/// segment keeps open (it holds the tier file) and charges nothing.
class SharedSegment {
 public:
  ~SharedSegment();
  SharedSegment(const SharedSegment&) = delete;
  SharedSegment& operator=(const SharedSegment&) = delete;

  int fd() const { return fd_; }
  int64_t size() const { return size_; }
  uint64_t inode() const { return inode_; }
  /// The memfd's mapping (null for a segment on the tier).
  const uint8_t* data() const { return data_; }
  int64_t num_rows() const { return rows_; }
  bool on_tier() const { return tier_ != nullptr; }
  /// The record batch of the file's IPC file that holds the segment's rows
  /// (0 for a memfd), and the first of its rows that is the segment's.
  int64_t batch() const { return batch_; }
  int64_t offset() const { return offset_; }
  /// The file's record batch, views of the mapping that do not own it (to
  /// compare with; the copy's batches own their segments).
  const std::shared_ptr<arrow::RecordBatch>& mapped() const { return mapped_; }

 private:
  friend struct Sharing;
  SharedSegment() = default;
  int fd_ = -1;
  int64_t size_ = 0;
  uint64_t inode_ = 0;
  int64_t rows_ = 0;
  int64_t batch_ = 0;
  int64_t offset_ = 0;
  std::shared_ptr<const MappedRegion> tier_;  // owns fd_ when set
  const uint8_t* data_ = nullptr;             // PROT_READ, MAP_SHARED
  std::shared_ptr<arrow::RecordBatch> mapped_;
  std::shared_ptr<MemoryBudget> budget_;
  int64_t charged_ = 0;
};

/// A copy's shared file: its segments in local row order.
class SharedExport {
 public:
  SharedExport(std::vector<std::shared_ptr<const SharedSegment>> segments,
               std::vector<uint64_t> held, int64_t bytes_written);

  const std::vector<std::shared_ptr<const SharedSegment>>& segments() const { return segments_; }
  /// Segment i holds the file's rows [starts()[i], starts()[i + 1]); one more
  /// entry than segments(): the file's rows last.
  const std::vector<int64_t>& starts() const { return starts_; }
  /// The segment holding the file's row `row` (0 <= row < rows).
  size_t SegmentOf(int64_t row) const;
  /// The global rows the file holds, in its order: ranges [held[2i],
  /// held[2i + 1]) of back-to-back batches (what a reader needs to take rows
  /// from it; SharedFileReply::held).
  const std::vector<uint64_t>& held() const { return held_; }
  /// Bytes of segments laid out for this copy (the others it reuses).
  int64_t bytes_written() const { return bytes_written_; }
  /// Bytes of all its segments in memory (not its tier files').
  int64_t size() const;

 private:
  std::vector<std::shared_ptr<const SharedSegment>> segments_;
  std::vector<int64_t> starts_;
  std::vector<uint64_t> held_;
  int64_t bytes_written_ = 0;
};

/// Where a copy's cached batch lies in a tier file a same-host reader can map:
/// rows [offset, offset + its rows) of record batch `batch` of the Arrow IPC
/// file `file` keeps open read-only as `fd`.
struct TierBatch {
  std::shared_ptr<const MappedRegion> file;
  int fd = -1;
  int64_t batch = 0;
  int64_t offset = 0;
};

/// The TierBatch of a copy's cached batch (by index), or nullopt when it is
/// in memory. The tier wing answers (tier_file.h: TierFile::Locate).
using TierLocator = std::function<std::optional<TierBatch>(size_t)>;

/// What to publish in place of a copy (ExportShared), and why it is not
/// shared when it is not.
struct Shared {
  /// The copy to publish; null only when sharing failed and the rows laid
  /// out so far could not be made a copy again (`status` says both).
  std::shared_ptr<const CachedDataset> dataset;
  arrow::Status status;  ///< OK: `dataset` is views of a SharedExport.
};

/// Rows a new segment gathers, task after task, before it is cut at the next
/// task's start: bounds the memfds a copy opens (a table of thousands of
/// small tasks) while a refresh still reuses most segments whole.
constexpr int64_t kMinSegmentBytes = 8 << 20;

/// Rows a new segment gathers at most, cut at a batch's start (within a task
/// if need be): bounds the memory a commit needs beside the copy. Less where
/// the memory budget has less room left (a copy that nearly fills it).
constexpr int64_t kMaxSegmentBytes = 16 << 20;

/// `dataset` (same name, generation, rows and global ids) as views of a new
/// SharedExport (CachedDataset::shared()), which they keep alive. Runs of its
/// cached batches that are exactly a segment of one of `reusable` (the copies
/// this node shares now: a refresh's reused tasks, a heal's base) keep that
/// segment; the other batches are laid out in new segments, each cut at a
/// global row of `cuts` (the tasks' first rows, ascending) once it holds
/// kMinSegmentBytes, and at a batch's start before it would pass
/// kMaxSegmentBytes or the room the budget has left. The segments are written
/// one at a time: a segment's rows are concatenated (charged to `budget`,
/// null: none) and written to its file, and where the caller hands the copy
/// over (no other owner of `dataset`) each segment's heap rows are freed
/// before the next is written, so the commit needs room for one segment
/// beside the rows, never for a second copy. When sharing fails, `status`
/// says why (OutOfMemory naming the bytes a segment needs and the budget's
/// room, IOError naming the system call, whatever the IPC writer refuses) and
/// `dataset` is the copy to serve instead: the copy given when another owner
/// holds it, else the same rows, those laid out so far as views of their
/// segments (a private copy: no SharedExport).
/// Batches `on_tier` locates (a copy partly on the disk tier) are segments of
/// their own that name their tier file: nothing is copied for them, and the
/// copy published keeps its tier files (CachedDataset::held) so that streams
/// over the network still read them through the read-ahead. A batch on the
/// tier it does not locate (no locator) is refused: Invalid. `on_tier` is
/// called before any batch is laid out (the copy given may go after).
Shared ExportShared(std::shared_ptr<const CachedDataset> dataset,
                    std::shared_ptr<MemoryBudget> budget,
                    const std::vector<std::shared_ptr<const SharedExport>>& reusable = {},
                    const std::vector<uint64_t>& cuts = {}, const TierLocator& on_tier = {});

/// The kernel's policy for transparent huge pages in shared memory: the
/// chosen word of /sys/kernel/mm/transparent_hugepage/shmem_enabled (`never`,
/// `advise`, `always`, `within_size`, `deny` or `force`). Shared files get
/// huge pages (they ask) unless it is `never` or `deny`; IOError when the file
/// cannot be read (a kernel without THP), Invalid when no word is chosen.
arrow::Result<std::string> ShmemHugePages();

}  // namespace icefloe
