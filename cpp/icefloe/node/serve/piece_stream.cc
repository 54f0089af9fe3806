#include "icefloe/node/serve/piece_stream.h"

#include <algorithm>
#include <chrono>
#include <deque>
#include <functional>
#include <optional>
#include <sstream>

#include <arrow/buffer.h>
#include <arrow/ipc/writer.h>
#include <arrow/record_batch.h>
#include <arrow/type.h>
#include <arrow/util/byte_size.h>
#include <arrow/util/key_value_metadata.h>

#include <unistd.h>

#include "icefloe/common/wire_status.h"
#include "icefloe/node/copy/gather.h"
#include "icefloe/node/copy/shared_export.h"
#include "icefloe/node/serve/piece.h"
#include "icefloe/node/serve/window_pieces.h"
#include "icefloe/protocol/replies.h"

namespace icefloe {

namespace flight = arrow::flight;

namespace {

// Batches with more scattered runs than this are gathered into one piece.
constexpr size_t kMaxSlicePieces = 8;
// Rows per gathered piece of a row ticket.
constexpr size_t kRowsPerPiece = 64 * 1024;
// Rows of a chunk of whole batches (one message; its bytes: kMaxChunkBytes).
constexpr uint64_t kMaxChunkRows = 64 * 1024;

// A piece by reference as pieces whose source runs each lie in one segment
// of `file` (a reader reads each from its segment): the piece itself when
// they do; else its rows cut where they change segment, each part with the
// positions of its rows, the same batches and shape (the merge takes
// several pieces of a batch or span from one stream). A whole piece (a
// chunk) never crosses a segment (ReferenceChunk).
std::vector<PieceInfo> BySegment(PieceInfo piece, const SharedExport& file) {
  const auto& starts = file.starts();
  auto crosses = [&](const SourceRun& r) {
    const size_t k = file.SegmentOf(static_cast<int64_t>(r.start));
    return static_cast<int64_t>(r.start + r.length) > starts[k + 1];
  };
  bool one = true;
  if (file.segments().size() > 1 && !piece.source.empty()) {
    const size_t first = file.SegmentOf(static_cast<int64_t>(piece.source[0].start));
    for (const auto& r : piece.source) {
      one = one && !crosses(r) && file.SegmentOf(static_cast<int64_t>(r.start)) == first;
    }
  }
  if (one || piece.whole) return {std::move(piece)};
  std::vector<uint32_t> positions = piece.positions;  // one per row, in the piece's order
  if (positions.empty()) {
    for (const auto& run : piece.runs) {
      for (uint32_t i = 0; i < run.length; ++i) positions.push_back(run.offset + i);
    }
  }
  std::vector<PieceInfo> parts;
  size_t row = 0;
  for (const auto& whole_run : piece.source) {
    SourceRun r = whole_run;
    while (r.length > 0) {
      const size_t k = file.SegmentOf(static_cast<int64_t>(r.start));
      const auto room = static_cast<uint64_t>(starts[k + 1]) - r.start;
      const auto n = static_cast<uint32_t>(std::min<uint64_t>(room, r.length));
      const bool same = !parts.empty() && !parts.back().source.empty() &&
                        file.SegmentOf(static_cast<int64_t>(parts.back().source.back().start)) == k;
      if (!same) {
        PieceInfo part = piece;
        part.runs.clear();
        part.positions.clear();
        part.source.clear();
        parts.push_back(std::move(part));
      }
      PieceInfo& part = parts.back();
      part.source.push_back({r.start, n});
      part.positions.insert(part.positions.end(), positions.begin() + static_cast<ptrdiff_t>(row),
                            positions.begin() + static_cast<ptrdiff_t>(row + n));
      row += n;
      r.start += n;
      r.length -= n;
    }
  }
  return parts;
}

// A FlightDataStream over pieces produced on demand by `next_`: each call
// appends the pieces of one more unit of work, or returns false at the end.
class PieceStream : public flight::FlightDataStream {
 public:
  using Producer = std::function<arrow::Result<bool>(std::deque<Piece>*)>;

  // `schema`: what the stream's messages hold (SharedSchema's: none of the
  // dataset's columns, for a stream by reference).
  PieceStream(std::shared_ptr<const CachedDataset> dataset, std::shared_ptr<arrow::Schema> schema,
              std::shared_ptr<arrow::MemoryPool> gather_pool, Producer next,
              std::unique_ptr<StreamMeter> meter, bool by_reference = false,
              bool reader_cuts = false)
      : gather_pool_(std::move(gather_pool)),
        dataset_(std::move(dataset)),
        schema_(std::move(schema)),
        next_(std::move(next)),
        mapper_(*schema_),
        meter_(std::move(meter)),
        by_reference_(by_reference),
        reader_cuts_(reader_cuts) {}

  std::shared_ptr<arrow::Schema> schema() override { return schema_; }

  arrow::Result<flight::FlightPayload> GetSchemaPayload() override {
    flight::FlightPayload payload;
    ARROW_RETURN_NOT_OK(
        arrow::ipc::GetSchemaPayload(*schema_, options_, mapper_, &payload.ipc_message));
    return payload;
  }

  arrow::Result<flight::FlightPayload> Next() override {
    auto payload = NextPayload();
    if (meter_ && !payload.ok()) meter_->Failed(payload.status());
    return payload;
  }

 private:
  std::shared_ptr<arrow::MemoryPool> gather_pool_;  // first: outlives gathered pieces
  std::shared_ptr<const CachedDataset> dataset_;    // keeps buffers (and pool) alive
  std::shared_ptr<arrow::Schema> schema_;           // the dataset's, projected
  Producer next_;
  arrow::ipc::DictionaryFieldMapper mapper_;
  arrow::ipc::IpcWriteOptions options_ = arrow::ipc::IpcWriteOptions::Defaults();
  std::deque<Piece> pending_;
  std::unique_ptr<StreamMeter> meter_;  // null: not metered (unit tests)
  const bool by_reference_;
  const bool reader_cuts_;  // the reader cuts pieces at segments (MakePlanStream)

  // A piece by reference as a message: no columns, its rows' runs in the
  // export in its metadata (PieceInfo::source).
  arrow::Result<Piece> AsReference(Piece piece) const {
    if (piece.batch != nullptr) {  // a slice of cached rows: one run
      const int64_t local = dataset_->LocalRow(piece.first_row);
      if (local < 0) return arrow::Status::UnknownError("slice of rows this node does not hold");
      piece.info.source = {{static_cast<uint64_t>(local), static_cast<uint32_t>(piece.num_rows())}};
    }
    piece.batch = arrow::RecordBatch::Make(schema_, piece.num_rows(),
                                           std::vector<std::shared_ptr<arrow::Array>>{});
    return piece;
  }

  // What a piece by reference hands over (metrics): its slice's Arrow bytes,
  // or for rows named by runs the copy's mean bytes per row times its rows.
  arrow::Result<int64_t> ReferencedBytes(const Piece& piece) const {
    if (piece.batch != nullptr) return arrow::util::ReferencedBufferSize(*piece.batch);
    const int64_t rows = dataset_->num_rows();
    if (rows <= 0) return 0;
    const double per_row = static_cast<double>(dataset_->nbytes()) / static_cast<double>(rows);
    return static_cast<int64_t>(per_row * static_cast<double>(piece.num_rows()));
  }

  arrow::Result<flight::FlightPayload> NextPayload() {
    const auto started = std::chrono::steady_clock::now();
    while (pending_.empty()) {
      ARROW_ASSIGN_OR_RAISE(bool more, next_(&pending_));
      if (!more) return flight::FlightPayload{};  // end of stream: null metadata
    }
    Piece piece = std::move(pending_.front());
    pending_.pop_front();
    int64_t referenced_bytes = 0;
    if (by_reference_) {
      ARROW_ASSIGN_OR_RAISE(referenced_bytes, ReferencedBytes(piece));
      ARROW_ASSIGN_OR_RAISE(piece, AsReference(std::move(piece)));
      std::vector<PieceInfo> parts;
      if (reader_cuts_) {
        parts.push_back(std::move(piece.info));
      } else {
        parts = BySegment(std::move(piece.info), *dataset_->shared());
      }
      if (parts.size() > 1) {
        for (size_t i = parts.size(); i-- > 1;) {  // the others next, in order
          pending_.push_front({nullptr, std::move(parts[i]), piece.gathered});
        }
        piece.batch = nullptr;
        piece.info = std::move(parts[0]);
        ARROW_ASSIGN_OR_RAISE(referenced_bytes, ReferencedBytes(piece));
        ARROW_ASSIGN_OR_RAISE(piece, AsReference(std::move(piece)));
      } else {
        piece.info = std::move(parts[0]);
      }
    }
    flight::FlightPayload payload;
    ARROW_RETURN_NOT_OK(
        arrow::ipc::GetRecordBatchPayload(*piece.batch, options_, &payload.ipc_message));
    piece.info.by_reference = by_reference_;
    payload.app_metadata = arrow::Buffer::FromString(EncodePiece(piece.info));
    if (meter_) {
      meter_->Batch(piece.num_rows(),
                    by_reference_ ? referenced_bytes : payload.ipc_message.body_length,
                    std::chrono::steady_clock::now() - started, piece.gathered,
                    by_reference_ ? Transport::kShared : Transport::kNetwork);
    }
    return payload;
  }
};

// Sample batches are scattered rows anywhere in the table: the ones in the
// owned ranges are gathered into one piece, read sorted (window batches:
// WindowSpanPieces).
arrow::Status ScatteredPieces(const CachedDataset& dataset, const PlanTicket& ticket,
                              uint64_t batch, PlanCache* cache, PieceTarget target,
                              const std::vector<int>& columns, std::deque<Piece>* out) {
  ARROW_ASSIGN_OR_RAISE(EpochShape shape, Shape(ticket.params));
  std::vector<uint64_t> mine;
  std::vector<uint32_t> offsets;  // mine[i] goes to offsets[i] of the batch
  ARROW_RETURN_NOT_OK(BatchOwnedRows(ticket.params, batch, ticket.owned, cache, &mine, &offsets));
  if (mine.empty()) return arrow::Status::OK();
  const auto batch_size = static_cast<uint32_t>(BatchLength(ticket.params, shape, batch));
  return GatheredPiece(dataset, {batch, batch_size, {}}, mine, offsets, target, columns, out);
}

// Held rows `rows` (all held: checked by the caller) as one run of the
// export's rows: held rows are numbered in global order, so a range held
// whole is numbered consecutively.
SourceRun ReferenceRun(const CachedDataset& dataset, RowRange rows) {
  return {static_cast<uint64_t>(dataset.LocalRow(rows.start)), static_cast<uint32_t>(rows.size())};
}

// By reference: batches batch, batch + 1, ... as one chunk (whole batches) of
// runs of the export, while each is one run of rows that this node holds and
// one owned range of the ticket holds whole, up to kMaxChunkRows rows. The
// runs need not follow each other: a DDP rank's or a DataLoader worker's
// batches are every world's batch, and they still go as one message (runs
// that do follow each other merge, and a reader slices one run without a
// copy). Returns the batches taken; 0 when fewer than two qualify.
arrow::Result<uint64_t> ReferenceChunk(const CachedDataset& dataset, const PlanTicket& ticket,
                                       uint64_t batch, std::deque<Piece>* out) {
  PieceInfo chunk = WholeBatches(batch, 0, 0, 0);
  std::vector<SourceRun>& source = chunk.source;
  uint64_t rows = 0;
  const auto& owned = ticket.owned;
  while (batch + chunk.count < ticket.batch_end) {
    if (chunk.count > 0 && chunk.last_size != chunk.batch_size) break;  // only the last is short
    ARROW_ASSIGN_OR_RAISE(std::vector<RowRange> runs,
                          BatchRuns(ticket.params, batch + chunk.count));
    if (runs.size() != 1) break;
    const RowRange r = runs[0];
    if ((chunk.count > 0 && r.size() > chunk.batch_size) || rows + r.size() > kMaxChunkRows) break;
    auto range = std::upper_bound(owned.begin(), owned.end(), r.start,
                                  [](uint64_t v, const RowRange& o) { return v < o.stop; });
    if (range == owned.end() || range->start > r.start || range->stop < r.stop) break;
    if (dataset.CountRows(r) != r.size()) break;  // held whole: its export rows follow each other
    const SourceRun run = ReferenceRun(dataset, r);
    // A chunk's runs lie in one segment of the file (a reader slices it).
    const SharedExport& file = *dataset.shared();
    const size_t segment = file.SegmentOf(static_cast<int64_t>(run.start));
    if (static_cast<int64_t>(run.start + run.length) > file.starts()[segment + 1]) break;
    if (!source.empty() && file.SegmentOf(static_cast<int64_t>(source[0].start)) != segment) break;
    if (!source.empty() && source.back().start + source.back().length == run.start &&
        uint64_t{source.back().length} + run.length <= UINT32_MAX) {
      source.back().length += run.length;
    } else {
      source.push_back(run);
    }
    if (chunk.count == 0) chunk.batch_size = static_cast<uint32_t>(r.size());
    chunk.last_size = static_cast<uint32_t>(r.size());
    ++chunk.count;
    rows += r.size();
  }
  if (chunk.count < 2) return 0;
  const uint32_t count = chunk.count;
  out->push_back({nullptr, std::move(chunk)});
  return count;
}

// Batches batch, batch + 1, ... as one chunk (whole batches), when at least two
// of them are each one run of rows, owned by this ticket, directly after
// each other in one cached batch (mode none, or block mode within a block, for
// a consumer whose consecutive batches are consecutive rows): one zero-copy
// slice and one message instead of one per batch. Returns the batches taken;
// 0 when no chunk applies (the caller sends `batch` as pieces).
arrow::Result<uint64_t> ChunkPiece(const CachedDataset& dataset, const PlanTicket& ticket,
                                   uint64_t batch, PieceTarget target,
                                   const std::vector<int>& columns, std::deque<Piece>* out) {
  const ShuffleMode mode = ticket.params.order.mode;
  if (mode != ShuffleMode::kNone && mode != ShuffleMode::kBlock) return 0;
  if (batch + 1 >= ticket.batch_end) return 0;
  if (target.by_reference) return ReferenceChunk(dataset, ticket, batch, out);
  ARROW_ASSIGN_OR_RAISE(std::vector<RowRange> runs, BatchRuns(ticket.params, batch));
  if (runs.size() != 1) return 0;
  const RowRange first = runs[0];
  const CachedBatch* holder = dataset.BatchHolding(first.start);
  const auto& owned = ticket.owned;
  auto range = std::upper_bound(owned.begin(), owned.end(), first.start,
                                [](uint64_t v, const RowRange& r) { return v < r.stop; });
  if (holder == nullptr || range == owned.end() || range->start > first.start) return 0;
  const uint64_t held_stop = holder->global_stop();
  const uint64_t limit = std::min({held_stop, range->stop, first.start + kMaxChunkRows});
  if (first.stop > limit) return 0;
  PieceInfo chunk = WholeBatches(batch, static_cast<uint32_t>(first.size()), 1,
                                 static_cast<uint32_t>(first.size()));
  uint64_t stop = first.stop;
  while (batch + chunk.count < ticket.batch_end && chunk.last_size == chunk.batch_size) {
    ARROW_ASSIGN_OR_RAISE(runs, BatchRuns(ticket.params, batch + chunk.count));
    if (runs.size() != 1 || runs[0].start != stop || runs[0].stop > limit ||
        runs[0].size() > chunk.batch_size) {
      break;
    }
    stop = runs[0].stop;
    chunk.last_size = static_cast<uint32_t>(runs[0].size());
    ++chunk.count;
  }
  std::shared_ptr<arrow::RecordBatch> slice;
  while (chunk.count >= 2) {  // at most log2(kMaxChunkRows) halvings
    slice = holder->batch->Slice(static_cast<int64_t>(first.start - holder->global_start),
                                 static_cast<int64_t>(stop - first.start));
    if (!columns.empty()) {
      ARROW_ASSIGN_OR_RAISE(slice, slice->SelectColumns(columns));
    }
    ARROW_ASSIGN_OR_RAISE(int64_t bytes, arrow::util::ReferencedBufferSize(*slice));
    if (bytes <= kMaxChunkBytes) break;
    chunk.count /= 2;  // whole batches of batch_size, so last_size becomes batch_size
    chunk.last_size = chunk.batch_size;
    stop = first.start + uint64_t{chunk.count} * chunk.batch_size;
  }
  if (chunk.count < 2) return 0;
  const uint32_t count = chunk.count;
  out->push_back({std::move(slice), std::move(chunk), /*gathered=*/false, first.start});
  return count;
}

// The pieces of one consumer batch that fall in the owned ranges.
arrow::Status BatchPieces(const CachedDataset& dataset, const PlanTicket& ticket, uint64_t batch,
                          PlanCache* cache, PieceTarget target, const std::vector<int>& columns,
                          std::deque<Piece>* out) {
  const ShuffleMode mode = ticket.params.order.mode;
  if (mode == ShuffleMode::kSample) {
    return ScatteredPieces(dataset, ticket, batch, cache, target, columns, out);
  }
  ARROW_ASSIGN_OR_RAISE(std::vector<RowRange> runs, BatchRuns(ticket.params, batch));
  uint64_t rows_in_batch = 0;
  for (const auto& run : runs) rows_in_batch += run.size();
  const uint32_t batch_size = static_cast<uint32_t>(rows_in_batch);
  struct SubRun {
    uint32_t offset;
    RowRange rows;
  };
  std::vector<SubRun> subruns;
  uint64_t offset = 0;
  const auto& owned = ticket.owned;
  for (const auto& run : runs) {
    auto it = std::upper_bound(owned.begin(), owned.end(), run.start,
                               [](uint64_t v, const RowRange& r) { return v < r.stop; });
    for (; it != owned.end() && it->start < run.stop; ++it) {
      uint64_t a = std::max(run.start, it->start), z = std::min(run.stop, it->stop);
      if (a < z) subruns.push_back({static_cast<uint32_t>(offset + a - run.start), {a, z}});
    }
    offset += run.size();
  }
  if (subruns.empty()) return arrow::Status::OK();
  // Checked before the stream starts too; a copy does not lose rows while
  // its node serves, but a wrong answer must never go out as a short batch.
  for (const auto& s : subruns) ARROW_RETURN_NOT_OK(CheckHeld(dataset, s.rows));

  if (subruns.size() <= kMaxSlicePieces) {
    for (const auto& s : subruns) {
      if (target.by_reference) {  // one run of the export, whichever batches hold it
        Piece piece{nullptr,
                    {batch, batch_size, {{s.offset, static_cast<uint32_t>(s.rows.size())}}}};
        piece.info.source = {ReferenceRun(dataset, s.rows)};
        out->push_back(std::move(piece));
        continue;
      }
      uint32_t piece_offset = s.offset;
      uint64_t first_row = s.rows.start;
      for (auto& slice : dataset.Slice(s.rows)) {
        uint32_t n = static_cast<uint32_t>(slice->num_rows());
        if (!columns.empty()) {
          ARROW_ASSIGN_OR_RAISE(slice, slice->SelectColumns(columns));
        }
        out->push_back(
            {std::move(slice), {batch, batch_size, {{piece_offset, n}}}, false, first_row});
        piece_offset += n;
        first_row += n;
      }
    }
    return arrow::Status::OK();
  }
  std::vector<uint64_t> rows;
  std::vector<uint32_t> offsets;
  for (const auto& s : subruns) {
    for (uint64_t r = s.rows.start; r < s.rows.stop; ++r) {
      rows.push_back(r);
      offsets.push_back(static_cast<uint32_t>(s.offset + (r - s.rows.start)));
    }
  }
  return GatheredPiece(dataset, {batch, batch_size, {}}, rows, offsets, target, columns, out);
}

}  // namespace

int64_t Piece::num_rows() const {
  if (batch != nullptr) return batch->num_rows();
  int64_t n = 0;
  for (const auto& run : info.source) n += run.length;
  return n;
}

PieceInfo WholeBatches(uint64_t first, uint32_t batch_size, uint32_t count, uint32_t last_size) {
  PieceInfo info{first, batch_size, {}, count, last_size};
  info.whole = true;
  return info;
}

arrow::Result<std::vector<SourceRun>> SourceRuns(const CachedDataset& dataset,
                                                 const std::vector<uint64_t>& rows) {
  std::vector<SourceRun> runs;
  uint64_t last = 0, batch_stop = 0;  // the previous row, and the end of its cached batch
  for (uint64_t row : rows) {
    if (!runs.empty() && row == last + 1 && row < batch_stop && runs.back().length < UINT32_MAX) {
      ++runs.back().length;  // the next row of the same cached batch: no lookup
      last = row;
      continue;
    }
    const auto held = dataset.Locate(row);
    if (!held) {
      return arrow::Status::KeyError("row ", row, " of dataset '", dataset.name(),
                                     "' is not held by this node");
    }
    batch_stop = held->batch_stop;
    last = row;
    const uint64_t at = held->local;
    if (!runs.empty() && runs.back().start + runs.back().length == at &&
        runs.back().length < UINT32_MAX) {
      ++runs.back().length;
    } else {
      runs.push_back({at, 1});
    }
  }
  return runs;
}

namespace {

// `values` in read `order` (ReadOrder, GatherReadOrder; empty: as they are).
template <typename T>
std::vector<T> InReadOrder(const std::vector<T>& values, const std::vector<uint32_t>& order) {
  if (order.empty()) return values;
  std::vector<T> out(order.size());
  for (size_t k = 0; k < order.size(); ++k) out[k] = values[order[k]];
  return out;
}

}  // namespace

arrow::Status GatheredPiece(const CachedDataset& dataset, PieceInfo where,
                            const std::vector<uint64_t>& rows, const std::vector<uint32_t>& offsets,
                            PieceTarget target, const std::vector<int>& columns,
                            std::deque<Piece>* out) {
  where.runs.clear();
  if (target.by_reference) {
    // The rows in storage order, as a gather by value reads them: runs as
    // long as the rows allow (a window's blocks), each row with its position.
    if (rows.size() > UINT32_MAX) return arrow::Status::Invalid("too many rows in one piece");
    const std::vector<uint32_t> order = ReadOrder(rows);
    Piece piece{nullptr, std::move(where), /*gathered=*/true};
    if (order.empty()) {
      ARROW_ASSIGN_OR_RAISE(piece.info.source, SourceRuns(dataset, rows));
    } else {
      ARROW_ASSIGN_OR_RAISE(piece.info.source, SourceRuns(dataset, InReadOrder(rows, order)));
    }
    piece.info.positions = InReadOrder(offsets, order);
    out->push_back(std::move(piece));
    return arrow::Status::OK();
  }
  std::vector<uint32_t> order;
  ARROW_ASSIGN_OR_RAISE(auto gathered,
                        GatherReadOrder(dataset, rows, target.pool, &order, columns));
  where.positions = InReadOrder(offsets, order);
  out->push_back({std::move(gathered), std::move(where), /*gathered=*/true});
  return arrow::Status::OK();
}

arrow::Status CheckHeld(const CachedDataset& dataset, RowRange rows) {
  const uint64_t held = dataset.CountRows(rows);
  if (held == rows.size()) return arrow::Status::OK();
  std::ostringstream words;
  words << "rows [" << rows.start << ", " << rows.stop << ") of dataset '" << dataset.name()
        << "' generation " << dataset.generation() << " are not all held by this node (it holds "
        << held << " of " << rows.size() << "); another replica may hold them";
  return flight::MakeFlightError(flight::FlightStatusCode::Failed, words.str(), kErrorRowsNotHeld);
}

arrow::Result<std::shared_ptr<arrow::Schema>> ProjectedSchema(const CachedDataset& dataset,
                                                              const std::vector<int>& columns) {
  if (columns.empty()) return dataset.schema();
  std::vector<std::shared_ptr<arrow::Field>> fields;
  fields.reserve(columns.size());
  for (int c : columns) {
    if (c < 0 || c >= dataset.schema()->num_fields()) {
      return arrow::Status::Invalid("column index ", c, " is outside dataset '", dataset.name(),
                                    "' of ", dataset.schema()->num_fields(), " columns");
    }
    fields.push_back(dataset.schema()->field(c));
  }
  return arrow::schema(std::move(fields), dataset.schema()->metadata());
}

arrow::Result<std::shared_ptr<arrow::Schema>> SharedSchema(const CachedDataset& dataset,
                                                           const std::vector<int>& columns) {
  const SharedExport* shared = dataset.shared().get();
  if (shared == nullptr) {
    return arrow::Status::Invalid("dataset '", dataset.name(), "' is not shared on this node");
  }
  ARROW_RETURN_NOT_OK(ProjectedSchema(dataset, columns).status());  // checks the indices
  const auto& segments = shared->segments();
  SharedFileReply file{.pid = getpid(),
                       .fd = segments[0]->fd(),
                       .inode = segments[0]->inode(),
                       .size = static_cast<uint64_t>(segments[0]->size()),
                       .columns = {columns.begin(), columns.end()},
                       .dataset = dataset.name(),
                       .generation = dataset.generation(),
                       .held = shared->held()};
  for (size_t i = 1; i < segments.size(); ++i) {
    file.segments.push_back(static_cast<uint64_t>(segments[i]->fd()));
    file.segments.push_back(segments[i]->inode());
    file.segments.push_back(static_cast<uint64_t>(segments[i]->size()));
  }
  // Where each segment's rows lie in its file, once any is in a tier file.
  const bool on_tier =
      std::any_of(segments.begin(), segments.end(), [](const auto& s) { return s->on_tier(); });
  for (size_t i = 0; on_tier && i < segments.size(); ++i) {
    file.batches.push_back(static_cast<uint64_t>(segments[i]->batch()));
    file.batches.push_back(static_cast<uint64_t>(segments[i]->offset()));
    file.batches.push_back(static_cast<uint64_t>(segments[i]->num_rows()));
  }
  auto metadata = arrow::key_value_metadata({"icefloe.shared"}, {file.ToJson().dump()});
  return arrow::schema(arrow::FieldVector{}, std::move(metadata));
}

arrow::Result<std::unique_ptr<flight::FlightDataStream>> MakePlanStream(
    std::shared_ptr<const CachedDataset> dataset, PlanTicket ticket,
    std::shared_ptr<arrow::MemoryPool> gather_pool, std::unique_ptr<StreamMeter> meter,
    std::vector<int> columns, bool by_reference, std::shared_ptr<TierReadahead> readahead,
    bool reader_cuts) {
  ARROW_ASSIGN_OR_RAISE(auto schema, by_reference ? SharedSchema(*dataset, columns)
                                                  : ProjectedSchema(*dataset, columns));
  ARROW_ASSIGN_OR_RAISE(EpochShape shape, Shape(ticket.params));
  if (ticket.batch_end > shape.worker_batches) {
    return arrow::Status::Invalid("plan ticket asks for batches up to ", ticket.batch_end,
                                  " but this consumer has ", shape.worker_batches);
  }
  if (ticket.params.batch_size > UINT32_MAX) {
    return arrow::Status::Invalid("batch_size ", ticket.params.batch_size, " is too large");
  }
  auto next_batch = std::make_shared<uint64_t>(ticket.batch_begin);
  auto cache = std::make_shared<PlanCache>();  // the stream's consecutive batches share windows
  const CachedDataset* ds = dataset.get();
  const PieceTarget target{gather_pool.get(), by_reference};
  if (by_reference) columns.clear();  // the reader projects what it maps
  // The read-ahead tracks what the stream reads of a copy on the tier; a
  // stream by reference reads nothing (its reader maps the tier files).
  std::shared_ptr<TierReadahead::TrackedStream> tracked;
  if (readahead != nullptr && !by_reference) {
    ARROW_ASSIGN_OR_RAISE(tracked, readahead->Track(dataset, ticket));
  }
  auto producer = [ds, target, ticket = std::move(ticket), next_batch, cache, tracked,
                   columns = std::move(columns)](std::deque<Piece>* out) -> arrow::Result<bool> {
    if (*next_batch >= ticket.batch_end) return false;
    uint64_t chunked = 0;
    if (ticket.params.order.mode == ShuffleMode::kWindow) {
      ARROW_ASSIGN_OR_RAISE(
          chunked, WindowSpanPieces(*ds, ticket, *next_batch, cache.get(), target, columns, out));
    } else {
      ARROW_ASSIGN_OR_RAISE(chunked, ChunkPiece(*ds, ticket, *next_batch, target, columns, out));
    }
    if (chunked == 0) {
      ARROW_RETURN_NOT_OK(BatchPieces(*ds, ticket, *next_batch, cache.get(), target, columns, out));
      chunked = 1;
    }
    *next_batch += chunked;
    // The pieces are views of the copy: its pages are read as they are sent.
    if (tracked != nullptr) ARROW_RETURN_NOT_OK(tracked->Reading(*next_batch));
    return true;
  };
  return std::make_unique<PieceStream>(std::move(dataset), std::move(schema),
                                       std::move(gather_pool), std::move(producer),
                                       std::move(meter), by_reference, by_reference && reader_cuts);
}

arrow::Result<std::unique_ptr<flight::FlightDataStream>> MakeRangeStream(
    std::shared_ptr<const CachedDataset> dataset, RowRange range,
    std::shared_ptr<arrow::MemoryPool> gather_pool, std::unique_ptr<StreamMeter> meter,
    const std::vector<int>& columns) {
  ARROW_ASSIGN_OR_RAISE(auto schema, SharedSchema(*dataset, columns));
  ARROW_RETURN_NOT_OK(CheckHeld(*dataset, range));
  // Held whole, the range is one run of the export's rows (held rows are
  // numbered in global order); each message is its part in one segment.
  const auto first = static_cast<uint64_t>(dataset->LocalRow(range.start));
  auto done = std::make_shared<uint64_t>(0);  // rows of the range sent
  const CachedDataset* ds = dataset.get();
  auto producer = [ds, first, rows = range.size(),
                   done](std::deque<Piece>* out) -> arrow::Result<bool> {
    if (*done >= rows) return false;
    const SharedExport& file = *ds->shared();
    const uint64_t at = first + *done;
    const size_t segment = file.SegmentOf(static_cast<int64_t>(at));
    const uint64_t room = static_cast<uint64_t>(file.starts()[segment + 1]) - at;
    const auto n = static_cast<uint32_t>(std::min<uint64_t>({room, rows - *done, UINT32_MAX}));
    if (n == 0) return arrow::Status::UnknownError("range read: an empty segment of the export");
    Piece piece{nullptr, WholeBatches(*done, n, 1, n)};
    piece.info.source = {{at, n}};
    out->push_back(std::move(piece));
    *done += n;
    return true;
  };
  return std::make_unique<PieceStream>(std::move(dataset), std::move(schema),
                                       std::move(gather_pool), std::move(producer),
                                       std::move(meter), /*by_reference=*/true);
}

arrow::Result<std::unique_ptr<flight::FlightDataStream>> MakeRowsStream(
    std::shared_ptr<const CachedDataset> dataset, RowsTicket ticket,
    std::shared_ptr<arrow::MemoryPool> gather_pool, std::unique_ptr<StreamMeter> meter,
    std::vector<int> columns, bool by_reference) {
  ARROW_ASSIGN_OR_RAISE(auto schema, by_reference ? SharedSchema(*dataset, columns)
                                                  : ProjectedSchema(*dataset, columns));
  auto next = std::make_shared<size_t>(0);
  const CachedDataset* ds = dataset.get();
  const PieceTarget target{gather_pool.get(), by_reference};
  if (by_reference) columns.clear();  // the reader projects what it maps
  auto producer = [ds, target, ticket = std::move(ticket), next,
                   columns = std::move(columns)](std::deque<Piece>* out) -> arrow::Result<bool> {
    if (*next >= ticket.rows.size()) return false;
    size_t end = std::min(ticket.rows.size(), *next + kRowsPerPiece);
    const auto from = static_cast<ptrdiff_t>(*next);
    const auto to = static_cast<ptrdiff_t>(end);
    std::vector<uint64_t> rows(ticket.rows.begin() + from, ticket.rows.begin() + to);
    std::vector<uint32_t> offsets(ticket.positions.begin() + from, ticket.positions.begin() + to);
    ARROW_RETURN_NOT_OK(
        GatheredPiece(*ds, {0, ticket.total, {}}, rows, offsets, target, columns, out));
    *next = end;
    return true;
  };
  return std::make_unique<PieceStream>(std::move(dataset), std::move(schema),
                                       std::move(gather_pool), std::move(producer),
                                       std::move(meter), by_reference);
}

}  // namespace icefloe
