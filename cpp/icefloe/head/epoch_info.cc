// GetFlightInfo for epoch and row descriptors: plan coordinates in, one
// endpoint per replica set out (docs/protocol.md).
#include <map>

#include <arrow/flight/types.h>

#include "icefloe/common/ticket.h"
#include "icefloe/head/head_server.h"
#include "icefloe/plan/plan.h"
#include "icefloe/plan/plan_ticket.h"
#include "icefloe/protocol/messages.h"

namespace icefloe {

namespace flight = arrow::flight;
using json = nlohmann::json;

namespace {

// Slices grouped by the nodes holding them: one endpoint per group, whose
// ticket names the group's ranges, so replicas are interchangeable.
std::map<std::vector<std::string>, std::vector<RowRange>> ByReplicaSet(const DatasetEntry& entry) {
  std::map<std::vector<std::string>, std::vector<RowRange>> groups;
  for (const auto& s : entry.slices) groups[s.nodes].push_back({s.start, s.stop});
  return groups;
}

template <typename T>
arrow::Result<T> Field(const json& j, const char* key, T fallback) {
  if (!j.contains(key) || j[key].is_null()) return fallback;
  try {
    return j[key].get<T>();
  } catch (const json::exception&) {
    return arrow::Status::Invalid("epoch descriptor: '", key, "' has the wrong type");
  }
}

arrow::Result<flight::FlightEndpoint> Endpoint(const std::vector<std::string>& nodes,
                                               std::string ticket) {
  flight::FlightEndpoint e;
  e.ticket.ticket = std::move(ticket);
  for (const auto& n : nodes) {
    ARROW_ASSIGN_OR_RAISE(auto loc, flight::Location::Parse(n));
    e.locations.push_back(std::move(loc));
  }
  return e;
}

}  // namespace

arrow::Result<flight::FlightInfo> HeadServer::EpochInfo(
    const json& j, const flight::FlightDescriptor& request) const {
  ARROW_ASSIGN_OR_RAISE(auto entry, Lookup(j.value("dataset", "")));
  PlanParams p;
  p.order.num_rows = static_cast<uint64_t>(entry->num_rows);
  ARROW_ASSIGN_OR_RAISE(p.order.seed, Field<uint64_t>(j, "seed", 0));
  ARROW_ASSIGN_OR_RAISE(p.order.epoch, Field<uint64_t>(j, "epoch", 0));
  ARROW_ASSIGN_OR_RAISE(uint32_t version, Field<uint32_t>(j, "order_version", kEpochOrderVersion));
  if (version != kEpochOrderVersion) {
    return arrow::Status::Invalid("epoch order version ", version, " is not this head's ",
                                  kEpochOrderVersion, " (the state was saved by another release)");
  }
  ARROW_ASSIGN_OR_RAISE(std::string mode, Field<std::string>(j, "shuffle", "window"));
  ARROW_ASSIGN_OR_RAISE(p.order.mode, ParseShuffleMode(mode));
  // 0: the mode's default (plan.h), which never depends on how the dataset was loaded.
  ARROW_ASSIGN_OR_RAISE(p.order.block_rows, Field<uint64_t>(j, "block_rows", 0));
  ARROW_ASSIGN_OR_RAISE(p.order.window_blocks, Field<uint64_t>(j, "window_blocks", 0));
  ARROW_ASSIGN_OR_RAISE(p.order.shuffle_within_block,
                        Field<bool>(j, "shuffle_within_block", false));
  ResolveDefaults(&p.order);
  ARROW_ASSIGN_OR_RAISE(p.world_size, Field<uint32_t>(j, "world_size", 1));
  ARROW_ASSIGN_OR_RAISE(p.rank, Field<uint32_t>(j, "rank", 0));
  ARROW_ASSIGN_OR_RAISE(p.num_workers, Field<uint32_t>(j, "num_workers", 0));
  ARROW_ASSIGN_OR_RAISE(p.worker, Field<uint32_t>(j, "worker", 0));
  ARROW_ASSIGN_OR_RAISE(p.batch_size, Field<uint64_t>(j, "batch_size", 0));
  ARROW_ASSIGN_OR_RAISE(p.drop_last, Field<bool>(j, "drop_last", true));
  ARROW_ASSIGN_OR_RAISE(p.start, Field<uint64_t>(j, "start", 0));
  if (p.batch_size > (uint64_t{1} << 24)) {
    return arrow::Status::Invalid("batch_size ", p.batch_size, " is larger than 16777216");
  }
  // Resuming from a saved (start, world_size, batch_size, steps): the plan
  // (never the client) turns it into the position to start from.
  if (j.contains("resume_steps")) {
    PlanParams saved = p;
    saved.rank = 0;
    saved.num_workers = 0;
    saved.worker = 0;
    ARROW_ASSIGN_OR_RAISE(saved.world_size, Field<uint32_t>(j, "resume_world_size", 0));
    ARROW_ASSIGN_OR_RAISE(saved.batch_size, Field<uint64_t>(j, "resume_batch_size", 0));
    ARROW_ASSIGN_OR_RAISE(uint64_t steps, Field<uint64_t>(j, "resume_steps", 0));
    auto position = ResumePosition(saved, steps);
    if (!position.ok()) {
      return arrow::Status::Invalid("resume state: ", position.status().message());
    }
    p.start = *position;
  }
  ARROW_RETURN_NOT_OK(ValidatePlan(p));
  ARROW_ASSIGN_OR_RAISE(EpochShape shape, Shape(p));
  // Resuming a worker mid-epoch with the same plan: skip its first batches.
  ARROW_ASSIGN_OR_RAISE(uint64_t first_batch, Field<uint64_t>(j, "first_batch", 0));
  if (first_batch > shape.worker_batches) {
    return arrow::Status::Invalid("first_batch ", first_batch, " is past this worker's ",
                                  shape.worker_batches, " batches");
  }

  std::vector<flight::FlightEndpoint> endpoints;
  for (auto& [nodes, owned] : ByReplicaSet(*entry)) {
    PlanTicket t{p, first_batch, shape.worker_batches, owned};
    ARROW_ASSIGN_OR_RAISE(
        auto e, Endpoint(nodes, EncodeNativeTicket(
                                    {TicketKind::kPlan, entry->storage_name, entry->generation},
                                    EncodePlanBody(t), ticket_key_)));
    endpoints.push_back(std::move(e));
  }
  // app_metadata tells the consumer how many batches to expect.
  json meta = {{"num_rows", entry->num_rows},
               {"order_version", kEpochOrderVersion},
               {"shuffle", ShuffleModeName(p.order.mode)},
               {"steps", shape.steps},
               {"worker_batches", shape.worker_batches},
               {"worker_rows", shape.worker_rows},
               {"batch_size", p.batch_size},
               {"last_batch_rows", shape.last_batch_rows},
               {"dropped_rows", shape.dropped_rows},
               {"padded_rows", shape.padded_rows},
               {"start", p.start},
               {"first_batch", first_batch},
               {"block_rows", p.order.block_rows},
               {"window_blocks", p.order.window_blocks}};
  return flight::FlightInfo::Make(*entry->schema, request, endpoints,
                                  static_cast<int64_t>(shape.worker_rows), -1,
                                  /*ordered=*/false, meta.dump());
}

arrow::Result<flight::FlightInfo> HeadServer::RowsInfo(
    const json& j, const flight::FlightDescriptor& request) const {
  ARROW_ASSIGN_OR_RAISE(auto entry, Lookup(j.value("dataset", "")));
  if (!j.contains("rows") || !j["rows"].is_array()) {
    return arrow::Status::Invalid("rows descriptor: missing 'rows' (a list of row ids)");
  }
  const auto& ids = j["rows"];
  if (ids.size() > (size_t{1} << 24)) {
    return arrow::Status::Invalid("rows descriptor: at most 16777216 rows per request");
  }
  const uint64_t n = static_cast<uint64_t>(entry->num_rows);
  auto groups = ByReplicaSet(*entry);
  // Which group holds a row: slices are sorted, so search them.
  std::vector<std::pair<RowRange, const std::vector<std::string>*>> slices;
  for (const auto& [nodes, owned] : groups) {
    for (const auto& r : owned) slices.push_back({r, &nodes});
  }
  std::sort(slices.begin(), slices.end(),
            [](const auto& a, const auto& b) { return a.first.start < b.first.start; });
  std::map<const std::vector<std::string>*, RowsTicket> tickets;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (!ids[i].is_number_unsigned()) {
      return arrow::Status::Invalid("rows descriptor: row ", i, " is not a non-negative integer");
    }
    uint64_t row = ids[i].get<uint64_t>();
    if (row >= n) {
      return arrow::Status::Invalid("row ", row, " is outside dataset '", entry->name, "' of ", n,
                                    " rows");
    }
    auto it = std::upper_bound(slices.begin(), slices.end(), row,
                               [](uint64_t v, const auto& s) { return v < s.first.stop; });
    auto& t = tickets[it->second];
    t.total = static_cast<uint32_t>(ids.size());
    t.positions.push_back(static_cast<uint32_t>(i));
    t.rows.push_back(row);
  }
  std::vector<flight::FlightEndpoint> endpoints;
  for (auto& [nodes, t] : tickets) {
    ARROW_ASSIGN_OR_RAISE(
        auto e, Endpoint(*nodes, EncodeNativeTicket(
                                     {TicketKind::kRows, entry->storage_name, entry->generation},
                                     EncodeRowsBody(t), ticket_key_)));
    endpoints.push_back(std::move(e));
  }
  return flight::FlightInfo::Make(*entry->schema, request, endpoints,
                                  static_cast<int64_t>(ids.size()), -1, /*ordered=*/false);
}

}  // namespace icefloe
