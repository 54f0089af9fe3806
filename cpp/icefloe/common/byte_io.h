// Little-endian byte writer and bounds-checked reader for the wire codecs.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include <arrow/result.h>
#include <arrow/status.h>

namespace icefloe {

/// Appends little-endian integers and length-prefixed strings to a string.
class ByteWriter {
 public:
  explicit ByteWriter(std::string* out) : out_(out) {}

  void U8(uint8_t v) { out_->push_back(static_cast<char>(v)); }
  void U16(uint16_t v) { Fixed(v); }
  void U32(uint32_t v) { Fixed(v); }
  void U64(uint64_t v) { Fixed(v); }
  void I64(int64_t v) { Fixed(v); }
  void Bytes(std::string_view v) { out_->append(v); }
  /// A u16 length then the bytes; callers keep strings under 64 KiB.
  void String16(std::string_view v) {
    U16(static_cast<uint16_t>(v.size()));
    Bytes(v);
  }

 private:
  template <typename T>
  void Fixed(T v) {
    char buf[sizeof(T)];
    for (size_t i = 0; i < sizeof(T); ++i) buf[i] = static_cast<char>((v >> (8 * i)) & 0xFF);
    out_->append(buf, sizeof(T));
  }
  std::string* out_;
};

/// Reads what ByteWriter wrote; every read checks the remaining length and
/// fails with Invalid("<what>: truncated at byte N") instead of overrunning.
class ByteReader {
 public:
  ByteReader(std::string_view data, std::string_view what) : data_(data), what_(what) {}

  arrow::Result<uint8_t> U8() { return Fixed<uint8_t>(); }
  arrow::Result<uint16_t> U16() { return Fixed<uint16_t>(); }
  arrow::Result<uint32_t> U32() { return Fixed<uint32_t>(); }
  arrow::Result<uint64_t> U64() { return Fixed<uint64_t>(); }
  arrow::Result<int64_t> I64() {
    ARROW_ASSIGN_OR_RAISE(auto v, Fixed<uint64_t>());
    return static_cast<int64_t>(v);
  }
  arrow::Result<std::string_view> Bytes(size_t n) {
    if (remaining() < n) return Truncated();
    std::string_view v = data_.substr(pos_, n);
    pos_ += n;
    return v;
  }
  arrow::Result<std::string_view> String16() {
    ARROW_ASSIGN_OR_RAISE(uint16_t n, U16());
    return Bytes(n);
  }

  size_t position() const { return pos_; }
  size_t remaining() const { return data_.size() - pos_; }

 private:
  template <typename T>
  arrow::Result<T> Fixed() {
    if (remaining() < sizeof(T)) return Truncated();
    T v = 0;
    for (size_t i = 0; i < sizeof(T); ++i) {
      v |= static_cast<T>(static_cast<T>(static_cast<uint8_t>(data_[pos_ + i])) << (8 * i));
    }
    pos_ += sizeof(T);
    return v;
  }
  arrow::Status Truncated() const {
    return arrow::Status::Invalid(what_, ": truncated at byte ", pos_, " of ", data_.size());
  }

  std::string_view data_;
  std::string_view what_;
  size_t pos_ = 0;
};

}  // namespace icefloe
