#include "icefloe/head/core/flight_info_planner.h"

#include <algorithm>
#include <chrono>
#include <map>

#include <arrow/type.h>
#include <arrow/util/base64.h>

#include "icefloe/common/kubeflow.h"
#include "icefloe/head/core/projection.h"
#include "icefloe/plan/plan.h"
#include "icefloe/protocol/plan_ticket.h"
#include "icefloe/protocol/row_groups.h"
#include "icefloe/protocol/ticket.h"

namespace icefloe {

namespace {

// Slices grouped by the nodes holding them: one endpoint per group, whose
// ticket names the group's ranges, so replicas are interchangeable.
std::map<std::vector<std::string>, std::vector<RowRange>> ByReplicaSet(const DatasetEntry& entry) {
  std::map<std::vector<std::string>, std::vector<RowRange>> groups;
  for (const auto& s : entry.slices) groups[s.nodes].push_back({s.start, s.stop});
  return groups;
}

}  // namespace

FlightInfoPlanner::FlightInfoPlanner(const Catalog* catalog, const NodeRegistry* registry,
                                     LoadingFn loading, std::string ticket_key,
                                     std::string default_dataset)
    : catalog_(catalog),
      registry_(registry),
      loading_(std::move(loading)),
      ticket_key_(std::move(ticket_key)),
      default_dataset_(std::move(default_dataset)) {}

arrow::Result<std::shared_ptr<const DatasetEntry>> FlightInfoPlanner::Lookup(
    const std::string& name, std::optional<uint64_t> generation) const {
  auto entry = catalog_->Find(name);
  if (!entry) {
    if (loading_(name)) {
      return arrow::Status::Invalid("dataset '", name, "' is still loading");
    }
    return arrow::Status::KeyError("unknown dataset '", name, "'");
  }
  if (generation && *generation != entry->generation) {
    auto kept = catalog_->FindGeneration(name, *generation, std::chrono::steady_clock::now());
    if (!kept) {
      return arrow::Status::Invalid(
          "dataset '", name, "' generation ", *generation,
          " is no longer cached: it was replaced by generation ", entry->generation,
          " and freed (a replaced copy is kept while it has readers, up to --retain-s); "
          "start the epoch again on generation ",
          entry->generation);
    }
    entry = std::move(kept);
  }
  // A degraded or healing copy stays readable where its rows are present.
  if (!Loaded(entry->state)) {
    return arrow::Status::Invalid("dataset '", name, "' is ", entry->state,
                                  entry->error.empty() ? "" : ": " + entry->error);
  }
  // Live replicas first: readers try a slice's nodes in order.
  const auto alive = registry_->AliveLocations();
  auto is_alive = [&alive](const std::string& n) { return alive.count(n) > 0; };
  if (std::all_of(entry->nodes.begin(), entry->nodes.end(), is_alive)) return entry;
  auto reordered = std::make_shared<DatasetEntry>(*entry);
  for (auto& slice : reordered->slices) {
    std::stable_partition(slice.nodes.begin(), slice.nodes.end(), is_alive);
  }
  return std::shared_ptr<const DatasetEntry>(std::move(reordered));
}

bool FlightInfoPlanner::NamesDataset(const std::vector<std::string>& path) const {
  return path.size() == 1 && catalog_->Find(path[0]) != nullptr;
}

arrow::Result<PlannedInfo> FlightInfoPlanner::Whole(const std::string& name) const {
  ARROW_ASSIGN_OR_RAISE(auto entry, Lookup(name));
  return RangeOf(*entry, 0, static_cast<uint64_t>(entry->num_rows));
}

std::optional<uint64_t> FlightInfoPlanner::BoundGeneration(const std::string& dataset,
                                                           uint64_t seed, uint64_t epoch,
                                                           uint32_t world_size) const {
  auto current = catalog_->Find(dataset);
  if (!current) return std::nullopt;
  return epochs_.Bind(EpochBindings::Key(dataset, seed, epoch, world_size), current->generation,
                      [this, &dataset](uint64_t g) {
                        return catalog_->FindGeneration(
                                   dataset, g, std::chrono::steady_clock::now()) != nullptr;
                      });
}

arrow::Result<PlannedInfo> FlightInfoPlanner::Range(const RangeDescriptor& range) const {
  // A token-budget epoch's lengths request names its epoch: every rank
  // plans it from the copy its first request bound (as Epoch binds).
  std::optional<uint64_t> generation = range.generation;
  if (!generation && range.lengths && range.seed && range.epoch && range.world_size) {
    // world_size is within uint32 by the field's range (protocol/descriptors.cc).
    generation = BoundGeneration(range.dataset, *range.seed, *range.epoch,
                                 static_cast<uint32_t>(*range.world_size));
  }
  ARROW_ASSIGN_OR_RAISE(auto entry, Lookup(range.dataset, generation));
  const uint64_t n = static_cast<uint64_t>(entry->num_rows);
  const uint64_t stop = range.stop.value_or(n);
  if (range.start > n || stop > n) {
    return arrow::Status::IndexError("range [", range.start, ", ", stop, ") is outside dataset '",
                                     entry->name, "' of ", n, " rows");
  }
  if (range.lengths) {
    // Lengths tickets: one list<int32> column, answered as its row lengths.
    const auto& schema = *entry->schema;
    const int index = schema.GetFieldIndex(*range.lengths);
    if (index < 0) {
      return arrow::Status::KeyError("range descriptor 'lengths': no column '", *range.lengths,
                                     "' in dataset '", entry->name, "'");
    }
    const auto& type = schema.field(index)->type();
    if (type->id() != arrow::Type::LIST || type->field(0)->type()->id() != arrow::Type::INT32) {
      return arrow::Status::Invalid("range descriptor 'lengths': column '", *range.lengths,
                                    "' of dataset '", entry->name, "' is ", type->ToString(),
                                    ", not list<int32>");
    }
    return RangeOf(*entry, range.start, stop, {*range.lengths}, /*lengths=*/true);
  }
  return RangeOf(*entry, range.start, stop, range.columns);
}

arrow::Result<std::vector<std::pair<std::string, PlannedInfo>>> FlightInfoPlanner::List() const {
  std::vector<std::pair<std::string, PlannedInfo>> out;
  for (const auto& e : catalog_->All()) {
    if (e->state != CopyState::kReady) continue;
    ARROW_ASSIGN_OR_RAISE(PlannedInfo info, RangeOf(*e, 0, static_cast<uint64_t>(e->num_rows)));
    out.emplace_back(e->name, std::move(info));
  }
  return out;
}

arrow::Result<PlannedInfo> FlightInfoPlanner::RangeOf(const DatasetEntry& entry, uint64_t start,
                                                      uint64_t stop,
                                                      const std::vector<std::string>& columns,
                                                      bool lengths) const {
  ARROW_ASSIGN_OR_RAISE(Projection projection, Project(entry.schema, columns, "range descriptor"));
  PlannedInfo info;
  info.schema = projection.schema;
  // The widest answer: a node sends uint16 where every length of its range fits.
  if (lengths) info.schema = arrow::schema({arrow::field(columns[0], arrow::uint32(), false)});
  for (const auto& s : entry.slices) {
    uint64_t from = std::max(start, s.start), to = std::min(stop, s.stop);
    if (from >= to) continue;
    std::string ticket = EncodeNativeTicket(
        {TicketKind::kRange, entry.storage_name, entry.generation, projection.columns, lengths},
        EncodeRangeBody({from, to}), ticket_key_);
    info.endpoints.push_back({std::move(ticket), s.nodes, {}});
  }
  const double share = entry.num_rows > 0
                           ? static_cast<double>(stop - start) / static_cast<double>(entry.num_rows)
                           : 0.0;
  info.total_records = static_cast<int64_t>(stop - start);
  info.total_bytes =
      static_cast<int64_t>(static_cast<double>(entry.nbytes) / entry.request.replication * share);
  info.ordered = true;
  return info;
}

arrow::Result<PlannedInfo> FlightInfoPlanner::Kubeflow(const std::vector<std::string>& path) const {
  if (default_dataset_.empty()) {
    return arrow::Status::Invalid(
        "this head has no default dataset for PATH [index, total] "
        "descriptors (start it with --default-dataset)");
  }
  ARROW_ASSIGN_OR_RAISE(auto entry, Lookup(default_dataset_));
  ARROW_ASSIGN_OR_RAISE(KubeflowShard shard,
                        KubeflowShardOf(path, static_cast<uint64_t>(entry->num_rows)));
  // One endpoint per slice (adjacent slices with the same replicas merged)
  // whose ticket is that slice's part of the shard, listing every replica,
  // live first. Kubeflow's client reads locations[0] of each endpoint in
  // order and so gets exactly its shard; a reader can also resume a broken
  // stream on another replica from the row it reached (the bounds are global
  // row ids), which one endpoint per node with the whole shard's ticket, as
  // Kubeflow's own cache answers, does not allow.
  struct Part {
    KubeflowTicket rows;
    const std::vector<std::string>* nodes;
  };
  std::vector<Part> parts;
  for (const auto& s : entry->slices) {
    if (s.stop <= shard.first || s.start > shard.last || s.nodes.empty()) continue;
    const uint64_t first = std::max(s.start, shard.first);
    const uint64_t last = std::min(s.stop - 1, shard.last);
    if (!parts.empty() && parts.back().rows.end + 1 == first && *parts.back().nodes == s.nodes) {
      parts.back().rows.end = last;
    } else {
      parts.push_back({{first, last}, &s.nodes});
    }
  }
  PlannedInfo info;
  info.schema = entry->schema;
  for (const auto& part : parts) {
    std::string ticket = EncodeKubeflowTicket(part.rows);
    std::string metadata = ticket;
    info.endpoints.push_back({std::move(ticket), *part.nodes, std::move(metadata)});
  }
  return info;
}

arrow::Result<PlannedInfo> FlightInfoPlanner::Epoch(const EpochDescriptor& d) const {
  // Every consumer of one epoch of a job reads one generation, whenever it
  // asks; a consumer failing over or resuming names it.
  std::optional<uint64_t> generation = d.generation;
  if (!generation) generation = BoundGeneration(d.dataset, d.seed, d.epoch, d.world_size);
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

  PlannedInfo info;
  info.schema = projection.schema;
  for (auto& [nodes, owned] : ByReplicaSet(*entry)) {
    PlanTicket t{p, first_batch, shape.worker_batches, owned};
    std::string ticket = EncodeNativeTicket(
        {TicketKind::kPlan, entry->storage_name, entry->generation, projection.columns},
        EncodePlanBody(t), ticket_key_);
    info.endpoints.push_back({std::move(ticket), nodes, {}});
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
  info.total_records = static_cast<int64_t>(shape.worker_rows);
  info.app_metadata = Dump(meta.ToJson());
  return info;
}

arrow::Result<PlannedInfo> FlightInfoPlanner::Rows(const RowsDescriptor& d) const {
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
  PlannedInfo info;
  info.schema = projection.schema;
  for (size_t g = 0; g < sets.size(); ++g) {
    if (lengths[g] == 0) continue;
    const std::string body(reinterpret_cast<const char*>(bodies.data() + offsets[g]), lengths[g]);
    std::string ticket = EncodeNativeTicket(
        {TicketKind::kRows, entry->storage_name, entry->generation, projection.columns}, body,
        ticket_key_);
    info.endpoints.push_back({std::move(ticket), sets[g], {}});
  }
  info.total_records = static_cast<int64_t>(ids.size());
  return info;
}

arrow::Result<SliceMapReply> FlightInfoPlanner::SliceMap(const std::string& name,
                                                         const std::vector<std::string>& columns,
                                                         std::optional<uint64_t> generation) const {
  // Lookup refuses datasets that cannot be read and lists live replicas first;
  // a replaced copy it finds counts as used (kept for this reader a while more).
  ARROW_ASSIGN_OR_RAISE(auto entry, Lookup(name, generation));
  ARROW_ASSIGN_OR_RAISE(Projection projection, Project(entry->schema, columns, "slice_map"));
  SliceMapReply reply;
  for (const auto& s : entry->slices)
    reply.slices.push_back({s.start, s.stop, s.nodes, std::nullopt});
  // The grant signs the storage name and generation, never rows: any rows of
  // this copy are as readable as with a range ticket the head signs for anyone
  // who asks. A reload makes a new generation, which the grant does not cover.
  // A projection is part of the grant (signed): the nodes send those columns.
  const std::string grant = EncodeReadGrant(
      {TicketKind::kGrantedRows, entry->storage_name, entry->generation, projection.columns},
      ticket_key_);
  reply.name = entry->name;
  reply.storage = entry->storage_name;
  reply.generation = entry->generation;
  reply.state = CopyStateName(entry->state);
  reply.rows = entry->num_rows;
  reply.schema = SchemaToBase64(*projection.schema);
  reply.grant = arrow::util::base64_encode(grant);
  return reply;
}

}  // namespace icefloe
