#include "icefloe/protocol/plan_ticket.h"

#include <bit>

#include "icefloe/common/byte_io.h"

namespace icefloe {

namespace {

constexpr std::string_view kPieceMagic = "IFP1";           // runs
constexpr std::string_view kPiecePositionsMagic = "IFP2";  // one position per row
constexpr std::string_view kChunkMagic = "IFP3";           // whole consecutive batches
constexpr std::string_view kSourceMagic = "IFS1";          // rows of a shared export
constexpr std::string_view kSpanMagic = "IFP4";            // runs over a span of batches
constexpr std::string_view kSpanPositionsMagic = "IFP5";   // one position per row, in a span
// Bounds on what a ticket may ask for, so a forged or corrupt body cannot
// make a node allocate without limit.
constexpr uint32_t kMaxOwnedRanges = 1 << 20;
constexpr uint32_t kMaxTicketRows = 1 << 24;

}  // namespace

std::string EncodePlanBody(const PlanTicket& t) {
  std::string out;
  ByteWriter w(&out);
  const auto& p = t.params;
  w.U32(kEpochOrderVersion);
  w.U64(p.order.num_rows);
  w.U64(p.order.seed);
  w.U64(p.order.epoch);
  w.U8(static_cast<uint8_t>(p.order.mode));
  w.U64(p.order.block_rows);
  w.U8(p.order.shuffle_within_block ? 1 : 0);
  w.U64(p.order.window_blocks);
  w.U32(p.world_size);
  w.U32(p.rank);
  w.U32(p.num_workers);
  w.U32(p.worker);
  w.U64(p.batch_size);
  w.U8(p.drop_last ? 1 : 0);
  w.U64(p.start);
  w.U64(t.batch_begin);
  w.U64(t.batch_end);
  w.U32(static_cast<uint32_t>(t.owned.size()));
  for (const auto& r : t.owned) {
    w.U64(r.start);
    w.U64(r.stop);
  }
  return out;
}

arrow::Result<PlanTicket> DecodePlanBody(std::string_view body) {
  ByteReader r(body, "Invalid ticket format: plan");
  PlanTicket t;
  auto& p = t.params;
  ARROW_ASSIGN_OR_RAISE(uint32_t version, r.U32());
  if (version != kEpochOrderVersion) {
    return arrow::Status::Invalid("Invalid ticket format: epoch order version ", version,
                                  " is not ", kEpochOrderVersion);
  }
  ARROW_ASSIGN_OR_RAISE(p.order.num_rows, r.U64());
  ARROW_ASSIGN_OR_RAISE(p.order.seed, r.U64());
  ARROW_ASSIGN_OR_RAISE(p.order.epoch, r.U64());
  ARROW_ASSIGN_OR_RAISE(uint8_t mode, r.U8());
  if (mode > static_cast<uint8_t>(ShuffleMode::kWindow)) {
    return arrow::Status::Invalid("Invalid ticket format: shuffle mode ", int{mode});
  }
  p.order.mode = static_cast<ShuffleMode>(mode);
  ARROW_ASSIGN_OR_RAISE(p.order.block_rows, r.U64());
  ARROW_ASSIGN_OR_RAISE(uint8_t within, r.U8());
  p.order.shuffle_within_block = within != 0;
  ARROW_ASSIGN_OR_RAISE(p.order.window_blocks, r.U64());
  ARROW_ASSIGN_OR_RAISE(p.world_size, r.U32());
  ARROW_ASSIGN_OR_RAISE(p.rank, r.U32());
  ARROW_ASSIGN_OR_RAISE(p.num_workers, r.U32());
  ARROW_ASSIGN_OR_RAISE(p.worker, r.U32());
  ARROW_ASSIGN_OR_RAISE(p.batch_size, r.U64());
  ARROW_ASSIGN_OR_RAISE(uint8_t drop, r.U8());
  p.drop_last = drop != 0;
  ARROW_ASSIGN_OR_RAISE(p.start, r.U64());
  ARROW_ASSIGN_OR_RAISE(t.batch_begin, r.U64());
  ARROW_ASSIGN_OR_RAISE(t.batch_end, r.U64());
  ARROW_ASSIGN_OR_RAISE(uint32_t n, r.U32());
  if (n > kMaxOwnedRanges || n > r.remaining() / 16) {
    return arrow::Status::Invalid("Invalid ticket format: ", n, " owned ranges");
  }
  uint64_t prev = 0;
  for (uint32_t i = 0; i < n; ++i) {
    RowRange range;
    ARROW_ASSIGN_OR_RAISE(range.start, r.U64());
    ARROW_ASSIGN_OR_RAISE(range.stop, r.U64());
    if (range.stop < range.start || (i > 0 && range.start < prev)) {
      return arrow::Status::Invalid("Invalid ticket format: owned ranges unsorted or overlapping");
    }
    prev = range.stop;
    t.owned.push_back(range);
  }
  if (r.remaining() != 0) return arrow::Status::Invalid("Invalid ticket format: trailing bytes");
  auto st = ValidatePlan(p);
  if (!st.ok()) return arrow::Status::Invalid("Invalid ticket format: ", st.message());
  if (t.batch_end < t.batch_begin) {
    return arrow::Status::Invalid("Invalid ticket format: batch range ends before it starts");
  }
  return t;
}

std::string EncodeRowsBody(const RowsTicket& t) {
  std::string out;
  ByteWriter w(&out);
  w.U32(t.total);
  w.U32(static_cast<uint32_t>(t.rows.size()));
  for (size_t i = 0; i < t.rows.size(); ++i) {
    w.U32(t.positions[i]);
    w.U64(t.rows[i]);
  }
  return out;
}

arrow::Result<RowsTicket> DecodeRowsBody(std::string_view body) {
  ByteReader r(body, "Invalid ticket format: rows");
  RowsTicket t;
  ARROW_ASSIGN_OR_RAISE(t.total, r.U32());
  ARROW_ASSIGN_OR_RAISE(uint32_t n, r.U32());
  if (n > kMaxTicketRows || n > r.remaining() / 12 || n > t.total) {
    return arrow::Status::Invalid("Invalid ticket format: ", n, " rows");
  }
  t.positions.reserve(n);
  t.rows.reserve(n);
  for (uint32_t i = 0; i < n; ++i) {
    ARROW_ASSIGN_OR_RAISE(uint32_t pos, r.U32());
    ARROW_ASSIGN_OR_RAISE(uint64_t row, r.U64());
    if (pos >= t.total) return arrow::Status::Invalid("Invalid ticket format: row position");
    t.positions.push_back(pos);
    t.rows.push_back(row);
  }
  if (r.remaining() != 0) return arrow::Status::Invalid("Invalid ticket format: trailing bytes");
  return t;
}

namespace {

// Calls fn(offset, length) for each run of the piece's positions: its runs
// as they are, or the maximal runs of `positions` when given.
template <typename Fn>
void ForEachRun(const PieceInfo& piece, Fn&& fn) {
  const std::vector<uint32_t>& given = piece.positions;
  if (given.empty()) {
    for (const auto& run : piece.runs) fn(run.offset, run.length);
    return;
  }
  for (size_t i = 0; i < given.size();) {
    size_t end = i + 1;
    while (end < given.size() && given[end] == given[end - 1] + 1) ++end;
    fn(given[i], static_cast<uint32_t>(end - i));
    i = end;
  }
}

}  // namespace

std::string EncodePieceMetadata(const PieceInfo& piece) {
  uint64_t rows = 0;
  uint64_t runs = 0;
  ForEachRun(piece, [&](uint32_t, uint32_t length) {
    rows += length;
    ++runs;
  });
  // Runs take 8 bytes each, positions 4 bytes a row: the smaller one.
  const bool positions = rows < 2 * runs;
  const bool span = piece.count > 1;
  std::string out(span ? (positions ? kSpanPositionsMagic : kSpanMagic)
                       : (positions ? kPiecePositionsMagic : kPieceMagic));
  out.reserve(out.size() + 28 + (positions ? 4 * rows : 8 * runs));
  ByteWriter w(&out);
  w.U64(piece.batch);
  w.U32(piece.batch_rows);
  if (span) {
    w.U32(piece.count);
    w.U32(piece.last_rows);
  }
  if (positions) {
    w.U32(static_cast<uint32_t>(rows));
    const std::vector<uint32_t>& given = piece.positions;
    if (!given.empty() && std::endian::native == std::endian::little) {
      out.append(reinterpret_cast<const char*>(given.data()), 4 * given.size());  // as they are
    } else {
      ForEachRun(piece, [&](uint32_t offset, uint32_t length) {
        for (uint32_t k = 0; k < length; ++k) w.U32(offset + k);
      });
    }
    return out;
  }
  w.U32(static_cast<uint32_t>(runs));
  ForEachRun(piece, [&](uint32_t offset, uint32_t length) {
    w.U32(offset);
    w.U32(length);
  });
  return out;
}

arrow::Result<PieceInfo> DecodePieceMetadata(std::string_view bytes) {
  const std::string_view magic = bytes.substr(0, kPieceMagic.size());
  const bool positions = magic == kPiecePositionsMagic || magic == kSpanPositionsMagic;
  const bool span = magic == kSpanMagic || magic == kSpanPositionsMagic;
  if (magic != kPieceMagic && magic != kSpanMagic && !positions) {
    return arrow::Status::Invalid("piece metadata: bad magic");
  }
  ByteReader r(bytes.substr(kPieceMagic.size()), "piece metadata");
  PieceInfo p;
  ARROW_ASSIGN_OR_RAISE(p.batch, r.U64());
  ARROW_ASSIGN_OR_RAISE(p.batch_rows, r.U32());
  if (span) {
    ARROW_ASSIGN_OR_RAISE(p.count, r.U32());
    ARROW_ASSIGN_OR_RAISE(p.last_rows, r.U32());
    if (p.count < 2) return arrow::Status::Invalid("piece metadata: span of ", p.count, " < 2");
    if (p.last_rows == 0 || p.last_rows > p.batch_rows) {
      return arrow::Status::Invalid("piece metadata: last_rows ", p.last_rows, " not in 1..",
                                    p.batch_rows);
    }
    if (p.span_rows() > UINT32_MAX) {
      return arrow::Status::Invalid("piece metadata: a span of ", p.span_rows(), " positions");
    }
  }
  ARROW_ASSIGN_OR_RAISE(uint32_t n, r.U32());
  if (n > r.remaining() / (positions ? 4 : 8)) {
    return arrow::Status::Invalid("piece metadata: ", n, positions ? " positions" : " runs");
  }
  for (uint32_t i = 0; i < n; ++i) {
    PieceRun run{0, 1};
    ARROW_ASSIGN_OR_RAISE(run.offset, r.U32());
    if (!positions) {
      ARROW_ASSIGN_OR_RAISE(run.length, r.U32());
    }
    p.runs.push_back(run);
  }
  return p;
}

std::string EncodeChunkMetadata(const ChunkInfo& chunk) {
  std::string out(kChunkMagic);
  ByteWriter w(&out);
  w.U64(chunk.first_batch);
  w.U32(chunk.batch_rows);
  w.U32(chunk.count);
  w.U32(chunk.last_rows);
  return out;
}

arrow::Result<ChunkInfo> DecodeChunkMetadata(std::string_view bytes) {
  if (bytes.substr(0, kChunkMagic.size()) != kChunkMagic) {
    return arrow::Status::Invalid("chunk metadata: bad magic");
  }
  ByteReader r(bytes.substr(kChunkMagic.size()), "chunk metadata");
  ChunkInfo c;
  ARROW_ASSIGN_OR_RAISE(c.first_batch, r.U64());
  ARROW_ASSIGN_OR_RAISE(c.batch_rows, r.U32());
  ARROW_ASSIGN_OR_RAISE(c.count, r.U32());
  ARROW_ASSIGN_OR_RAISE(c.last_rows, r.U32());
  if (r.remaining() != 0) return arrow::Status::Invalid("chunk metadata: trailing bytes");
  if (c.count < 2) return arrow::Status::Invalid("chunk metadata: count ", c.count, " < 2");
  if (c.last_rows == 0 || c.last_rows > c.batch_rows) {
    return arrow::Status::Invalid("chunk metadata: last_rows ", c.last_rows, " not in 1..",
                                  c.batch_rows);
  }
  return c;
}

std::string EncodeSourcePrefix(const std::vector<SourceRun>& runs) {
  std::string out(kSourceMagic);
  out.reserve(8 + runs.size() * 12);
  ByteWriter w(&out);
  w.U32(static_cast<uint32_t>(runs.size()));
  for (const auto& run : runs) {
    w.U64(run.start);
    w.U32(run.length);
  }
  return out;
}

arrow::Result<std::vector<SourceRun>> DecodeSourcePrefix(std::string_view bytes,
                                                         std::string_view* rest) {
  if (bytes.substr(0, kSourceMagic.size()) != kSourceMagic) {
    return arrow::Status::Invalid("source metadata: bad magic");
  }
  ByteReader r(bytes.substr(kSourceMagic.size()), "source metadata");
  ARROW_ASSIGN_OR_RAISE(uint32_t n, r.U32());
  if (r.remaining() / 12 < n) return arrow::Status::Invalid("source metadata: truncated runs");
  std::vector<SourceRun> runs(n);
  for (auto& run : runs) {
    ARROW_ASSIGN_OR_RAISE(run.start, r.U64());
    ARROW_ASSIGN_OR_RAISE(run.length, r.U32());
  }
  *rest = bytes.substr(kSourceMagic.size() + r.position());
  return runs;
}

}  // namespace icefloe
