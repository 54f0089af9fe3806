#include "icefloe/client/protocol_abi.h"

#include <cstddef>
#include <initializer_list>
#include <string>

#include "icefloe/client/arrow_c_abi.h"
#include "icefloe/client/merge.h"
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

namespace {

struct FieldLayout {
  const char* name;
  size_t offset;
  size_t size;
};

#define ICEFLOE_FIELD(S, F) \
  FieldLayout { #F, offsetof(S, F), sizeof(S::F) }

void AppendStruct(std::string* out, const char* name, size_t size,
                  std::initializer_list<FieldLayout> fields) {
  if (out->size() > 1) *out += ",";
  *out += "\"" + std::string(name) + "\":{\"size\":" + std::to_string(size) + ",\"fields\":{";
  bool first = true;
  for (const FieldLayout& f : fields) {
    if (!first) *out += ",";
    first = false;
    *out += "\"" + std::string(f.name) + "\":[" + std::to_string(f.offset) + "," +
            std::to_string(f.size) + "]";
  }
  *out += "}}";
}

std::string AbiLayout() {
  std::string out = "{";
  AppendStruct(
      &out, "IcefloeMergeStep", sizeof(IcefloeMergeStep),
      {ICEFLOE_FIELD(IcefloeMergeStep, kind), ICEFLOE_FIELD(IcefloeMergeStep, stream),
       ICEFLOE_FIELD(IcefloeMergeStep, batch), ICEFLOE_FIELD(IcefloeMergeStep, count),
       ICEFLOE_FIELD(IcefloeMergeStep, batch_size), ICEFLOE_FIELD(IcefloeMergeStep, last_size),
       ICEFLOE_FIELD(IcefloeMergeStep, num_pieces), ICEFLOE_FIELD(IcefloeMergeStep, streams),
       ICEFLOE_FIELD(IcefloeMergeStep, bases), ICEFLOE_FIELD(IcefloeMergeStep, offsets),
       ICEFLOE_FIELD(IcefloeMergeStep, in_order), ICEFLOE_FIELD(IcefloeMergeStep, in_file),
       ICEFLOE_FIELD(IcefloeMergeStep, start), ICEFLOE_FIELD(IcefloeMergeStep, rows)});
  AppendStruct(
      &out, "IcefloePieceHeader", sizeof(IcefloePieceHeader),
      {ICEFLOE_FIELD(IcefloePieceHeader, flags), ICEFLOE_FIELD(IcefloePieceHeader, batch),
       ICEFLOE_FIELD(IcefloePieceHeader, batch_size), ICEFLOE_FIELD(IcefloePieceHeader, count),
       ICEFLOE_FIELD(IcefloePieceHeader, last_size), ICEFLOE_FIELD(IcefloePieceHeader, entries),
       ICEFLOE_FIELD(IcefloePieceHeader, sources), ICEFLOE_FIELD(IcefloePieceHeader, entry_offset),
       ICEFLOE_FIELD(IcefloePieceHeader, source_offset)});
  AppendStruct(&out, "ArrowArray", sizeof(ArrowArray),
               {ICEFLOE_FIELD(ArrowArray, length), ICEFLOE_FIELD(ArrowArray, null_count),
                ICEFLOE_FIELD(ArrowArray, offset), ICEFLOE_FIELD(ArrowArray, n_buffers),
                ICEFLOE_FIELD(ArrowArray, n_children), ICEFLOE_FIELD(ArrowArray, buffers),
                ICEFLOE_FIELD(ArrowArray, children), ICEFLOE_FIELD(ArrowArray, dictionary),
                ICEFLOE_FIELD(ArrowArray, release), ICEFLOE_FIELD(ArrowArray, private_data)});
  return out + "}";
}

#undef ICEFLOE_FIELD

}  // namespace

extern "C" const char* icefloe_abi_layout() noexcept {
  static const std::string layout = AbiLayout();
  return layout.c_str();
}
