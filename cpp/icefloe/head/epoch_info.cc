// GetFlightInfo for epoch and row descriptors: plan coordinates in, one
// endpoint per replica set out (docs/protocol.md).
#include <map>

#include <arrow/flight/types.h>

#include "icefloe/head/head_server.h"
#include "icefloe/head/projection.h"
#include "icefloe/plan/plan.h"
#include "icefloe/protocol/messages.h"
#include "icefloe/protocol/plan_ticket.h"
#include "icefloe/protocol/replies.h"
#include "icefloe/protocol/row_groups.h"
#include "icefloe/protocol/ticket.h"

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
    const EpochDescriptor& d, const flight::FlightDescriptor& request) const {
  // Every consumer of one epoch of a job reads one generation, whenever it
  // asks; a consumer failing over or resuming names it.
  std::optional<uint64_t> generation = d.generation;
  if (!generation) {
    if (auto current = catalog_.Find(d.dataset)) {
      generation =
          epochs_.Bind(EpochBindings::Key(d.dataset, d.seed, d.epoch, d.world_size),
                       current->generation, [this, &d](uint64_t g) {
                         return catalog_.FindGeneration(
                                    d.dataset, g, std::chrono::steady_clock::now()) != nullptr;
                       });
    }
  }
  ARROW_ASSIGN_OR_RAISE(auto entry, Lookup(d.dataset, generation));
  ARROW_ASSIGN_OR_RAISE(Projection projection,
                        Project(entry->schema, d.columns, "epoch descriptor"));
  // Field types and ranges were checked when the descriptor was parsed
  // (protocol/descriptors.cc); ValidatePlan checks how they fit together.
  PlanParams p;
  p.order.num_rows = static_cast<uint64_t>(entry->num_rows);
  p.order.seed = d.seed;
  p.order.epoch = d.epoch;
  if (d.order_version != 0 && d.order_version != kEpochOrderVersion) {
    return arrow::Status::Invalid("epoch descriptor: 'order_version': order version ",
                                  d.order_version, " is not this head's ", kEpochOrderVersion,
                                  " (the state was saved by another release)");
  }
  ARROW_ASSIGN_OR_RAISE(p.order.mode, ParseShuffleMode(d.shuffle));
  // 0: the mode's default (plan.h), which never depends on how the dataset was loaded.
  p.order.block_rows = d.block_rows.value_or(0);
  p.order.window_blocks = d.window_blocks.value_or(0);
  p.order.shuffle_within_block = d.shuffle_within_block;
  ResolveDefaults(&p.order);
  p.world_size = d.world_size;
  p.rank = d.rank;
  p.num_workers = d.num_workers;
  p.worker = d.worker;
  p.batch_size = d.batch_size;
  p.drop_last = d.drop_last;
  p.start = d.start;
  // Resuming from a saved (start, world_size, batch_size, steps): the plan
  // (never the client) turns it into the position to start from.
  if (d.resume_steps) {
    PlanParams saved = p;
    saved.rank = 0;
    saved.num_workers = 0;
    saved.worker = 0;
    if (!d.resume_world_size || !d.resume_batch_size) {
      return arrow::Status::Invalid(
          "epoch descriptor: 'resume_steps' needs 'resume_world_size' and 'resume_batch_size'");
    }
    // Within uint32 by the field's range (protocol/descriptors.cc).
    saved.world_size = static_cast<uint32_t>(*d.resume_world_size);
    saved.batch_size = *d.resume_batch_size;
    auto position = ResumePosition(saved, *d.resume_steps);
    if (!position.ok()) {
      return arrow::Status::Invalid("epoch descriptor: resume state: ",
                                    position.status().message());
    }
    p.start = *position;
  }
  auto valid = ValidatePlan(p);
  if (!valid.ok()) return valid.WithMessage("epoch descriptor: ", valid.message());
  ARROW_ASSIGN_OR_RAISE(EpochShape shape, Shape(p));
  // Resuming a worker mid-epoch with the same plan: skip its first batches.
  const uint64_t first_batch = d.first_batch;
  if (first_batch > shape.worker_batches) {
    return arrow::Status::Invalid("epoch descriptor: 'first_batch' ", first_batch,
                                  " is past this worker's ", shape.worker_batches, " batches");
  }

  std::vector<flight::FlightEndpoint> endpoints;
  for (auto& [nodes, owned] : ByReplicaSet(*entry)) {
    PlanTicket t{p, first_batch, shape.worker_batches, owned};
    ARROW_ASSIGN_OR_RAISE(
        auto e, Endpoint(nodes, EncodeNativeTicket({TicketKind::kPlan, entry->storage_name,
                                                    entry->generation, projection.columns},
                                                   EncodePlanBody(t), ticket_key_)));
    endpoints.push_back(std::move(e));
  }
  // app_metadata tells the consumer how many batches to expect.
  // A reader that fails over checks that it resumes the same generation.
  const EpochShapeReply meta{entry->num_rows,
                             kEpochOrderVersion,
                             std::string(ShuffleModeName(p.order.mode)),
                             shape.steps,
                             shape.worker_batches,
                             shape.worker_rows,
                             p.batch_size,
                             shape.last_batch_size,
                             shape.dropped_rows,
                             shape.padded_rows,
                             p.start,
                             first_batch,
                             entry->generation,
                             p.order.block_rows,
                             p.order.window_blocks};
  return flight::FlightInfo::Make(*projection.schema, request, endpoints,
                                  static_cast<int64_t>(shape.worker_rows), -1,
                                  /*ordered=*/false, Dump(meta.ToJson()));
}

arrow::Result<flight::FlightInfo> HeadServer::RowsInfo(
    const RowsDescriptor& d, const flight::FlightDescriptor& request) const {
  ARROW_ASSIGN_OR_RAISE(auto entry, Lookup(d.dataset));
  ARROW_ASSIGN_OR_RAISE(Projection projection,
                        Project(entry->schema, d.columns, "rows descriptor"));
  const auto& ids = d.rows;  // at most 2^24, each an integer in range (protocol/descriptors.cc)
  const uint64_t n = static_cast<uint64_t>(entry->num_rows);
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] >= n) {
      return arrow::Status::Invalid("rows descriptor: 'rows'[", i, "] = ", ids[i],
                                    " is outside dataset '", entry->name, "' of ", n, " rows");
    }
  }
  // The slice table the client's one-hop take groups by too (row_groups.h).
  std::vector<std::vector<std::string>> sets;
  std::vector<std::pair<RowRange, uint32_t>> slices;
  for (const auto& [nodes, owned] : ByReplicaSet(*entry)) {
    for (const auto& r : owned) slices.push_back({r, static_cast<uint32_t>(sets.size())});
    sets.push_back(nodes);
  }
  std::sort(slices.begin(), slices.end(),
            [](const auto& a, const auto& b) { return a.first.start < b.first.start; });
  std::vector<uint64_t> stops;
  std::vector<uint32_t> group_of_slice;
  uint64_t covered = 0;
  for (const auto& [range, set] : slices) {
    if (range.start != covered) {
      return arrow::Status::UnknownError("dataset '", entry->name, "': its slices do not tile [0, ",
                                         n, ") (a gap at row ", covered, ")");
    }
    stops.push_back(range.stop);
    group_of_slice.push_back(set);
    covered = range.stop;
  }
  const auto count = static_cast<uint32_t>(ids.size());
  std::vector<uint8_t> bodies(RowGroupsBytes(static_cast<uint32_t>(sets.size()), count));
  std::vector<uint32_t> scratch(count);
  std::vector<uint64_t> offsets(sets.size()), lengths(sets.size());
  const RowGroupsError grouped = GroupRows(
      {stops.data(), group_of_slice.data(), stops.size(), static_cast<uint32_t>(sets.size())},
      ids.data(), count, scratch.data(), bodies.data(), offsets.data(), lengths.data());
  if (grouped != RowGroupsError::kOk) {
    return arrow::Status::UnknownError("dataset '", entry->name,
                                       "': its slices do not hold every "
                                       "row asked for (",
                                       static_cast<int32_t>(grouped), ")");
  }
  std::vector<flight::FlightEndpoint> endpoints;
  for (size_t g = 0; g < sets.size(); ++g) {
    if (lengths[g] == 0) continue;
    const std::string body(reinterpret_cast<const char*>(bodies.data() + offsets[g]), lengths[g]);
    ARROW_ASSIGN_OR_RAISE(
        auto e, Endpoint(sets[g], EncodeNativeTicket({TicketKind::kRows, entry->storage_name,
                                                      entry->generation, projection.columns},
                                                     body, ticket_key_)));
    endpoints.push_back(std::move(e));
  }
  return flight::FlightInfo::Make(*projection.schema, request, endpoints,
                                  static_cast<int64_t>(ids.size()), -1, /*ordered=*/false);
}

}  // namespace icefloe
