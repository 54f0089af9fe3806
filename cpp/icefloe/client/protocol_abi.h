// The protocol code the Python client shares with the servers, as a C ABI:
// the piece header's parser (protocol/piece.h, the one the merge reads
// headers with and the nodes' tests check their encoder against; exported
// for the Python tests that read what nodes sent); and the grouping of a
// take's rows by the replica set holding them, with their rows-ticket bodies
// (protocol/row_groups.h), the head's rows descriptor's too.
#pragma once

#include <cstdint>

extern "C" {

// A parsed header; its runs or positions start at byte `entry_offset` of the
// bytes parsed and its source runs at `source_offset` (protocol/piece.h).
struct IcefloePieceHeader {
  uint8_t flags;
  uint64_t batch;
  uint32_t batch_size;
  uint32_t count;
  uint32_t last_size;
  uint32_t entries;
  uint32_t sources;
  int64_t entry_offset;
  int64_t source_offset;
};

// Checks and parses `size` bytes into *out. Returns 0, or the PieceError that
// refuses them (icefloe_piece_error names it); *out is untouched then.
__attribute__((visibility("default"))) int32_t icefloe_parse_piece(
    const uint8_t* data, int64_t size, IcefloePieceHeader* out) noexcept;

// A fixed description of a PieceError code (PieceErrorText).
__attribute__((visibility("default"))) const char* icefloe_piece_error(int32_t code) noexcept;

// icefloe::GroupRows over `num_slices` slices (ascending `stops`, the last the
// dataset's rows; `group_of_slice` below `num_groups`): replica set g's rows
// body at out + offsets[g], lengths[g] bytes (0: none of `ids`). `out` holds
// 8 * num_groups + 12 * n bytes, `scratch` n u32. Returns 0, 1 for a row at or
// past the last stop, 2 for a malformed table.
__attribute__((visibility("default"))) int32_t icefloe_group_rows(
    int64_t num_slices, const uint64_t* stops, const uint32_t* group_of_slice, uint32_t num_groups,
    uint32_t n, const uint64_t* ids, uint32_t* scratch, uint8_t* out, uint64_t* offsets,
    uint64_t* lengths) noexcept;

// The layout of the structs this library shares with the Python client's
// ctypes mirrors (python/icefloe/_native.py checks them when it loads the
// library), as JSON: {"<struct>": {"size": bytes, "fields": {"<field>":
// [offset, size], ...}}, ...} for IcefloeMergeStep (merge.h),
// IcefloePieceHeader and ArrowArray (arrow_c_abi.h). Built once; never freed.
__attribute__((visibility("default"))) const char* icefloe_abi_layout() noexcept;

}  // extern "C"
