#include "icefloe/protocol/actions.h"

#include <cctype>

namespace icefloe {

using json = nlohmann::json;

namespace {

constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();

// The load action, one line per field (docs/protocol.md lists the same).
const Field<LoadRequest> kLoadFields[] = {
    {Str("name", kRequired, Values(1, 200)), &LoadRequest::name},
    {Str("source", kRequired, Values(1, 4096)), &LoadRequest::source},
    {Int("snapshot_id", kOptional, Values(std::numeric_limits<int64_t>::min(), kInt64Max)),
     &LoadRequest::snapshot_id},
    {Str("ref", kOptional, Values(1, 255)), &LoadRequest::ref},
    {Int("as_of_ms", kOptional, Values(0, kInt64Max)), &LoadRequest::as_of_ms},
    {ListOf(FieldType::kStringList, "columns", kOptional, Values(1, 1024), Values(0, 65536)),
     &LoadRequest::columns},
    {Str("filter", kOptional, Values(0, 65536)), &LoadRequest::filter},
    {Int("batch_rows", kOptional, Values(1, kMaxBatchRows)), &LoadRequest::batch_rows},
    {Int("replication", kOptional, Values(1, 16)), &LoadRequest::replication},
    {ObjectField("transform", kOptional), MessageOf<&LoadRequest::transform>()},
};

const Field<NameRequest> kNameFields[] = {
    {Str("name", kRequired, Values(1, 1024)), &NameRequest::name},
};

// Column names as the descriptors' (descriptors.cc); the head checks them. `generation`
// as the epoch descriptor's: the copy to map (a replaced one while the head keeps it).
const Field<SliceMapRequest> kSliceMapFields[] = {
    {Str("name", kRequired, Values(1, 1024)), &SliceMapRequest::name},
    {ListOf(FieldType::kStringList, "columns", kOptional, Values(1, 1024), Values(1, 65535)),
     &SliceMapRequest::columns},
    {Uint("generation", kOptional, Values(1, std::numeric_limits<uint64_t>::max())),
     &SliceMapRequest::generation},
};

}  // namespace

arrow::Status CheckDatasetName(std::string_view name, std::string_view what) {
  for (char c : name) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.' ||
          c == '/')) {
      return arrow::Status::Invalid(
          what, ": 'name' may only hold letters, digits and - _ . /; got '", name, "'");
    }
  }
  return arrow::Status::OK();
}

json LoadRequest::ToJson() const {
  json j = {{"v", kProtocolVersion}};
  WriteFields<LoadRequest>(kLoadFields, *this, &j);
  return j;
}

arrow::Result<LoadRequest> LoadRequest::FromJson(const json& j) {
  JsonFields in(j, "load");
  LoadRequest r;
  ARROW_RETURN_NOT_OK(ReadFields<LoadRequest>(in, kLoadFields, &r));
  ARROW_RETURN_NOT_OK(CheckDatasetName(r.name, "load"));
  int selectors = (r.snapshot_id ? 1 : 0) + (r.ref ? 1 : 0) + (r.as_of_ms ? 1 : 0);
  if (selectors > 1) {
    return arrow::Status::Invalid("load: give at most one of 'snapshot_id', 'ref' and 'as_of_ms'");
  }
  return r;
}

arrow::Result<LoadRequest> LoadRequest::Parse(std::string_view body) {
  ARROW_ASSIGN_OR_RAISE(json j, ParseJsonObject(body, "load"));
  ARROW_ASSIGN_OR_RAISE(LoadRequest r, FromJson(j));
  // A client's spec, unlike a catalog record's: a misspelt option is refused.
  if (r.transform) ARROW_RETURN_NOT_OK(r.transform->CheckKnownFields());
  return r;
}

MessageSpec LoadRequest::Spec() { return SpecOf<LoadRequest>("load", kLoadFields); }

json NameRequest::ToJson() const {
  json j = {{"v", kProtocolVersion}};
  WriteFields<NameRequest>(kNameFields, *this, &j);
  return j;
}

arrow::Result<NameRequest> NameRequest::Parse(std::string_view body, std::string_view action) {
  ARROW_ASSIGN_OR_RAISE(json j, ParseJsonObject(body, action));
  NameRequest r;
  ARROW_RETURN_NOT_OK(ReadFields<NameRequest>(JsonFields(j, std::string(action)), kNameFields, &r));
  return r;
}

MessageSpec NameRequest::Spec(std::string_view action) {
  return SpecOf<NameRequest>(action, kNameFields);
}

json SliceMapRequest::ToJson() const {
  json j = {{"v", kProtocolVersion}};
  WriteFields<SliceMapRequest>(kSliceMapFields, *this, &j);
  if (columns.empty()) j.erase("columns");  // absent means all; [] is refused
  return j;
}

arrow::Result<SliceMapRequest> SliceMapRequest::Parse(std::string_view body) {
  ARROW_ASSIGN_OR_RAISE(json j, ParseJsonObject(body, "slice_map"));
  SliceMapRequest r;
  ARROW_RETURN_NOT_OK(ReadFields<SliceMapRequest>(JsonFields(j, "slice_map"), kSliceMapFields, &r));
  return r;
}

MessageSpec SliceMapRequest::Spec() {
  return SpecOf<SliceMapRequest>("slice_map", kSliceMapFields);
}

}  // namespace icefloe
