#include "icefloe/head/head_server.h"

#include <chrono>

#include <arrow/flight/types.h>
#include <arrow/type.h>

#include "icefloe/common/kubeflow.h"
#include "icefloe/common/log.h"
#include "icefloe/common/ticket.h"
#include "icefloe/common/wire_status.h"
#include "icefloe/head/load_job.h"
#include "icefloe/protocol/messages.h"

namespace icefloe {

namespace flight = arrow::flight;
using json = nlohmann::json;

namespace {

std::unique_ptr<flight::ResultStream> JsonResult(const json& j) {
  std::vector<flight::Result> results(1);
  results[0].body = arrow::Buffer::FromString(j.dump());
  return std::make_unique<flight::SimpleResultStream>(std::move(results));
}

uint64_t InitialGeneration() {
  // Unique across head restarts: tickets from before a restart stay stale.
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count());
}

}  // namespace

HeadServer::HeadServer(HeadOptions options)
    : options_(std::move(options)),
      ticket_key_(options_.security.TicketKey()),
      clients_(std::make_shared<NodeClients>(options_.security)),
      registry_(clients_, options_.registry),
      io_(options_.io),
      next_generation_(InitialGeneration()) {
  for (const auto& n : options_.nodes) registry_.AddStatic(n);
}

HeadServer::~HeadServer() { StopBackground(); }

void HeadServer::StartBackground() {
  registry_.PollAll();
  registry_.Start();
}

void HeadServer::StopBackground() {
  {
    std::lock_guard<std::mutex> lock(startup_mu_);
    stopping_ = true;
  }
  registry_.Stop();
  std::vector<std::thread> threads;
  {
    std::lock_guard<std::mutex> lock(jobs_mu_);
    threads.swap(threads_);
  }
  for (auto& t : threads) {
    if (t.joinable()) t.join();
  }
}

arrow::Status HeadServer::RunStartupLoad() {
  if (!options_.startup_load) return arrow::Status::OK();
  const LoadRequest& request = *options_.startup_load;
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::duration<double>(options_.startup_timeout_s);
  // Records progress for /ready; true when the server is shutting down.
  auto set_state = [this](std::string state) {
    std::lock_guard<std::mutex> lock(startup_mu_);
    startup_state_ = std::move(state);
    return stopping_;
  };
  double backoff_s = 0.5;
  arrow::Status last;
  while (true) {
    bool all_nodes = !registry_.Alive().empty();
    for (const auto& n : registry_.Snapshot()) {
      if (n.is_static && n.state != NodeState::kAlive) all_nodes = false;
    }
    if (all_nodes) {
      if (set_state("loading")) return arrow::Status::Cancelled("shutting down");
      auto job = StartLoad(request);
      if (job.ok()) {
        while (!WaitForLoad(**job, std::chrono::milliseconds(500))) {
        }
        auto outcome = LoadOutcome(**job);
        if (outcome.ok()) {
          set_state("ready");
          LogInfo("start-up dataset loaded", {{"dataset", request.name}});
          return arrow::Status::OK();
        }
        last = outcome.status();
      } else {
        last = job.status();
      }
      LogWarn("start-up load failed", {{"dataset", request.name}, {"error", last.ToString()}});
      // Errors in the table or the request will not heal by retrying.
      if (last.IsInvalid() || last.IsKeyError() || last.IsNotImplemented() ||
          last.IsOutOfMemory()) {
        set_state("failed: " + last.ToString());
        return last;
      }
      if (set_state("retrying after: " + last.ToString())) {
        return arrow::Status::Cancelled("shutting down");
      }
    } else {
      last = arrow::Status::IOError("waiting for every data node to answer");
      if (set_state(last.message())) return arrow::Status::Cancelled("shutting down");
    }
    if (std::chrono::steady_clock::now() > deadline) {
      set_state("failed: " + last.ToString());
      return last.WithMessage("start-up load of '", request.name, "' did not succeed within ",
                              options_.startup_timeout_s, "s: ", last.message());
    }
    std::this_thread::sleep_for(std::chrono::duration<double>(backoff_s));
    backoff_s = std::min(backoff_s * 2, 10.0);
  }
}

std::pair<bool, std::string> HeadServer::Ready() const {
  auto nodes = registry_.Snapshot();
  size_t alive = 0;
  for (const auto& n : nodes) {
    if (n.state == NodeState::kAlive) {
      ++alive;
    } else if (n.is_static) {
      return {false, "waiting for node " + n.location};
    }
  }
  if (alive == 0) return {false, "no data node registered"};
  if (options_.startup_load) {
    auto entry = catalog_.Find(options_.startup_load->name);
    if (!entry || entry->state != "ready") {
      std::lock_guard<std::mutex> lock(startup_mu_);
      return {false, "loading " + options_.startup_load->name + ": " + startup_state_};
    }
  }
  return {true, "ready"};
}

json HeadServer::ClusterStatus() const {
  json datasets = json::array();
  for (const auto& e : catalog_.All()) datasets.push_back(e->ToJson(false));
  json loads = json::array();
  {
    std::lock_guard<std::mutex> lock(jobs_mu_);
    for (const auto& [name, job] : jobs_) loads.push_back(Progress(*job));
  }
  auto [ready, reason] = Ready();
  return {{"nodes", registry_.ToJson()},
          {"datasets", datasets},
          {"loads", loads},
          {"ready", ready},
          {"reason", reason}};
}

arrow::Result<std::shared_ptr<const DatasetEntry>> HeadServer::Lookup(
    const std::string& name) const {
  auto entry = catalog_.Find(name);
  if (!entry) {
    {
      std::lock_guard<std::mutex> lock(jobs_mu_);
      if (jobs_.count(name)) {
        return arrow::Status::Invalid("dataset '", name, "' is still loading");
      }
    }
    return arrow::Status::KeyError("unknown dataset '", name, "'");
  }
  if (entry->state != "ready") {
    return arrow::Status::Invalid("dataset '", name, "' is ", entry->state,
                                  entry->error.empty() ? "" : ": " + entry->error);
  }
  return entry;
}

arrow::Result<std::shared_ptr<const DatasetEntry>> HeadServer::DatasetOf(
    const flight::FlightDescriptor& d) const {
  if (d.type == flight::FlightDescriptor::PATH) {
    if (d.path.size() != 1) {
      return arrow::Status::NotImplemented("PATH descriptors with ", d.path.size(),
                                           " elements are not served yet");
    }
    return Lookup(d.path[0]);
  }
  ARROW_ASSIGN_OR_RAISE(json j, ParseBody(d.cmd, "descriptor"));
  ARROW_ASSIGN_OR_RAISE(auto command, ParseRangeCommand(j));
  return Lookup(command.dataset);
}

arrow::Result<flight::FlightInfo> HeadServer::RangeInfo(const DatasetEntry& entry,
                                                        const flight::FlightDescriptor& d,
                                                        uint64_t start, uint64_t stop) const {
  std::vector<flight::FlightEndpoint> endpoints;
  for (const auto& s : entry.slices) {
    uint64_t from = std::max(start, s.start), to = std::min(stop, s.stop);
    if (from >= to) continue;
    flight::FlightEndpoint e;
    e.ticket.ticket = EncodeNativeTicket({TicketKind::kRange, entry.storage_name, entry.generation},
                                         EncodeRangeBody({from, to}), ticket_key_);
    for (const auto& n : s.nodes) {
      ARROW_ASSIGN_OR_RAISE(auto loc, flight::Location::Parse(n));
      e.locations.push_back(std::move(loc));
    }
    endpoints.push_back(std::move(e));
  }
  int64_t bytes = entry.num_rows > 0 ? static_cast<int64_t>(static_cast<double>(entry.nbytes) /
                                                            entry.request.replication *
                                                            (stop - start) / entry.num_rows)
                                     : 0;
  return flight::FlightInfo::Make(*entry.schema, d, endpoints, static_cast<int64_t>(stop - start),
                                  bytes, /*ordered=*/true);
}

arrow::Status HeadServer::ListFlights(const flight::ServerCallContext&, const flight::Criteria*,
                                      std::unique_ptr<flight::FlightListing>* listings) {
  std::vector<flight::FlightInfo> infos;
  for (const auto& e : catalog_.All()) {
    if (e->state != "ready") continue;
    ARROW_ASSIGN_OR_RAISE(auto info, RangeInfo(*e, flight::FlightDescriptor::Path({e->name}), 0,
                                               static_cast<uint64_t>(e->num_rows)));
    infos.push_back(std::move(info));
  }
  *listings = std::make_unique<flight::SimpleFlightListing>(std::move(infos));
  return arrow::Status::OK();
}

arrow::Status HeadServer::GetFlightInfo(const flight::ServerCallContext&,
                                        const flight::FlightDescriptor& request,
                                        std::unique_ptr<flight::FlightInfo>* info) {
  auto out = Info(request);
  if (!out.ok()) return ToWireStatus(out.status());
  *info = std::make_unique<flight::FlightInfo>(std::move(*out));
  return arrow::Status::OK();
}

arrow::Result<flight::FlightInfo> HeadServer::KubeflowInfo(
    const flight::FlightDescriptor& request) const {
  if (options_.default_dataset.empty()) {
    return arrow::Status::Invalid(
        "this head has no default dataset for PATH [index, total] "
        "descriptors (start it with --default-dataset)");
  }
  ARROW_ASSIGN_OR_RAISE(auto entry, Lookup(options_.default_dataset));
  ARROW_ASSIGN_OR_RAISE(KubeflowShard shard,
                        KubeflowShardOf(request.path, static_cast<uint64_t>(entry->num_rows)));
  // One endpoint per node holding rows of the shard, each with the whole
  // shard's ticket: nodes return only the rows they hold.
  const std::string ticket = EncodeKubeflowTicket({shard.first, shard.last});
  std::vector<std::string> nodes;
  for (const auto& s : entry->slices) {
    if (s.stop <= shard.first || s.start > shard.last) continue;
    if (std::find(nodes.begin(), nodes.end(), s.nodes[0]) == nodes.end()) {
      nodes.push_back(s.nodes[0]);
    }
  }
  std::vector<flight::FlightEndpoint> endpoints;
  for (const auto& n : nodes) {
    flight::FlightEndpoint e;
    e.ticket.ticket = ticket;
    e.app_metadata = ticket;
    ARROW_ASSIGN_OR_RAISE(auto loc, flight::Location::Parse(n));
    e.locations.push_back(std::move(loc));
    endpoints.push_back(std::move(e));
  }
  return flight::FlightInfo::Make(*entry->schema, request, endpoints, -1, -1);
}

arrow::Result<flight::FlightInfo> HeadServer::Info(const flight::FlightDescriptor& request) const {
  if (request.type == flight::FlightDescriptor::PATH &&
      (request.path.size() != 1 || !catalog_.Find(request.path[0]))) {
    return KubeflowInfo(request);
  }
  uint64_t start = 0;
  std::optional<uint64_t> stop;
  if (request.type == flight::FlightDescriptor::CMD) {
    ARROW_ASSIGN_OR_RAISE(json j, ParseBody(request.cmd, "descriptor"));
    std::string kind = j.value("kind", "range");
    if (kind == "epoch") return EpochInfo(j, request);
    if (kind == "rows") return RowsInfo(j, request);
    if (kind != "range") {
      return arrow::Status::Invalid("unknown descriptor kind '", kind,
                                    "' (expected range, epoch or rows)");
    }
    ARROW_ASSIGN_OR_RAISE(auto command, ParseRangeCommand(j));
    start = command.start;
    stop = command.stop;
  }
  ARROW_ASSIGN_OR_RAISE(auto entry, DatasetOf(request));
  uint64_t rows = static_cast<uint64_t>(entry->num_rows);
  uint64_t end = stop.value_or(rows);
  if (start > rows || end > rows) {
    return arrow::Status::IndexError("range [", start, ", ", end, ") is outside dataset '",
                                     entry->name, "' of ", rows, " rows");
  }
  return RangeInfo(*entry, request, start, end);
}

arrow::Status HeadServer::GetSchema(const flight::ServerCallContext&,
                                    const flight::FlightDescriptor& request,
                                    std::unique_ptr<flight::SchemaResult>* schema) {
  auto entry = DatasetOf(request);
  if (!entry.ok()) return ToWireStatus(entry.status());
  ARROW_ASSIGN_OR_RAISE(auto result, flight::SchemaResult::Make(*(*entry)->schema));
  *schema = std::move(result);
  return arrow::Status::OK();
}

arrow::Status HeadServer::ListActions(const flight::ServerCallContext&,
                                      std::vector<flight::ActionType>* actions) {
  *actions = {{"load",
               "Load a dataset: {name, source, snapshot_id?, ref?, as_of_ms?, columns?, "
               "filter?, batch_rows?, replication?}; streams progress, then the description."},
              {"list", "Every dataset (JSON array of descriptions)."},
              {"describe", "One dataset with its slice map: {name}."},
              {"evict", "Drop a dataset from the nodes: {name}."},
              {"status", "Nodes, datasets and loads in progress."},
              {"node.register", "Data nodes only: announce a node and its status."}};
  return arrow::Status::OK();
}

namespace {

// Streams a load's progress until it finishes, then its description. The
// load itself runs on, whatever the client does.
class LoadProgressStream : public flight::ResultStream {
 public:
  LoadProgressStream(const HeadServer* head, std::shared_ptr<LoadJob> job,
                     std::function<bool(LoadJob&, std::chrono::milliseconds)> wait,
                     std::function<arrow::Result<json>(LoadJob&)> outcome)
      : head_(head), job_(std::move(job)), wait_(std::move(wait)), outcome_(std::move(outcome)) {}

  arrow::Result<std::unique_ptr<flight::Result>> Next() override {
    if (done_) return nullptr;
    bool finished = first_ ? wait_(*job_, std::chrono::milliseconds(0))
                           : wait_(*job_, std::chrono::milliseconds(500));
    first_ = false;
    json body;
    if (finished) {
      done_ = true;
      auto outcome = outcome_(*job_);
      if (!outcome.ok()) return ToWireStatus(outcome.status());
      body = std::move(*outcome);
    } else {
      body = head_->Progress(*job_);
    }
    auto r = std::make_unique<flight::Result>();
    r->body = arrow::Buffer::FromString(body.dump());
    return r;
  }

 private:
  const HeadServer* head_;
  std::shared_ptr<LoadJob> job_;
  std::function<bool(LoadJob&, std::chrono::milliseconds)> wait_;
  std::function<arrow::Result<json>(LoadJob&)> outcome_;
  bool first_ = true;
  bool done_ = false;
};

}  // namespace

arrow::Status HeadServer::DoAction(const flight::ServerCallContext& context,
                                   const flight::Action& action,
                                   std::unique_ptr<flight::ResultStream>* result) {
  return ToWireStatus(RunAction(context, action, result));
}

arrow::Status HeadServer::RunAction(const flight::ServerCallContext& context,
                                    const flight::Action& action,
                                    std::unique_ptr<flight::ResultStream>* result) {
  const std::string body = action.body ? action.body->ToString() : std::string();
  const std::string& type = action.type;
  if (type == "load") {
    ARROW_ASSIGN_OR_RAISE(json j, ParseBody(body, "load"));
    ARROW_ASSIGN_OR_RAISE(LoadRequest request, LoadRequest::FromJson(j));
    ARROW_ASSIGN_OR_RAISE(auto job, StartLoad(request));
    *result = std::make_unique<LoadProgressStream>(this, std::move(job), WaitForLoad, LoadOutcome);
    return arrow::Status::OK();
  }
  if (type == "list") {
    json out = json::array();
    for (const auto& e : catalog_.All()) out.push_back(e->ToJson(false));
    *result = JsonResult(out);
    return arrow::Status::OK();
  }
  if (type == "describe" || type == "evict") {
    ARROW_ASSIGN_OR_RAISE(json j, ParseBody(body, type));
    std::string name = j.value("name", "");
    if (type == "evict") {
      ARROW_ASSIGN_OR_RAISE(json out, Evict(name));
      *result = JsonResult(out);
      return arrow::Status::OK();
    }
    auto entry = catalog_.Find(name);
    if (!entry) return arrow::Status::KeyError("unknown dataset '", name, "'");
    *result = JsonResult(entry->ToJson(true));
    return arrow::Status::OK();
  }
  if (type == "status") {
    *result = JsonResult(ClusterStatus());
    return arrow::Status::OK();
  }
  if (type == "node.register") {
    ARROW_RETURN_NOT_OK(VerifyActionSignature(ticket_key_, context, type, body));
    ARROW_ASSIGN_OR_RAISE(json j, ParseBody(body, type));
    std::string location = j.value("location", "");
    if (location.empty()) return arrow::Status::Invalid("node.register: missing 'location'");
    registry_.Heartbeat(location, j.value("status", json::object()));
    *result = JsonResult({{"ok", true}});
    return arrow::Status::OK();
  }
  return arrow::Status::NotImplemented("unknown action '", type, "'");
}

}  // namespace icefloe
