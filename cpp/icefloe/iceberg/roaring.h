// Roaring bitmaps in the portable serialization, as Iceberg deletion vectors
// store row positions.
//
// A 64-bit bitmap (the "portable" 64-bit layout of CRoaring and
// RoaringBitmap Java) is an 8-byte little-endian count of 32-bit bitmaps,
// each preceded by its 4-byte little-endian key (the high 32 bits of its
// values), keys ascending. A 32-bit bitmap is the standard portable format
// (github.com/RoaringBitmap/RoaringFormatSpec): a cookie, per-container keys
// and cardinalities, optional offsets, then array, bitset and run containers.
//
// The decoder checks everything it reads (lengths, key and value order,
// cardinalities, run bounds) so that malformed input is an error and never
// a wrong set of positions.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include <arrow/result.h>

namespace icefloe::iceberg {

/// Decodes a serialized 64-bit Roaring bitmap into its values, ascending.
/// Every value must be below `limit` (deletion vectors: the data file's row
/// count), which also bounds the memory used. `*consumed` (optional)
/// receives the bytes read; input may continue after the bitmap. Invalid
/// describing the first problem found.
arrow::Result<std::vector<int64_t>> DecodeRoaring64(std::string_view bytes, int64_t limit,
                                                    size_t* consumed = nullptr);

/// Serializes ascending, distinct, non-negative values as a 64-bit Roaring
/// bitmap (array and bitset containers, plus run containers when
/// `use_runs`). For tests and fixtures; Invalid for unsorted input.
arrow::Result<std::string> EncodeRoaring64(const std::vector<int64_t>& values, bool use_runs);

}  // namespace icefloe::iceberg
