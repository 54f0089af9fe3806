#include "icefloe/protocol/data_file_json.h"

#include "icefloe/common/bytes.h"
#include "icefloe/iceberg/types.h"

namespace icefloe {

using json = nlohmann::json;
using iceberg::DataFile;

namespace {

constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();

// Field by field; "content" (an enum) is read by hand below. A new DataFile
// member: a line here (or a hand-read like "content"), a row in
// docs/protocol.md, and the regenerated python/icefloe/_fields.json.
const Field<DataFile> kDataFileFields[] = {
    {Str("path", kRequired, Values(1, 65536)), &DataFile::file_path},
    {Str("format", kOptional, Values(1, 16)), &DataFile::file_format},
    {Int("records", kOptional, Values(0, kInt64Max)), &DataFile::record_count},
    {Int("size", kOptional, Values(0, kInt64Max)), &DataFile::file_size_in_bytes},
    {Int("spec_id", kOptional, Values(0, kInt32Max)), &DataFile::spec_id},
    {Int("seq", kOptional, Values(0, kInt64Max)), &DataFile::data_sequence_number},
    {ListOf(FieldType::kIntList, "equality_ids", kOptional, Values(0, kInt32Max), Values(0, 65536)),
     &DataFile::equality_ids},
    {Str("referenced_data_file", kOptional, Values(1, 65536)), &DataFile::referenced_data_file},
    // A v3 deletion vector's blob in its Puffin file.
    {Int("content_offset", kOptional, Values(0, kInt64Max)), &DataFile::content_offset},
    {Int("content_size", kOptional, Values(0, kInt64Max)), &DataFile::content_size_in_bytes},
};
const FieldSpec kContent = Int("content", kRequired, Values(0, 2));

// Identity partition values (columns absent from the file read as these):
// [{"id", "type" (Iceberg's spelling), "value" (the single-value binary
// serialization in hex; absent for null)}].
const FieldSpec kPartitionValues = ObjectList("partition_values", kOptional, Values(0, 65536));
const FieldSpec kValueId = Int("id", kRequired, Values(0, kInt32Max));
const FieldSpec kValueType = Str("type", kRequired, Values(1, 64));
const FieldSpec kValueHex = Str("value", kOptional, Values(0, 1024));

arrow::Result<std::string> FromHex(const JsonFields& in, const json& v, std::string_view hex) {
  auto nibble = [](char c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
  };
  if (hex.size() % 2 != 0) return in.Bad(kValueHex, "lower-case hex digits in pairs", v);
  std::string out;
  for (size_t i = 0; i < hex.size(); i += 2) {
    const int hi = nibble(hex[i]), lo = nibble(hex[i + 1]);
    if (hi < 0 || lo < 0) return in.Bad(kValueHex, "lower-case hex digits in pairs", v);
    out.push_back(static_cast<char>(hi * 16 + lo));
  }
  return out;
}

arrow::Result<json> PartitionValuesToJson(const std::vector<iceberg::PartitionValue>& values) {
  json out = json::array();
  for (const auto& v : values) {
    json item = {{"id", v.source_id}, {"type", v.type->ToString()}};
    if (!v.value.is_null()) {
      ARROW_ASSIGN_OR_RAISE(std::string bytes, iceberg::EncodeSingleValue(v.value, *v.type));
      item["value"] = HexEncode(bytes);
    }
    out.push_back(std::move(item));
  }
  return out;
}

arrow::Result<iceberg::PartitionValue> PartitionValueFromJson(const json& j, std::string what) {
  JsonFields in(j, std::move(what));
  iceberg::PartitionValue v;
  ARROW_ASSIGN_OR_RAISE(const json* id, in.Find(kValueId));
  ARROW_ASSIGN_OR_RAISE(int64_t source_id, in.Int(*id, kValueId));
  v.source_id = static_cast<int32_t>(source_id);  // within int32 by kValueId's range
  ARROW_ASSIGN_OR_RAISE(const json* type_json, in.Find(kValueType));
  ARROW_ASSIGN_OR_RAISE(std::string type, in.String(*type_json, kValueType));
  auto parsed = iceberg::ParseType(json(type));
  if (!parsed.ok() || !(*parsed)->is_primitive()) {
    return in.Bad(kValueType, "a primitive Iceberg type", *type_json);
  }
  v.type = *parsed;
  v.value.type = v.type->id;
  v.value.scale = v.type->scale;
  ARROW_ASSIGN_OR_RAISE(const json* hex_json, in.Find(kValueHex));
  if (hex_json != nullptr) {
    ARROW_ASSIGN_OR_RAISE(std::string hex, in.String(*hex_json, kValueHex));
    ARROW_ASSIGN_OR_RAISE(std::string bytes, FromHex(in, *hex_json, hex));
    auto value = iceberg::DecodeSingleValue(*v.type, bytes);
    if (!value.ok()) {
      return value.status().WithMessage(in.what(), ": 'value': ", value.status().message());
    }
    v.value = std::move(*value);
  }
  return v;
}

}  // namespace

json DataFileToJson(const DataFile& f) {
  json j = {{"content", static_cast<int>(f.content)}};
  WriteFields<DataFile>(kDataFileFields, f, &j);
  if (f.equality_ids.empty()) j.erase("equality_ids");
  if (!f.identity_values.empty()) {
    // The planner checks that every value has a binary form. Should one not,
    // an invalid value makes the node refuse the file instead of reading
    // wrong values.
    auto values = PartitionValuesToJson(f.identity_values);
    j["partition_values"] = values.ok() ? std::move(*values) : json("unencodable");
  }
  return j;
}

arrow::Result<DataFile> DataFileFromJson(const json& j, std::string what) {
  if (!j.is_object()) return arrow::Status::Invalid(what, ": not an object");
  JsonFields in(j, std::move(what));
  DataFile f;
  ARROW_ASSIGN_OR_RAISE(const json* content, in.Find(kContent));
  ARROW_ASSIGN_OR_RAISE(int64_t c, in.Int(*content, kContent));
  f.content = static_cast<iceberg::FileContent>(c);
  ARROW_RETURN_NOT_OK(ReadFields<DataFile>(in, kDataFileFields, &f));
  ARROW_ASSIGN_OR_RAISE(const json* values, in.Find(kPartitionValues));
  if (values != nullptr) {
    ARROW_ASSIGN_OR_RAISE(const json* list, in.List(*values, kPartitionValues));
    for (size_t i = 0; i < list->size(); ++i) {
      const json& item = (*list)[i];
      if (!item.is_object()) return in.Bad(kPartitionValues, "a list of objects", item, i);
      ARROW_ASSIGN_OR_RAISE(
          auto v, PartitionValueFromJson(
                      item, in.what() + " 'partition_values'[" + std::to_string(i) + "]"));
      f.identity_values.push_back(std::move(v));
    }
  }
  return f;
}

MessageSpec DataFileSpec() {
  return SpecOf<DataFile>("data file", kDataFileFields, {kContent, kPartitionValues});
}

}  // namespace icefloe
