// libFuzzer target for the Puffin reader: any bytes, read as a whole Puffin
// file, as one deletion-vector blob, or as a bare 64-bit Roaring bitmap, must
// give an error or values, never a crash, a leak, an endless loop or a huge
// allocation. Build with -DICEFLOE_FUZZ=ON and clang, then:
//   puffin_fuzz -max_total_time=60 -rss_limit_mb=2048 corpus/
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "icefloe/iceberg/puffin.h"
#include "icefloe/iceberg/roaring.h"

namespace {

// Bounds decoded positions (and so memory), as a data file's row count does.
constexpr int64_t kRowLimit = int64_t{1} << 22;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // A view of the input, not a copy, so overreads hit the sanitizer's redzone.
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  const std::string location = "fuzz.puffin";
  auto footer = icefloe::iceberg::ParsePuffinFooter(bytes, static_cast<int64_t>(size), location);
  if (footer.ok()) {
    for (const auto& blob : footer->blobs) {
      // ParsePuffinFooter checked that every blob lies inside the input.
      auto blob_bytes =
          bytes.substr(static_cast<size_t>(blob.offset), static_cast<size_t>(blob.length));
      (void)icefloe::iceberg::DecodeDeletionVector(blob_bytes, kRowLimit, location);
    }
  }
  (void)icefloe::iceberg::DecodeDeletionVector(bytes, kRowLimit, location);
  size_t consumed = 0;
  (void)icefloe::iceberg::DecodeRoaring64(bytes, kRowLimit, &consumed);
  return 0;
}
