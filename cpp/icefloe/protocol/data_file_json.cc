#include "icefloe/protocol/data_file_json.h"

namespace icefloe {

using json = nlohmann::json;
using iceberg::DataFile;

namespace {

constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();
constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();

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
};
const FieldSpec kContent = Int("content", kRequired, Values(0, 2));

}  // namespace

json DataFileToJson(const DataFile& f) {
  json j = {{"content", static_cast<int>(f.content)}};
  WriteFields<DataFile>(kDataFileFields, f, &j);
  if (f.equality_ids.empty()) j.erase("equality_ids");
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
  return f;
}

MessageSpec DataFileSpec() { return SpecOf<DataFile>("data file", kDataFileFields, {kContent}); }

}  // namespace icefloe
