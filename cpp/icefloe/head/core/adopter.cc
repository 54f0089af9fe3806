#include "icefloe/head/core/adopter.h"

#include <algorithm>

#include <arrow/flight/types.h>

#include "icefloe/common/log.h"
#include "icefloe/head/core/catalog_record.h"

namespace icefloe {

using Clock = std::chrono::steady_clock;

namespace {

Clock::duration Seconds(double s) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}

}  // namespace

CatalogAdopter::CatalogAdopter(AdopterOptions options, NodeRpc* rpc, ThreadPool* calls,
                               NodeRegistry* registry, Catalog* catalog, LoadingFn loading,
                               uint64_t first_generation)
    : options_(options),
      rpc_(rpc),
      calls_(calls),
      registry_(registry),
      catalog_(catalog),
      loading_(std::move(loading)),
      first_generation_(first_generation),
      started_(Clock::now()),
      recovering_(options.recover_s > 0) {}

CatalogAdopter::~CatalogAdopter() { Stop(); }

void CatalogAdopter::Start() {
  loop_.Start("head adopter", [this]() -> std::optional<BackgroundLoop::Duration> {
    RunOnce();
    // While recovering, rounds come faster: serving starts soon after the
    // last node's first report.
    return BackgroundLoop::Duration(recovering() ? std::min(0.1, options_.interval_s)
                                                 : options_.interval_s);
  });
}

void CatalogAdopter::Stop() { loop_.Stop(); }

bool CatalogAdopter::recovering() const {
  MutexLock lock(&mu_);
  return recovering_;
}

arrow::Status CatalogAdopter::CheckServing() const {
  MutexLock lock(&mu_);
  if (!recovering_) return arrow::Status::OK();
  const double left_s =
      options_.recover_s - std::chrono::duration<double>(Clock::now() - started_).count();
  return arrow::flight::MakeFlightError(
      arrow::flight::FlightStatusCode::Unavailable,
      "the head is recovering its catalog from the data nodes (at most " +
          std::to_string(std::max(0.0, left_s)) + " s more); retry shortly");
}

// Recovery ends at recover_s, or once every static node has reported (a
// Kubeflow head knows all its nodes; self-registering nodes are only known
// once they register, so a head without static nodes waits the whole time).
bool CatalogAdopter::RecoveryDone(const std::vector<NodeInfo>& nodes) const {
  if (Clock::now() - started_ >= Seconds(options_.recover_s)) return true;
  bool any_static = false;
  for (const auto& n : nodes) {
    if (!n.is_static) continue;
    any_static = true;
    if (n.state != NodeState::kAlive) return false;
  }
  return any_static;
}

void CatalogAdopter::RunOnce() {
  MutexLock round(&round_mu_);
  const std::vector<NodeInfo> nodes = registry_->Snapshot();
  {
    MutexLock lock(&mu_);
    if (recovering_ && !RecoveryDone(nodes)) return;
  }
  AdoptionInput input;
  for (const auto& n : nodes) {
    if (n.state == NodeState::kAlive) input.reports.push_back({n.location, n.status.datasets});
  }
  input.catalog = catalog_->All();
  for (const auto& r : catalog_->Retired()) {
    input.retained.insert({r.entry->storage_name, r.entry->generation});
  }
  input.first_generation = first_generation_;
  Adopt(input);
  PushRecords(input.reports);
}

void CatalogAdopter::Adopt(const AdoptionInput& base) {
  AdoptionInput input = base;
  bool first;
  {
    MutexLock lock(&mu_);
    // Copies that left the catalog since the last round were released by
    // this head (evicted, replaced): a late report of one is stale.
    std::set<CopyId> now = input.retained;
    for (const auto& e : input.catalog) now.insert({e->storage_name, e->generation});
    for (const auto& id : seen_) {
      if (!now.count(id)) gone_.insert(id);
    }
    seen_ = std::move(now);
    input.gone = gone_;
    first = recovering_;
  }
  AdoptionPlan plan = PlanAdoption(input);
  for (const auto& line : plan.refused) LogWarn("refused a node's report", {{"reason", line}});
  size_t degraded = 0;
  for (auto& e : plan.entries) {
    // A load of the name started (or published) meanwhile: it wins.
    if (loading_(e->name) || catalog_->Find(e->name)) continue;
    if (e->state == CopyState::kDegraded) ++degraded;
    LogInfo("adopted a dataset from the nodes", {{"dataset", e->name},
                                                 {"storage", e->storage_name},
                                                 {"generation", std::to_string(e->generation)},
                                                 {"state", std::string(CopyStateName(e->state))},
                                                 {"nodes", std::to_string(e->nodes.size())}});
    {
      MutexLock lock(&mu_);
      seen_.insert({e->storage_name, e->generation});
    }
    catalog_->Put(std::move(e));
  }
  if (!plan.drops.empty()) {
    NodeRpc* rpc = rpc_;
    const auto drops = plan.drops;
    const double timeout_s = options_.call_timeout_s;
    for (const auto& d : drops) {
      LogInfo("dropping a stale copy on a node", {{"node", d.node},
                                                  {"dataset", d.storage_name},
                                                  {"generation", std::to_string(d.generation)},
                                                  {"reason", d.reason}});
    }
    auto results = FanOut<NodeEvictResult>(
        calls_, drops.size(),
        [rpc, drops, timeout_s](size_t i) {
          return rpc->Evict(drops[i].node, {drops[i].storage_name, drops[i].generation}, timeout_s);
        },
        Clock::now() + Seconds(timeout_s + 1));
    for (size_t i = 0; i < drops.size(); ++i) {
      if (results[i] && results[i]->ok()) continue;
      LogWarn("could not drop a stale copy (retried next round)",
              {{"node", drops[i].node},
               {"dataset", drops[i].storage_name},
               {"error", results[i] ? results[i]->status().ToString() : "no answer"}});
    }
  }
  if (first) {
    MutexLock lock(&mu_);
    recovering_ = false;
    LogInfo("catalog recovered from the nodes", {{"datasets", std::to_string(plan.entries.size())},
                                                 {"degraded", std::to_string(degraded)},
                                                 {"dropped", std::to_string(plan.drops.size())},
                                                 {"nodes", std::to_string(input.reports.size())}});
  }
}

void CatalogAdopter::PushRecords(const std::vector<NodeReport>& reports) {
  auto pushes = std::make_shared<std::vector<RecordPush>>(
      PlanRecordPushes(reports, catalog_->All(), NowMicros()));
  if (pushes->empty()) return;
  NodeRpc* rpc = rpc_;
  const double timeout_s = options_.call_timeout_s;
  auto results = FanOut<bool>(
      calls_, pushes->size(),
      [rpc, pushes, timeout_s](size_t i) -> arrow::Result<bool> {
        const RecordPush& p = (*pushes)[i];
        ARROW_RETURN_NOT_OK(rpc->Record(p.node, p.request, timeout_s));
        return true;
      },
      Clock::now() + Seconds(timeout_s + 1));
  for (size_t i = 0; i < pushes->size(); ++i) {
    if (results[i] && results[i]->ok()) continue;
    // Next round tries again (e.g. the node replaced the copy meanwhile).
    Log(LogLevel::kDebug, "node.record failed",
        {{"node", (*pushes)[i].node},
         {"dataset", (*pushes)[i].request.dataset},
         {"error", results[i] ? results[i]->status().ToString() : std::string("no answer")}});
  }
}

}  // namespace icefloe
