#include "icefloe/protocol/plan_ticket.h"

#include "icefloe/common/byte_io.h"

namespace icefloe {

namespace {

// Bounds on what a ticket may ask for, so a forged or corrupt body cannot
// make a node allocate without limit.
constexpr uint32_t kMaxOwnedRanges = 1 << 20;

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
  if (!IsShuffleMode(mode)) {
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

}  // namespace icefloe
