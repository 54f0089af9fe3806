// The client's libFuzzer targets' input, read as the choices they make.
// Test-only.
#pragma once

#include <cstddef>
#include <cstdint>

namespace icefloe_testing {

// Reads the fuzzer's bytes front to back; zeros once they run out.
class FuzzBytes {
 public:
  FuzzBytes(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  uint8_t U8() { return at_ < size_ ? data_[at_++] : 0; }
  uint32_t Small(uint32_t below) { return below == 0 ? 0 : U8() % below; }
  bool empty() const { return at_ >= size_; }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t at_ = 0;
};

}  // namespace icefloe_testing
