// libFuzzer target for AvroReader: any bytes must give an error or values, never a crash, a
// leak, an endless loop or a huge allocation. Build with -DICEFLOE_FUZZ=ON and clang; seed it
// with the fixtures:
//   avro_fuzz -max_total_time=60 -rss_limit_mb=2048 corpus/ cpp/icefloe/iceberg/testdata/avro
#include <cstddef>
#include <cstdint>

#include "icefloe/iceberg/avro.h"

namespace {

using icefloe::iceberg::AvroValue;

// Exercises the typed accessors on every value, as Iceberg code would.
void Touch(const AvroValue& v, int depth) {
  (void)v.As<int64_t>();
  (void)v.As<double>();
  (void)v.As<std::string_view>();
  if (const auto* record = v.record()) {
    for (size_t i = 0; i < record->fields.size(); ++i) {
      const auto& field = record->schema->fields[i];
      if (field.field_id) (void)v.GetOptional<int64_t>(*field.field_id);
      (void)v.Get<std::string_view>(field.name);
      Touch(record->fields[i], depth + 1);
    }
  } else if (const auto* array = v.array()) {
    for (const AvroValue& item : *array) Touch(item, depth + 1);
  } else if (const auto* map = v.map()) {
    for (const auto& entry : *map) Touch(entry.second, depth + 1);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // A view of the input, not a copy, so overreads hit the sanitizer's redzone.
  auto buffer = std::make_shared<arrow::Buffer>(data, static_cast<int64_t>(size));
  icefloe::iceberg::AvroReaderOptions options;
  options.max_block_bytes = int64_t{64} << 20;
  auto reader = icefloe::iceberg::AvroReader::OpenBuffer(buffer, "fuzz.avro", options);
  if (!reader.ok()) return 0;
  AvroValue value;
  while (true) {
    auto more = (*reader)->Next(&value);
    if (!more.ok() || !*more) break;
    Touch(value, 0);
  }
  return 0;
}
