#include "icefloe/node/copy/load_manager.h"

#include <algorithm>

#include "icefloe/common/bytes.h"
#include "icefloe/common/log.h"

namespace icefloe {

namespace {

using Clock = std::chrono::steady_clock;

Clock::duration Seconds(double s) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}

}  // namespace

LoadManager::LoadManager(LoadManagerOptions options, LoadFn load)
    : load_(std::move(load)),
      lease_(Seconds(options.staged_lease_s)),
      pool_("the node's load pool", options.max_running,
            static_cast<size_t>(std::max(0, options.max_queued))) {
  // Checks a quarter lease apart (at most 1 s): a slot goes at most 25% late.
  const auto period = std::clamp<Clock::duration>(lease_ / 4, std::chrono::milliseconds(10),
                                                  std::chrono::seconds(1));
  lease_loop_.Start("node leases", period, [this] { ExpireLeases(); });
}

LoadManager::~LoadManager() { Shutdown(); }

void LoadManager::Shutdown() {
  {
    MutexLock lock(&mu_);
    stopping_ = true;
    for (auto& [name, slot] : slots_) {
      if (slot.progress) slot.progress->cancelled = true;
    }
    changed_.NotifyAll();
  }
  lease_loop_.Stop();
  pool_.Shutdown();
}

size_t LoadManager::ExpireLeases() {
  std::vector<std::optional<LoadedTasks>> released;  // freed outside the lock
  MutexLock lock(&mu_);
  const auto now = Clock::now();
  for (auto it = slots_.begin(); it != slots_.end();) {
    Slot& slot = it->second;
    if (now - slot.confirmed < lease_) {
      ++it;
      continue;
    }
    LogWarn("dropping a load the head stopped following",
            {{"dataset", it->first},
             {"generation", std::to_string(slot.generation)},
             {"state", std::string(LoadStateName(slot.state))},
             {"bytes", FormatBytes(slot.staged ? slot.staged->bytes() : 0)},
             {"lease_s", std::to_string(std::chrono::duration<double>(lease_).count())}});
    if (slot.progress) slot.progress->cancelled = true;
    released.push_back(std::move(slot.staged));
    it = slots_.erase(it);
  }
  if (!released.empty()) changed_.NotifyAll();
  return released.size();
}

NodeLoadState LoadManager::StateOf(const std::string& dataset, const Slot& slot) const {
  NodeLoadState s = slot.result;
  s.dataset = dataset;
  s.generation = slot.generation;
  s.state = slot.state;
  if (slot.progress) {
    s.tasks_total = slot.progress->tasks_total.load();
    s.tasks_done = slot.progress->tasks_done.load();
    s.rows = slot.progress->rows.load();
  }
  return s;
}

arrow::Result<NodeLoadState> LoadManager::Start(NodeLoadRequest request) {
  const std::string dataset = request.dataset;
  const uint64_t generation = request.generation;
  MutexLock lock(&mu_);
  if (stopping_) return arrow::Status::Cancelled("the node is shutting down");
  auto it = slots_.find(dataset);
  if (it != slots_.end() && it->second.generation == generation) {
    it->second.confirmed = Clock::now();
    return StateOf(dataset, it->second);  // a retry of the same message
  }
  uint64_t& newest = newest_[dataset];
  // A heal adds rows to the newest generation (request.extend), unless that
  // generation was evicted here since.
  const bool extends_newest =
      request.extend && generation == newest && generation > evicted_[dataset];
  if (generation <= newest && !extends_newest) {
    return arrow::Status::Invalid("node.load: 'generation' ", generation, " of dataset '", dataset,
                                  "' is stale: this node has seen generation ", newest);
  }
  auto progress = std::make_shared<LoadProgress>();
  progress->tasks_total = static_cast<int64_t>(request.tasks.size());
  auto shared_request = std::make_shared<NodeLoadRequest>(std::move(request));
  arrow::Status st = pool_.Submit([this, dataset, generation, shared_request, progress] {
    Run(dataset, generation, *shared_request, progress);
  });
  if (!st.ok()) return st;
  newest = generation;
  if (it != slots_.end()) {
    // A newer load of the name: the head gave up on the older one.
    if (it->second.progress) it->second.progress->cancelled = true;
    slots_.erase(it);
  }
  Slot& slot = slots_[dataset];
  slot.generation = generation;
  slot.state = LoadState::kQueued;
  slot.progress = progress;
  slot.confirmed = Clock::now();
  changed_.NotifyAll();
  return StateOf(dataset, slot);
}

void LoadManager::Run(const std::string& dataset, uint64_t generation,
                      const NodeLoadRequest& request, std::shared_ptr<LoadProgress> progress) {
  {
    MutexLock lock(&mu_);
    auto it = slots_.find(dataset);
    if (it == slots_.end() || it->second.generation != generation || progress->cancelled) return;
    it->second.state = LoadState::kLoading;
  }
  LogInfo("loading", {{"dataset", dataset},
                      {"generation", std::to_string(generation)},
                      {"tasks", std::to_string(request.tasks.size())}});
  arrow::Result<LoadedTasks> loaded = load_(request, progress.get());
  MutexLock lock(&mu_);
  auto it = slots_.find(dataset);
  if (it == slots_.end() || it->second.generation != generation) {
    return;  // dropped or replaced meanwhile: the batches go with `loaded`
  }
  Slot& slot = it->second;
  if (!loaded.ok()) {
    LogWarn("load failed", {{"dataset", dataset}, {"error", loaded.status().ToString()}});
    slot.state = LoadState::kFailed;
    slot.result.SetError(loaded.status());
  } else {
    slot.state = LoadState::kStaged;
    slot.result.task_rows = loaded->rows;
    slot.result.bytes = loaded->bytes();
    slot.result.bytes_read = progress->bytes_read.load();
    {
      MutexLock lock(&progress->counters_mu);
      slot.result.counters() = progress->counters;
    }
    LogInfo("staged", {{"dataset", dataset}, {"bytes", FormatBytes(loaded->bytes())}});
    slot.staged = std::move(*loaded);
  }
  changed_.NotifyAll();
}

NodeLoadState LoadManager::Wait(const std::string& dataset, uint64_t generation,
                                std::chrono::milliseconds wait) {
  const auto deadline = std::chrono::steady_clock::now() + wait;
  MutexLock lock(&mu_);
  while (true) {
    auto it = slots_.find(dataset);
    if (it == slots_.end() || it->second.generation != generation) {
      NodeLoadState absent;
      absent.dataset = dataset;
      absent.generation = generation;
      return absent;
    }
    it->second.confirmed = Clock::now();  // the head still follows this load
    NodeLoadState s = StateOf(dataset, it->second);
    if (s.finished() || stopping_ || std::chrono::steady_clock::now() >= deadline) return s;
    changed_.WaitUntil(&mu_, deadline);
  }
}

arrow::Result<LoadedTasks> LoadManager::TakeStaged(const std::string& dataset,
                                                   uint64_t generation) {
  MutexLock lock(&mu_);
  auto it = slots_.find(dataset);
  if (it == slots_.end() || it->second.generation != generation || !it->second.staged) {
    return arrow::Status::KeyError("no staged load of dataset '", dataset, "' generation ",
                                   generation, " on this node");
  }
  LoadedTasks staged = std::move(*it->second.staged);
  slots_.erase(it);
  changed_.NotifyAll();
  return staged;
}

bool LoadManager::Drop(const std::string& dataset, uint64_t generation, bool load_only) {
  std::optional<LoadedTasks> released;  // freed outside the lock
  MutexLock lock(&mu_);
  if (generation != 0) {
    uint64_t& newest = newest_[dataset];
    newest = std::max(newest, generation);
    if (!load_only) evicted_[dataset] = std::max(evicted_[dataset], generation);
  }
  auto it = slots_.find(dataset);
  if (it == slots_.end() || (generation != 0 && it->second.generation > generation)) return false;
  if (it->second.progress) it->second.progress->cancelled = true;
  released = std::move(it->second.staged);
  slots_.erase(it);
  changed_.NotifyAll();
  return true;
}

std::vector<NodeLoadState> LoadManager::States() const {
  MutexLock lock(&mu_);
  std::vector<NodeLoadState> out;
  for (const auto& [name, slot] : slots_) out.push_back(StateOf(name, slot));
  return out;
}

uint64_t LoadManager::NewestGeneration() const {
  MutexLock lock(&mu_);
  uint64_t newest = 0;
  for (const auto& [name, generation] : newest_) newest = std::max(newest, generation);
  return newest;
}

bool LoadManager::Loading(const std::string& dataset) const {
  MutexLock lock(&mu_);
  auto it = slots_.find(dataset);
  return it != slots_.end() &&
         (it->second.state == LoadState::kQueued || it->second.state == LoadState::kLoading);
}

bool LoadManager::Idle() const {
  MutexLock lock(&mu_);
  return slots_.empty() || std::all_of(slots_.begin(), slots_.end(), [](const auto& kv) {
           return kv.second.state == LoadState::kFailed;
         });
}

}  // namespace icefloe
