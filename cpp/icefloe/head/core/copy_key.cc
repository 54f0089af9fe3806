#include "icefloe/head/core/copy_key.h"

#include <limits>

#include "icefloe/protocol/fields.h"

namespace icefloe {

using json = nlohmann::json;

namespace {

constexpr int64_t kNoSnapshot = -1;
constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();
constexpr int64_t kInt64Min = std::numeric_limits<int64_t>::min();
constexpr int64_t kInt32Min = std::numeric_limits<int32_t>::min();

// Read into a copy whose snapshot is a plain integer (-1: none).
struct KeyFields {
  std::string table;
  int64_t snapshot = kNoSnapshot;
  std::vector<int32_t> projection;
  std::string filter;
  int64_t batch_rows = 0;
  int32_t replication = 0;
  std::vector<std::string> models;
};

const Field<KeyFields> kKeyFields[] = {
    {Str("table", kRequired, Values(0, 65536)), &KeyFields::table},
    {Int("snapshot", kRequired, Values(kInt64Min, kInt64Max)), &KeyFields::snapshot},
    {ListOf(FieldType::kIntList, "projection", kRequired, Values(kInt32Min, kInt32Max),
            Values(0, 1 << 20)),
     &KeyFields::projection},
    {Str("filter", kRequired, Values(0, 1 << 20)), &KeyFields::filter},
    {Int("batch_rows", kRequired, Values(0, kInt64Max)), &KeyFields::batch_rows},
    {Int("replication", kRequired, Values(0, kInt32Max)), &KeyFields::replication},
    {ListOf(FieldType::kStringList, "models", kOptional, Values(0, 256), Values(0, 256)),
     &KeyFields::models},
};
const FieldSpec kTransform = ObjectField("transform", kOptional);

}  // namespace

CopyKey CopyKey::Of(const iceberg::ScanPlan& plan, const LoadRequest& request,
                    const std::vector<std::string>& model_sha256) {
  CopyKey k;
  k.table = plan.table_uuid.empty() ? plan.metadata_location : plan.table_uuid;
  k.snapshot = plan.snapshot_id;
  k.projection = plan.projection;
  k.filter = request.filter;
  k.batch_rows = request.batch_rows;
  k.replication = request.replication;
  if (request.transform) {
    k.transform = request.transform->ToJson();
    k.model_sha256 = model_sha256;
  }
  return k;
}

bool CopyKey::SameButSnapshot(const CopyKey& other) const {
  CopyKey a = *this;
  a.snapshot = other.snapshot;
  return a == other;
}

json CopyKey::ToJson() const {
  json j = {{"table", table},           {"snapshot", snapshot ? *snapshot : kNoSnapshot},
            {"projection", projection}, {"filter", filter},
            {"batch_rows", batch_rows}, {"replication", replication}};
  if (!transform.is_null()) {
    j["transform"] = transform;
    j["models"] = model_sha256;
  }
  return j;
}

std::string CopyKey::ToText() const { return Dump(ToJson()); }

arrow::Result<CopyKey> CopyKey::FromText(std::string_view text, std::string_view what) {
  ARROW_ASSIGN_OR_RAISE(json j, ParseJsonObject(text, what));
  JsonFields in(j, std::string(what));
  KeyFields f;
  ARROW_RETURN_NOT_OK(ReadFields<KeyFields>(in, kKeyFields, &f));
  CopyKey k;
  k.table = std::move(f.table);
  if (f.snapshot != kNoSnapshot) k.snapshot = f.snapshot;
  k.projection = std::move(f.projection);
  k.filter = std::move(f.filter);
  k.batch_rows = f.batch_rows;
  k.replication = f.replication;
  ARROW_ASSIGN_OR_RAISE(const json* transform, in.Find(kTransform));
  if (transform != nullptr) {
    ARROW_ASSIGN_OR_RAISE(const json* object, in.Object(*transform, kTransform));
    k.transform = *object;
    k.model_sha256 = std::move(f.models);
  }
  return k;
}

}  // namespace icefloe
