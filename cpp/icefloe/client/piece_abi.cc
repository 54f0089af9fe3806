#include "icefloe/client/piece_abi.h"

#include "icefloe/protocol/piece.h"

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
