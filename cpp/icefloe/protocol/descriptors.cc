#include "icefloe/protocol/descriptors.h"

#include "icefloe/plan/plan.h"
#include "icefloe/protocol/actions.h"

namespace icefloe {

using json = nlohmann::json;

namespace {

constexpr uint64_t kU64Max = std::numeric_limits<uint64_t>::max();
constexpr uint64_t kU32Max = std::numeric_limits<uint32_t>::max();
constexpr std::string_view kKinds[] = {"range", "epoch", "rows"};

const FieldSpec kKind = Str("kind", kOptional, Values(1, 16), kKinds);
const FieldSpec kDataset = Str("dataset", kRequired, Values(1, 200));
// Column names as the load's (actions.cc); the head checks them against the schema.
const FieldSpec kColumns = ListOf(FieldType::kStringList, "columns", kOptional, Values(1, 1024),
                                  Values(1, kMaxProjectedColumns));

const Field<RangeDescriptor> kRangeFields[] = {
    {kDataset, &RangeDescriptor::dataset},
    {Uint("start", kOptional, Values(0, kMaxRows)), &RangeDescriptor::start},
    {Uint("stop", kOptional, Values(0, kMaxRows)), &RangeDescriptor::stop},
    {kColumns, &RangeDescriptor::columns},
    {Str("lengths", kOptional, Values(1, 1024)), &RangeDescriptor::lengths},
    {Uint("generation", kOptional, Values(1, kU64Max)), &RangeDescriptor::generation},
    {Uint("seed", kOptional, Values(0, kU64Max)), &RangeDescriptor::seed},
    {Uint("epoch", kOptional, Values(0, kU64Max)), &RangeDescriptor::epoch},
    {Uint("world_size", kOptional, Values(1, kU32Max)), &RangeDescriptor::world_size},
};

// The epoch plan's coordinates, one line per field. A new field: a member in
// descriptors.h, a line here, a row in docs/protocol.md, and the regenerated
// python/icefloe/_fields.json (protocol_test writes it as _fields.json.expected).
const Field<EpochDescriptor> kEpochFields[] = {
    {kDataset, &EpochDescriptor::dataset},
    {Uint("seed", kOptional, Values(0, kU64Max)), &EpochDescriptor::seed},
    {Uint("epoch", kOptional, Values(0, kU64Max)), &EpochDescriptor::epoch},
    {Str("shuffle", kOptional, Values(1, 16), kShuffleModeNames), &EpochDescriptor::shuffle},
    {Uint("order_version", kOptional, Values(0, kU32Max)), &EpochDescriptor::order_version},
    {Uint("block_rows", kOptional, Values(1, kMaxRows)), &EpochDescriptor::block_rows},
    {Uint("window_blocks", kOptional, Values(1, kMaxRows)), &EpochDescriptor::window_blocks},
    {Flag("shuffle_within_block"), &EpochDescriptor::shuffle_within_block},
    {Uint("world_size", kOptional, Values(1, kU32Max)), &EpochDescriptor::world_size},
    {Uint("rank", kOptional, Values(0, kU32Max - 1)), &EpochDescriptor::rank},
    {Uint("num_workers", kOptional, Values(0, kU32Max)), &EpochDescriptor::num_workers},
    {Uint("worker", kOptional, Values(0, kU32Max - 1)), &EpochDescriptor::worker},
    {Uint("batch_size", kRequired, Values(1, uint64_t{1} << 24)), &EpochDescriptor::batch_size},
    {Flag("drop_last"), &EpochDescriptor::drop_last},
    {Uint("start", kOptional, Values(0, kMaxRows)), &EpochDescriptor::start},
    {Uint("first_batch", kOptional, Values(0, kMaxRows)), &EpochDescriptor::first_batch},
    {Uint("resume_steps", kOptional, Values(0, kMaxRows)), &EpochDescriptor::resume_steps},
    {Uint("resume_world_size", kOptional, Values(1, kU32Max)), &EpochDescriptor::resume_world_size},
    {Uint("resume_batch_size", kOptional, Values(1, uint64_t{1} << 24)),
     &EpochDescriptor::resume_batch_size},
    {kColumns, &EpochDescriptor::columns},
    {Uint("generation", kOptional, Values(1, kU64Max)), &EpochDescriptor::generation},
};

const Field<RowsDescriptor> kRowsFields[] = {
    {kDataset, &RowsDescriptor::dataset},
    {ListOf(FieldType::kUintList, "rows", kRequired, Values(0, kMaxRows),
            Values(0, uint64_t{1} << 24)),
     &RowsDescriptor::rows},
    {kColumns, &RowsDescriptor::columns},
};

template <typename M>
json WithKind(std::string_view kind, std::span<const Field<M>> table, const M& m) {
  json j = {{"v", kProtocolVersion}, {"kind", kind}};
  WriteFields<M>(table, m, &j);
  if (m.columns.empty()) j.erase("columns");  // absent means all; [] is refused
  return j;
}

template <typename M>
arrow::Result<M> ReadDescriptor(const json& j, std::string what, std::span<const Field<M>> table) {
  M m;
  ARROW_RETURN_NOT_OK(ReadFields<M>(JsonFields(j, std::move(what)), table, &m));
  return m;
}

}  // namespace

json RangeDescriptor::ToJson() const {
  return WithKind<RangeDescriptor>("range", kRangeFields, *this);
}
arrow::Result<RangeDescriptor> RangeDescriptor::FromJson(const json& j) {
  ARROW_ASSIGN_OR_RAISE(auto d,
                        ReadDescriptor<RangeDescriptor>(j, "range descriptor", kRangeFields));
  if (d.stop && *d.stop < d.start) {
    return arrow::Status::Invalid("range descriptor: 'stop' ", *d.stop, " is before 'start' ",
                                  d.start);
  }
  if (d.lengths && !d.columns.empty()) {
    return arrow::Status::Invalid(
        "range descriptor: 'lengths' reads one column's row lengths; it takes no 'columns'");
  }
  // The epoch a lengths request plans binds its generation: all of its key or none.
  const int keyed = d.seed.has_value() + d.epoch.has_value() + d.world_size.has_value();
  if (keyed != 0 && keyed != 3) {
    return arrow::Status::Invalid(
        "range descriptor: 'seed', 'epoch' and 'world_size' name one epoch together; ",
        d.seed ? "" : "'seed' ", d.epoch ? "" : "'epoch' ", d.world_size ? "" : "'world_size' ",
        "missing");
  }
  if (keyed != 0 && !d.lengths) {
    return arrow::Status::Invalid(
        "range descriptor: 'seed', 'epoch' and 'world_size' bind the epoch a lengths request "
        "plans; they need 'lengths'");
  }
  return d;
}
MessageSpec RangeDescriptor::Spec() {
  return SpecOf<RangeDescriptor>("range descriptor", kRangeFields, {kKind});
}

json EpochDescriptor::ToJson() const {
  return WithKind<EpochDescriptor>("epoch", kEpochFields, *this);
}
arrow::Result<EpochDescriptor> EpochDescriptor::FromJson(const json& j) {
  return ReadDescriptor<EpochDescriptor>(j, "epoch descriptor", kEpochFields);
}
MessageSpec EpochDescriptor::Spec() {
  return SpecOf<EpochDescriptor>("epoch descriptor", kEpochFields, {kKind});
}

json RowsDescriptor::ToJson() const { return WithKind<RowsDescriptor>("rows", kRowsFields, *this); }
arrow::Result<RowsDescriptor> RowsDescriptor::FromJson(const json& j) {
  return ReadDescriptor<RowsDescriptor>(j, "rows descriptor", kRowsFields);
}
MessageSpec RowsDescriptor::Spec() {
  return SpecOf<RowsDescriptor>("rows descriptor", kRowsFields, {kKind});
}

arrow::Result<Descriptor> ParseDescriptor(std::string_view cmd) {
  ARROW_ASSIGN_OR_RAISE(json j, ParseJsonObject(cmd, "descriptor"));
  JsonFields in(j, "descriptor");
  ARROW_ASSIGN_OR_RAISE(const json* kind_json, in.Find(kKind));
  std::string kind = "range";
  if (kind_json != nullptr) {
    ARROW_ASSIGN_OR_RAISE(kind, in.String(*kind_json, kKind));
  }
  if (kind == "epoch") return EpochDescriptor::FromJson(j);
  if (kind == "rows") return RowsDescriptor::FromJson(j);
  return RangeDescriptor::FromJson(j);
}

const std::string& DescriptorDataset(const Descriptor& d) {
  return std::visit([](const auto& x) -> const std::string& { return x.dataset; }, d);
}

const std::vector<std::string>& DescriptorColumns(const Descriptor& d) {
  return std::visit([](const auto& x) -> const std::vector<std::string>& { return x.columns; }, d);
}

}  // namespace icefloe
