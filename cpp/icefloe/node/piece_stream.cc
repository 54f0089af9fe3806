#include "icefloe/node/piece_stream.h"

#include <algorithm>
#include <chrono>
#include <deque>
#include <functional>
#include <optional>

#include <arrow/array/builder_primitive.h>
#include <arrow/buffer.h>
#include <arrow/compute/api_vector.h>
#include <arrow/compute/exec.h>
#include <arrow/ipc/writer.h>
#include <arrow/record_batch.h>
#include <arrow/type.h>
#include <arrow/util/byte_size.h>

namespace icefloe {

namespace flight = arrow::flight;

namespace {

struct Piece {
  std::shared_ptr<arrow::RecordBatch> batch;
  PieceInfo info;
  bool gathered = false;           // rows copied from scattered places (for metrics)
  std::optional<ChunkInfo> chunk;  // set: whole batches (IFP3), `info` unused
};

// Batches with more scattered runs than this are gathered into one piece.
constexpr size_t kMaxSlicePieces = 8;
// Rows per gathered piece of a row ticket.
constexpr size_t kRowsPerPiece = 64 * 1024;
// Bounds on a chunk of whole batches (one message): rows, and bytes of the
// Arrow buffers it references, so a reader's receive buffers stay small.
constexpr uint64_t kMaxChunkRows = 64 * 1024;
constexpr int64_t kMaxChunkBytes = 8 << 20;

// A FlightDataStream over pieces produced on demand by `next_`: each call
// appends the pieces of one more unit of work, or returns false at the end.
class PieceStream : public flight::FlightDataStream {
 public:
  using Producer = std::function<arrow::Result<bool>(std::deque<Piece>*)>;

  PieceStream(std::shared_ptr<const CachedDataset> dataset, std::shared_ptr<arrow::Schema> schema,
              std::shared_ptr<arrow::MemoryPool> gather_pool, Producer next,
              std::unique_ptr<StreamMeter> meter)
      : gather_pool_(std::move(gather_pool)),
        dataset_(std::move(dataset)),
        schema_(std::move(schema)),
        next_(std::move(next)),
        mapper_(*schema_),
        meter_(std::move(meter)) {}

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

  arrow::Result<flight::FlightPayload> NextPayload() {
    const auto started = std::chrono::steady_clock::now();
    while (pending_.empty()) {
      ARROW_ASSIGN_OR_RAISE(bool more, next_(&pending_));
      if (!more) return flight::FlightPayload{};  // end of stream: null metadata
    }
    Piece piece = std::move(pending_.front());
    pending_.pop_front();
    flight::FlightPayload payload;
    ARROW_RETURN_NOT_OK(
        arrow::ipc::GetRecordBatchPayload(*piece.batch, options_, &payload.ipc_message));
    payload.app_metadata = arrow::Buffer::FromString(piece.chunk ? EncodeChunkMetadata(*piece.chunk)
                                                                 : EncodePieceMetadata(piece.info));
    if (meter_) {
      meter_->Batch(piece.batch->num_rows(), payload.ipc_message.body_length,
                    std::chrono::steady_clock::now() - started, piece.gathered);
    }
    return payload;
  }
};

void AppendPieceRun(std::vector<PieceRun>* runs, uint32_t offset, uint32_t length) {
  if (!runs->empty() && runs->back().offset + runs->back().length == offset) {
    runs->back().length += length;
  } else {
    runs->push_back({offset, length});
  }
}

// One piece holding `rows`, gathered in storage order (a copy of whole runs:
// rows that come in blocks cost little more than slices), tagged with where
// each goes: rows[i] fills position offsets[i] of the batch. The consumer
// reorders the rows of all endpoints in one step anyway.
arrow::Status GatheredPiece(const CachedDataset& dataset, uint64_t batch, uint32_t batch_rows,
                            const std::vector<uint64_t>& rows, const std::vector<uint32_t>& offsets,
                            arrow::MemoryPool* pool, const std::vector<int>& columns,
                            std::deque<Piece>* out) {
  std::vector<uint32_t> order;
  ARROW_ASSIGN_OR_RAISE(auto gathered, dataset.GatherSorted(rows, pool, &order, columns));
  PieceInfo info{batch, batch_rows, {}};
  for (uint32_t i : order) AppendPieceRun(&info.runs, offsets[i], 1);
  out->push_back({std::move(gathered), std::move(info), /*gathered=*/true, std::nullopt});
  return arrow::Status::OK();
}

// Sample batches are scattered rows anywhere in the table: the ones in the
// owned ranges are gathered into one piece, read sorted (window batches:
// WindowSpanPieces).
arrow::Status ScatteredPieces(const CachedDataset& dataset, const PlanTicket& ticket,
                              uint64_t batch, PlanCache* cache, arrow::MemoryPool* pool,
                              const std::vector<int>& columns, std::deque<Piece>* out) {
  ARROW_ASSIGN_OR_RAISE(EpochShape shape, Shape(ticket.params));
  std::vector<uint64_t> mine;
  std::vector<uint32_t> offsets;  // mine[i] goes to offsets[i] of the batch
  ARROW_RETURN_NOT_OK(BatchOwnedRows(ticket.params, batch, ticket.owned, cache, &mine, &offsets));
  if (mine.empty()) return arrow::Status::OK();
  const auto batch_rows = static_cast<uint32_t>(BatchLength(ticket.params, shape, batch));
  return GatheredPiece(dataset, batch, batch_rows, mine, offsets, pool, columns, out);
}

// Window-mode batches of one stream gathered together, in *spans*: about one
// default window's worth of positions or more (4096 rows), so that a window's
// batches read its blocks once and share one gather's fixed costs (sort,
// plan, one allocation per column), and travel as one message. Spans are
// fixed by the plan alone (every endpoint of a consumer cuts the same ones,
// from batch 0, however its stream started), so a consumer merges the pieces
// of all endpoints one span at a time.
constexpr uint64_t kMaxSpanRows = 16 * 1024;

uint64_t SpanBatches(const PlanParams& params) {
  return std::max<uint64_t>(1, kMaxSpanRows / std::max<uint64_t>(params.batch_size, 1));
}

// Rows a span's gather may hold: kMaxSpanRows, fewer where the dataset's rows
// are wide, so that one span's gather stays within a chunk's bytes.
uint64_t SpanRowsLimit(const CachedDataset& dataset) {
  const uint64_t rows = static_cast<uint64_t>(std::max<int64_t>(dataset.num_rows(), 1));
  const uint64_t row_bytes = std::max<uint64_t>(static_cast<uint64_t>(dataset.nbytes()) / rows, 1);
  return std::clamp<uint64_t>(static_cast<uint64_t>(kMaxChunkBytes) / row_bytes, 1, kMaxSpanRows);
}

// `rows` gathered in their order, in two steps: a copy in storage order,
// where a window's blocks are runs (one copy of each run per column, many
// cache misses in flight), then a take within that small, cache-resident
// copy. Copying row by row straight into place costs a dependent miss per
// row and column: several times slower on a busy machine.
arrow::Result<std::shared_ptr<arrow::RecordBatch>> GatherInOrder(const CachedDataset& dataset,
                                                                 const std::vector<uint64_t>& rows,
                                                                 arrow::MemoryPool* pool,
                                                                 const std::vector<int>& columns) {
  std::vector<uint32_t> order;  // sorted row k is rows[order[k]]
  ARROW_ASSIGN_OR_RAISE(auto sorted, dataset.GatherSorted(rows, pool, &order, columns));
  arrow::UInt32Builder indices(pool);
  ARROW_RETURN_NOT_OK(indices.Resize(static_cast<int64_t>(order.size())));
  std::vector<uint32_t> where(order.size());  // rows[i] is sorted row where[i]
  for (uint32_t k = 0; k < order.size(); ++k) where[order[k]] = k;
  ARROW_RETURN_NOT_OK(indices.AppendValues(where));
  ARROW_ASSIGN_OR_RAISE(auto index_array, indices.Finish());
  arrow::compute::ExecContext ctx(pool);
  ARROW_ASSIGN_OR_RAISE(arrow::Datum taken,
                        arrow::compute::Take(sorted, index_array,
                                             arrow::compute::TakeOptions::NoBoundsCheck(), &ctx));
  return taken.record_batch();
}

// A span's owned rows, and where each goes: positions run over the span's
// batches laid end to end (batch i of the span starts at the sum of the
// earlier ones' lengths).
struct SpanRows {
  std::vector<uint64_t> rows;
  std::vector<uint32_t> positions;  // rows[i] goes to positions[i]
  std::vector<uint32_t> lengths;    // each batch's positions
  std::vector<size_t> firsts;       // each batch's first index into rows
  uint64_t total = 0;               // the span's positions

  bool whole() const { return rows.size() == total; }
  // All batches but the last of one length, the last no longer: the span's
  // positions are batch i's at i * lengths[0], as IFP3/IFP4/IFP5 say.
  bool uniform() const {
    for (size_t i = 0; i + 1 < lengths.size(); ++i) {
      if (lengths[i] != lengths[0]) return false;
    }
    return lengths.back() <= lengths[0];
  }
};

// The owned rows of the stream's span from `batch`: the plan's span holding
// it, from `batch` on, up to the ticket's end.
arrow::Result<SpanRows> OwnedSpanRows(const PlanTicket& ticket, uint64_t batch, PlanCache* cache) {
  ARROW_ASSIGN_OR_RAISE(EpochShape shape, Shape(ticket.params));
  const uint64_t span = SpanBatches(ticket.params);
  const uint64_t end = std::min(ticket.batch_end, (batch / span + 1) * span);
  SpanRows out;
  std::vector<uint64_t> mine;
  std::vector<uint32_t> offsets;
  for (uint64_t b = batch; b < end; ++b) {
    const uint64_t length = BatchLength(ticket.params, shape, b);
    if (out.total + length > UINT32_MAX) return arrow::Status::Invalid("a span over 2^32 rows");
    mine.clear();
    offsets.clear();
    ARROW_RETURN_NOT_OK(BatchOwnedRows(ticket.params, b, ticket.owned, cache, &mine, &offsets));
    out.firsts.push_back(out.rows.size());
    out.rows.insert(out.rows.end(), mine.begin(), mine.end());
    for (uint32_t offset : offsets) {
      out.positions.push_back(static_cast<uint32_t>(out.total + offset));
    }
    out.lengths.push_back(static_cast<uint32_t>(length));
    out.total += length;
  }
  return out;
}

// The span's rows one batch at a time: batches held whole here as one run in
// order (the consumer passes them on as they are), others gathered in storage
// order with their positions.
arrow::Status PerBatchPieces(const CachedDataset& dataset, uint64_t batch, const SpanRows& span,
                             arrow::MemoryPool* pool, const std::vector<int>& columns,
                             std::deque<Piece>* out) {
  std::vector<uint64_t> part;
  std::vector<uint32_t> offsets;
  uint32_t base = 0;
  for (size_t i = 0; i < span.lengths.size(); ++i) {
    const size_t first = span.firsts[i];
    const size_t last = i + 1 < span.firsts.size() ? span.firsts[i + 1] : span.rows.size();
    const uint32_t length = span.lengths[i];
    if (first < last) {
      offsets.clear();
      for (size_t k = first; k < last; ++k) offsets.push_back(span.positions[k] - base);
      if (last - first == length) {  // whole: in position order
        part.assign(length, 0);
        for (size_t k = first; k < last; ++k) part[offsets[k - first]] = span.rows[k];
        ARROW_ASSIGN_OR_RAISE(auto gathered, GatherInOrder(dataset, part, pool, columns));
        out->push_back(
            {std::move(gathered), {batch + i, length, {{0, length}}}, true, std::nullopt});
      } else {
        part.assign(span.rows.begin() + static_cast<ptrdiff_t>(first),
                    span.rows.begin() + static_cast<ptrdiff_t>(last));
        ARROW_RETURN_NOT_OK(
            GatheredPiece(dataset, batch + i, length, part, offsets, pool, columns, out));
      }
    }
    base += length;
  }
  return arrow::Status::OK();
}

// Window mode: the stream's span from `batch` (SpanBatches), its owned rows
// gathered in one go. Held whole here, the span goes as one chunk (IFP3) in
// batch order; shared with other endpoints, as one span piece (IFP5) of rows
// in storage order, which the consumer puts in place together with the other
// endpoints' rows in one take. A span of one batch, or one whose gather would
// be too large, goes as one piece per batch. Returns the batches taken.
arrow::Result<uint64_t> WindowSpanPieces(const CachedDataset& dataset, const PlanTicket& ticket,
                                         uint64_t batch, PlanCache* cache, arrow::MemoryPool* pool,
                                         const std::vector<int>& columns, std::deque<Piece>* out) {
  ARROW_ASSIGN_OR_RAISE(SpanRows span, OwnedSpanRows(ticket, batch, cache));
  const auto count = static_cast<uint32_t>(span.lengths.size());
  if (span.rows.empty()) return count;
  const bool together = count >= 2 && span.uniform() && span.rows.size() <= SpanRowsLimit(dataset);
  if (!together) {
    ARROW_RETURN_NOT_OK(PerBatchPieces(dataset, batch, span, pool, columns, out));
    return count;
  }
  const uint32_t batch_rows = span.lengths.front();
  const uint32_t last_rows = span.lengths.back();
  if (span.whole()) {
    std::vector<uint64_t> ordered(span.total);
    for (size_t i = 0; i < span.rows.size(); ++i) ordered[span.positions[i]] = span.rows[i];
    ARROW_ASSIGN_OR_RAISE(auto gathered, GatherInOrder(dataset, ordered, pool, columns));
    ARROW_ASSIGN_OR_RAISE(int64_t bytes, arrow::util::ReferencedBufferSize(*gathered));
    if (bytes <= kMaxChunkBytes) {
      out->push_back(
          {std::move(gathered), {}, true, ChunkInfo{batch, batch_rows, count, last_rows}});
      return count;
    }
    ARROW_RETURN_NOT_OK(PerBatchPieces(dataset, batch, span, pool, columns, out));
    return count;
  }
  std::vector<uint32_t> order;  // sorted row k is span.rows[order[k]]
  ARROW_ASSIGN_OR_RAISE(auto gathered, dataset.GatherSorted(span.rows, pool, &order, columns));
  PieceInfo info{batch, batch_rows, {}, count, last_rows};
  for (uint32_t i : order) AppendPieceRun(&info.runs, span.positions[i], 1);
  out->push_back({std::move(gathered), std::move(info), /*gathered=*/true, std::nullopt});
  return count;
}

// Batches batch, batch + 1, ... as one chunk piece (IFP3), when at least two
// of them are each one run of rows, owned by this ticket, directly after
// each other in one cached batch (mode none, or block mode within a block, for
// a consumer whose consecutive batches are consecutive rows): one zero-copy
// slice and one message instead of one per batch. Returns the batches taken;
// 0 when no chunk applies (the caller sends `batch` as pieces).
arrow::Result<uint64_t> ChunkPiece(const CachedDataset& dataset, const PlanTicket& ticket,
                                   uint64_t batch, const std::vector<int>& columns,
                                   std::deque<Piece>* out) {
  const ShuffleMode mode = ticket.params.order.mode;
  if (mode != ShuffleMode::kNone && mode != ShuffleMode::kBlock) return 0;
  if (batch + 1 >= ticket.batch_end) return 0;
  ARROW_ASSIGN_OR_RAISE(std::vector<RowRange> runs, BatchRuns(ticket.params, batch));
  if (runs.size() != 1) return 0;
  const RowRange first = runs[0];
  const CachedBatch* holder = dataset.BatchHolding(first.start);
  const auto& owned = ticket.owned;
  auto range = std::upper_bound(owned.begin(), owned.end(), first.start,
                                [](uint64_t v, const RowRange& r) { return v < r.stop; });
  if (holder == nullptr || range == owned.end() || range->start > first.start) return 0;
  const uint64_t limit =
      std::min({holder->global_stop(), range->stop, first.start + kMaxChunkRows});
  if (first.stop > limit) return 0;
  ChunkInfo chunk{batch, static_cast<uint32_t>(first.size()), 1,
                  static_cast<uint32_t>(first.size())};
  uint64_t stop = first.stop;
  while (batch + chunk.count < ticket.batch_end && chunk.last_rows == chunk.batch_rows) {
    ARROW_ASSIGN_OR_RAISE(runs, BatchRuns(ticket.params, batch + chunk.count));
    if (runs.size() != 1 || runs[0].start != stop || runs[0].stop > limit ||
        runs[0].size() > chunk.batch_rows) {
      break;
    }
    stop = runs[0].stop;
    chunk.last_rows = static_cast<uint32_t>(runs[0].size());
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
    chunk.count /= 2;  // whole batches of batch_rows, so last_rows becomes batch_rows
    chunk.last_rows = chunk.batch_rows;
    stop = first.start + uint64_t{chunk.count} * chunk.batch_rows;
  }
  if (chunk.count < 2) return 0;
  out->push_back({std::move(slice), {}, /*gathered=*/false, chunk});
  return chunk.count;
}

// The pieces of one consumer batch that fall in the owned ranges.
arrow::Status BatchPieces(const CachedDataset& dataset, const PlanTicket& ticket, uint64_t batch,
                          PlanCache* cache, arrow::MemoryPool* gather_pool,
                          const std::vector<int>& columns, std::deque<Piece>* out) {
  const ShuffleMode mode = ticket.params.order.mode;
  if (mode == ShuffleMode::kSample) {
    return ScatteredPieces(dataset, ticket, batch, cache, gather_pool, columns, out);
  }
  ARROW_ASSIGN_OR_RAISE(std::vector<RowRange> runs, BatchRuns(ticket.params, batch));
  uint64_t rows_in_batch = 0;
  for (const auto& run : runs) rows_in_batch += run.size();
  const uint32_t batch_rows = static_cast<uint32_t>(rows_in_batch);
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

  if (subruns.size() <= kMaxSlicePieces) {
    for (const auto& s : subruns) {
      if (dataset.CountRows(s.rows) != s.rows.size()) {
        return arrow::Status::KeyError("rows [", s.rows.start, ", ", s.rows.stop, ") of dataset '",
                                       dataset.name(), "' are not all held by this node");
      }
      uint32_t piece_offset = s.offset;
      for (auto& slice : dataset.Slice(s.rows)) {
        uint32_t n = static_cast<uint32_t>(slice->num_rows());
        if (!columns.empty()) {
          ARROW_ASSIGN_OR_RAISE(slice, slice->SelectColumns(columns));
        }
        out->push_back(
            {std::move(slice), {batch, batch_rows, {{piece_offset, n}}}, false, std::nullopt});
        piece_offset += n;
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
  return GatheredPiece(dataset, batch, batch_rows, rows, offsets, gather_pool, columns, out);
}

}  // namespace

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

arrow::Result<std::unique_ptr<flight::FlightDataStream>> MakePlanStream(
    std::shared_ptr<const CachedDataset> dataset, PlanTicket ticket,
    std::shared_ptr<arrow::MemoryPool> gather_pool, std::unique_ptr<StreamMeter> meter,
    std::vector<int> columns) {
  ARROW_ASSIGN_OR_RAISE(auto schema, ProjectedSchema(*dataset, columns));
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
  arrow::MemoryPool* pool = gather_pool.get();
  auto producer = [ds, pool, ticket = std::move(ticket), next_batch, cache,
                   columns = std::move(columns)](std::deque<Piece>* out) -> arrow::Result<bool> {
    if (*next_batch >= ticket.batch_end) return false;
    uint64_t chunked = 0;
    if (ticket.params.order.mode == ShuffleMode::kWindow) {
      ARROW_ASSIGN_OR_RAISE(
          chunked, WindowSpanPieces(*ds, ticket, *next_batch, cache.get(), pool, columns, out));
    } else {
      ARROW_ASSIGN_OR_RAISE(chunked, ChunkPiece(*ds, ticket, *next_batch, columns, out));
    }
    if (chunked > 0) {
      *next_batch += chunked;
      return true;
    }
    ARROW_RETURN_NOT_OK(BatchPieces(*ds, ticket, (*next_batch)++, cache.get(), pool, columns, out));
    return true;
  };
  return std::make_unique<PieceStream>(std::move(dataset), std::move(schema),
                                       std::move(gather_pool), std::move(producer),
                                       std::move(meter));
}

arrow::Result<std::unique_ptr<flight::FlightDataStream>> MakeRowsStream(
    std::shared_ptr<const CachedDataset> dataset, RowsTicket ticket,
    std::shared_ptr<arrow::MemoryPool> gather_pool, std::unique_ptr<StreamMeter> meter,
    std::vector<int> columns) {
  ARROW_ASSIGN_OR_RAISE(auto schema, ProjectedSchema(*dataset, columns));
  auto next = std::make_shared<size_t>(0);
  const CachedDataset* ds = dataset.get();
  arrow::MemoryPool* pool = gather_pool.get();
  auto producer = [ds, pool, ticket = std::move(ticket), next,
                   columns = std::move(columns)](std::deque<Piece>* out) -> arrow::Result<bool> {
    if (*next >= ticket.rows.size()) return false;
    size_t end = std::min(ticket.rows.size(), *next + kRowsPerPiece);
    const auto from = static_cast<ptrdiff_t>(*next);
    const auto to = static_cast<ptrdiff_t>(end);
    std::vector<uint64_t> rows(ticket.rows.begin() + from, ticket.rows.begin() + to);
    std::vector<uint32_t> offsets(ticket.positions.begin() + from, ticket.positions.begin() + to);
    ARROW_RETURN_NOT_OK(GatheredPiece(*ds, 0, ticket.total, rows, offsets, pool, columns, out));
    *next = end;
    return true;
  };
  return std::make_unique<PieceStream>(std::move(dataset), std::move(schema),
                                       std::move(gather_pool), std::move(producer),
                                       std::move(meter));
}

}  // namespace icefloe
