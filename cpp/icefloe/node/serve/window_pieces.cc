#include "icefloe/node/serve/window_pieces.h"

#include <algorithm>

#include <arrow/array/builder_primitive.h>
#include <arrow/compute/api_vector.h>
#include <arrow/compute/exec.h>
#include <arrow/util/byte_size.h>

#include "icefloe/node/copy/gather.h"

namespace icefloe {

namespace {

// Window-mode batches of one stream gathered together, in spans
// (kWindowSpanRows, window_pieces.h), so that a window's batches read its
// blocks once, share one gather's fixed costs (plan, one allocation per
// column) and travel as one message, and the consumer merges, converts and
// splits a span at a time. A stream that starts inside a span (a failover)
// serves the rest of it first.

uint64_t SpanBatches(const PlanParams& params) {
  return std::max<uint64_t>(1, kWindowSpanRows / std::max<uint64_t>(params.batch_size, 1));
}

// Rows a span's gather may hold: kWindowSpanRows, fewer where the dataset's rows
// are wide, so that one span's gather stays within a chunk's bytes.
uint64_t SpanRowsLimit(const CachedDataset& dataset) {
  const uint64_t rows = static_cast<uint64_t>(std::max<int64_t>(dataset.num_rows(), 1));
  const uint64_t row_bytes = std::max<uint64_t>(static_cast<uint64_t>(dataset.nbytes()) / rows, 1);
  return std::clamp<uint64_t>(static_cast<uint64_t>(kMaxChunkBytes) / row_bytes, 1,
                              kWindowSpanRows);
}

// `rows` gathered into their places (rows[i] at output row positions[i], a
// permutation of [0, rows.size())), in two steps: a copy in storage order
// (GatherReadOrder), where a window's blocks are runs (one copy of each run
// per column, many cache misses in flight), then a take within that small,
// cache-resident copy. Copying row by row straight into place costs a
// dependent miss per row and column: several times slower on a busy machine.
// By reference, `piece` names the rows in place instead (piece->source).
arrow::Status GatherInPlace(const CachedDataset& dataset, const std::vector<uint64_t>& rows,
                            const std::vector<uint32_t>& positions, PieceTarget target,
                            const std::vector<int>& columns, Piece* piece) {
  piece->gathered = true;
  if (target.by_reference) {
    std::vector<uint64_t> placed(rows.size());
    for (size_t k = 0; k < rows.size(); ++k) placed[positions[k]] = rows[k];
    ARROW_ASSIGN_OR_RAISE(piece->info.source, SourceRuns(dataset, placed));
    return arrow::Status::OK();
  }
  arrow::MemoryPool* pool = target.pool;
  std::vector<uint32_t> order;  // gathered row k is rows[order[k]] (rows[k] when empty)
  ARROW_ASSIGN_OR_RAISE(auto gathered, GatherReadOrder(dataset, rows, pool, &order, columns));
  std::vector<uint32_t> take(rows.size());  // output row p is gathered row take[p]
  for (uint32_t k = 0; k < take.size(); ++k) take[positions[order.empty() ? k : order[k]]] = k;
  arrow::UInt32Builder indices(pool);
  ARROW_RETURN_NOT_OK(indices.AppendValues(take));
  ARROW_ASSIGN_OR_RAISE(auto index_array, indices.Finish());
  arrow::compute::ExecContext ctx(pool);
  ARROW_ASSIGN_OR_RAISE(arrow::Datum taken,
                        arrow::compute::Take(gathered, index_array,
                                             arrow::compute::TakeOptions::NoBoundsCheck(), &ctx));
  piece->batch = taken.record_batch();
  return arrow::Status::OK();
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
  // positions are batch i's at i * lengths[0], as a span piece says (protocol/piece.h).
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
  for (uint64_t b = batch; b < end; ++b) {
    const uint64_t length = BatchLength(ticket.params, shape, b);
    if (out.total + length > UINT32_MAX) return arrow::Status::Invalid("a span over 2^32 rows");
    const size_t first = out.rows.size();
    ARROW_RETURN_NOT_OK(
        BatchOwnedRows(ticket.params, b, ticket.owned, cache, &out.rows, &out.positions));
    const auto base = static_cast<uint32_t>(out.total);  // batch b's offsets, made the span's
    for (size_t k = first; k < out.positions.size(); ++k) out.positions[k] += base;
    out.firsts.push_back(first);
    out.lengths.push_back(static_cast<uint32_t>(length));
    out.total += length;
  }
  return out;
}

// The span's rows one batch at a time: batches held whole here as one run in
// order (the consumer passes them on as they are), others gathered in storage
// order with their positions.
arrow::Status PerBatchPieces(const CachedDataset& dataset, uint64_t batch, const SpanRows& span,
                             PieceTarget target, const std::vector<int>& columns,
                             std::deque<Piece>* out) {
  std::vector<uint64_t> part;
  std::vector<uint32_t> offsets;
  uint32_t base = 0;
  for (size_t i = 0; i < span.lengths.size(); ++i) {
    const size_t first = span.firsts[i];
    const size_t last = i + 1 < span.firsts.size() ? span.firsts[i + 1] : span.rows.size();
    const uint32_t length = span.lengths[i];
    part.assign(span.rows.begin() + static_cast<ptrdiff_t>(first),
                span.rows.begin() + static_cast<ptrdiff_t>(last));
    offsets.clear();
    for (size_t k = first; k < last; ++k) offsets.push_back(span.positions[k] - base);
    if (part.size() == length) {  // whole: in position order
      Piece piece{nullptr, {batch + i, length, {{0, length}}}, true};
      ARROW_RETURN_NOT_OK(GatherInPlace(dataset, part, offsets, target, columns, &piece));
      out->push_back(std::move(piece));
    } else if (!part.empty()) {
      ARROW_RETURN_NOT_OK(
          GatheredPiece(dataset, {batch + i, length, {}}, part, offsets, target, columns, out));
    }
    base += length;
  }
  return arrow::Status::OK();
}

}  // namespace

arrow::Result<uint64_t> WindowSpanPieces(const CachedDataset& dataset, const PlanTicket& ticket,
                                         uint64_t batch, PlanCache* cache, PieceTarget target,
                                         const std::vector<int>& columns, std::deque<Piece>* out) {
  ARROW_ASSIGN_OR_RAISE(SpanRows span, OwnedSpanRows(ticket, batch, cache));
  const auto count = static_cast<uint32_t>(span.lengths.size());
  if (span.rows.empty()) return count;
  const bool together = count >= 2 && span.uniform() && span.rows.size() <= SpanRowsLimit(dataset);
  if (!together) {
    ARROW_RETURN_NOT_OK(PerBatchPieces(dataset, batch, span, target, columns, out));
    return count;
  }
  const uint32_t batch_size = span.lengths.front();
  const uint32_t last_size = span.lengths.back();
  // A span held whole goes as a chunk in batch order; by reference a chunk
  // would name its rows one run per row, so it goes as any span piece (its
  // blocks' runs, each row's position), for the reader to scatter.
  if (span.whole() && !target.by_reference) {
    Piece piece{nullptr, WholeBatches(batch, batch_size, count, last_size), true};
    ARROW_RETURN_NOT_OK(GatherInPlace(dataset, span.rows, span.positions, target, columns, &piece));
    int64_t bytes = 0;  // by reference: none
    if (piece.batch != nullptr) {
      ARROW_ASSIGN_OR_RAISE(bytes, arrow::util::ReferencedBufferSize(*piece.batch));
    }
    if (bytes <= kMaxChunkBytes) {
      out->push_back(std::move(piece));
      return count;
    }
    ARROW_RETURN_NOT_OK(PerBatchPieces(dataset, batch, span, target, columns, out));
    return count;
  }
  ARROW_RETURN_NOT_OK(GatheredPiece(dataset, {batch, batch_size, {}, count, last_size}, span.rows,
                                    span.positions, target, columns, out));
  return count;
}

}  // namespace icefloe
