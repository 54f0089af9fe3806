#include "icefloe/client/protocol_abi.h"

#include "icefloe/protocol/piece.h"
#include "icefloe/protocol/row_groups.h"

extern "C" int32_t icefloe_parse_piece(const uint8_t* data, int64_t size,
                                       IcefloePieceHeader* out) noexcept {
  if (size < 0 || (data == nullptr && size > 0)) {
    return static_cast<int32_t>(icefloe::PieceError::kTruncated);
  }
  icefloe::PieceView view;
  const icefloe::PieceError error = icefloe::ParsePiece(data, static_cast<size_t>(size), &view);
  if (error != icefloe::PieceError::kOk) return static_cast<int32_t>(error);
  *out = {view.flags,
          view.batch,
          view.batch_size,
          view.count,
          view.last_size,
          view.entries,
          view.sources,
          view.entry_bytes - data,
          view.source_bytes - data};
  return 0;
}

extern "C" const char* icefloe_piece_error(int32_t code) noexcept {
  if (code < 0 || code > static_cast<int32_t>(icefloe::PieceError::kLength)) {
    return "unknown error";
  }
  return icefloe::PieceErrorText(static_cast<icefloe::PieceError>(code));
}

extern "C" int32_t icefloe_group_rows(int64_t num_slices, const uint64_t* stops,
                                      const uint32_t* group_of_slice, uint32_t num_groups,
                                      uint32_t n, const uint64_t* ids, uint32_t* scratch,
                                      uint8_t* out, uint64_t* offsets, uint64_t* lengths) noexcept {
  if (num_slices < 0) return static_cast<int32_t>(icefloe::RowGroupsError::kBadTable);
  const icefloe::SliceTable table{stops, group_of_slice, static_cast<size_t>(num_slices),
                                  num_groups};
  return static_cast<int32_t>(icefloe::GroupRows(table, ids, n, scratch, out, offsets, lengths));
}
