// Bytes: parsing "8GiB"-style flags, printing sizes for humans, and hex.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <arrow/result.h>

namespace icefloe {

/// Parses a byte size such as "512", "64KiB", "8GiB", "1.5GB" or "100M".
/// Binary (KiB/MiB/GiB/TiB, K/M/G/T) and decimal (KB/MB/GB/TB) suffixes are
/// accepted, case-insensitively. Returns Invalid naming the text otherwise.
arrow::Result<int64_t> ParseByteSize(std::string_view text);

/// Formats a byte count with a binary suffix, e.g. 1536 -> "1.5 KiB".
std::string FormatBytes(int64_t bytes);

/// Lowercase hex of `bytes`, two digits each: "\x01\xab" -> "01ab".
std::string HexEncode(std::string_view bytes);

}  // namespace icefloe
