// The piece header's parser (protocol/piece.h) for the Python client, as a C
// ABI: the client reads every message's header with the same code the nodes'
// tests check their encoder against, so the tree has one piece decoder.
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

}  // extern "C"
