// HMAC-SHA256 for signed tickets (OpenSSL's libcrypto).
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

namespace icefloe {

inline constexpr size_t kHmacSize = 32;
using HmacDigest = std::array<uint8_t, kHmacSize>;

/// HMAC-SHA256 of `data` under `key`. Thread-safe.
HmacDigest HmacSha256(std::string_view key, std::string_view data);

/// Compares two byte strings in time independent of where they differ.
bool ConstantTimeEquals(std::string_view a, std::string_view b);

}  // namespace icefloe
