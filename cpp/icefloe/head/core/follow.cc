#include "icefloe/head/core/follow.h"

#include <algorithm>
#include <set>

#include "icefloe/common/log.h"

namespace icefloe {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

double UnixNow() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string SnapshotText(const std::optional<int64_t>& v) {
  return v ? std::to_string(*v) : std::string("none");
}

}  // namespace

std::string PinnedReason(const LoadRequest& request) {
  if (request.snapshot_id) {
    return "the load pins snapshot " + std::to_string(*request.snapshot_id);
  }
  if (request.as_of_ms) {
    return "the load pins the snapshot as of " + std::to_string(*request.as_of_ms) + " ms";
  }
  return "";
}

FollowedDataset FollowRecord::Status(double now_unix_s) const {
  // Times are absent until the event happens; an age is never negative (the
  // wall clock may step back between the event and now).
  auto at = [](double t) { return t > 0 ? std::optional<double>(t) : std::nullopt; };
  auto ago = [now_unix_s](double t) {
    return t > 0 ? std::optional<double>(std::max(0.0, now_unix_s - t)) : std::nullopt;
  };
  FollowedDataset f;
  f.name = name;
  f.source = request.source;
  f.ref = request.ref;
  f.followed = followed;
  f.why_not = why_not;
  f.state = state;
  f.snapshot_id = cached_snapshot_id;
  f.table_snapshot_id = table_snapshot_id;
  f.metadata_location = metadata_location;
  f.last_check_unix_s = at(last_check_unix_s);
  f.last_check_s_ago = ago(last_check_unix_s);
  f.last_refresh_unix_s = at(last_refresh_unix_s);
  f.last_refresh_s_ago = ago(last_refresh_unix_s);
  f.lag_s = lag_s;
  f.refreshed_to = refreshed_to;
  f.checks = checks;
  f.refreshes = refreshes;
  f.errors = errors;
  f.last_error = last_error;
  f.last_error_s_ago = ago(last_error_unix_s);
  return f;
}

Follower::Follower(FollowOptions options, Catalog* catalog, TableProbe probe, FollowLoadFn load,
                   FollowLoadingFn loading)
    : options_(options),
      catalog_(catalog),
      probe_(std::move(probe)),
      load_(std::move(load)),
      loading_(std::move(loading)) {}

Follower::~Follower() { Stop(); }

void Follower::Start() {
  if (!enabled()) return;
  const bool started =
      loop_.Start("head follow", [this]() -> std::optional<BackgroundLoop::Duration> {
        RunOnce();
        // A running refresh is looked at often: its end is the lag's.
        return BackgroundLoop::Duration(
            AnyRefreshing() ? std::min(options_.poll_s, options_.period_s) : options_.period_s);
      });
  if (started) LogInfo("following tables", {{"period_s", std::to_string(options_.period_s)}});
}

void Follower::Stop() { loop_.Stop(); }

bool Follower::AnyRefreshing() const {
  MutexLock lock(&mu_);
  return std::any_of(states_.begin(), states_.end(),
                     [](const auto& kv) { return kv.second.job != nullptr; });
}

void Follower::RunOnce() {
  MutexLock round(&round_mu_);
  const auto entries = catalog_->All();
  std::vector<std::shared_ptr<const DatasetEntry>> due;
  {
    MutexLock lock(&mu_);
    std::set<std::string> names;
    for (const auto& e : entries) names.insert(e->name);
    // Evicted names leave (bounded by the catalog) once no refresh of theirs runs.
    for (auto it = states_.begin(); it != states_.end();) {
      if (names.count(it->first) || (it->second.job && FollowJob(&it->second))) {
        ++it;
        continue;
      }
      log_once_.Forget(it->first);
      it = states_.erase(it);
    }
    const auto now = Clock::now();
    for (const auto& e : entries) {
      auto [it, added] = states_.try_emplace(e->name);
      State& s = it->second;
      if (!added && !s.job && !(s.record.request == e->request)) {
        // Loaded again with other arguments: a new dataset to follow.
        s = State{};
        log_once_.Forget(e->name);
        added = true;
      }
      if (added) {
        s.record.name = e->name;
        s.record.request = e->request;
        s.record.why_not = PinnedReason(e->request);
        s.record.followed = s.record.why_not.empty();
        s.record.state = s.record.followed ? "following" : "not followed";
        if (!s.record.followed) {
          LogInfo("not following dataset", {{"dataset", e->name}, {"why", s.record.why_not}});
        }
      }
      // A refresh that ended this round is judged from the next round's
      // catalog (this one may predate its publish).
      if (s.job) {
        FollowJob(&s);
        continue;
      }
      if (e->state == CopyState::kReady) s.record.cached_snapshot_id = e->snapshot_id;
      if (!s.record.followed || e->state != CopyState::kReady || now < s.next_check) continue;
      s.next_check = now + std::chrono::duration_cast<Clock::duration>(
                               std::chrono::duration<double>(options_.period_s));
      due.push_back(e);
    }
  }
  for (const auto& e : due) {
    if (loading_(e->name)) continue;  // a load of it runs: checked next period
    Check(e);
  }
}

bool Follower::FollowJob(State* s) {
  if (!s->job->Wait(std::chrono::milliseconds(0))) return true;
  auto outcome = s->job->Outcome();
  s->job.reset();
  s->record.state = "following";
  if (!outcome.ok()) {
    Failed(s, "refreshing to snapshot " + SnapshotText(s->target.snapshot_id), outcome.status());
    return false;
  }
  const double now = UnixNow();
  auto& r = s->record;
  r.refreshes += 1;
  r.last_refresh_unix_s = now;
  // The load plans the newest snapshot when it runs: usually the target, at
  // worst a newer one (then this lag, from the target's commit, is an upper bound).
  auto loaded = outcome->find("snapshot_id");
  r.refreshed_to = loaded != outcome->end() && loaded->is_number_integer()
                       ? std::optional<int64_t>(loaded->get<int64_t>())
                       : s->target.snapshot_id;
  r.cached_snapshot_id = r.refreshed_to;
  r.lag_s = s->target.snapshot_id
                ? std::optional<double>(now - static_cast<double>(s->target.timestamp_ms) / 1000.0)
                : std::nullopt;
  LogInfo("dataset refreshed to the table's new snapshot",
          {{"dataset", r.name},
           {"snapshot", SnapshotText(r.refreshed_to)},
           {"lag_s", r.lag_s ? std::to_string(*r.lag_s) : "n/a"}});
  log_once_.Forget(r.name);  // healthy again: a later error is news
  return false;
}

void Follower::Failed(State* s, const std::string& what, const arrow::Status& status) {
  auto& r = s->record;
  r.errors += 1;
  r.last_error = what + ": " + status.ToString();
  r.last_error_unix_s = UnixNow();
  if (log_once_.First(r.name, r.last_error)) {
    LogWarn("following dataset failed (the cached copy keeps serving; retried each period)",
            {{"dataset", r.name}, {"error", r.last_error}});
  }
}

void Follower::Check(const std::shared_ptr<const DatasetEntry>& e) {
  auto head = probe_(e->request);  // storage I/O, outside the lock
  const double now = UnixNow();
  {
    MutexLock lock(&mu_);
    auto it = states_.find(e->name);
    if (it == states_.end()) return;  // cannot happen: only rounds erase, one at a time
    State& s = it->second;
    if (!head.ok()) {
      Failed(&s, "reading the table's metadata", head.status());
      return;
    }
    auto& r = s.record;
    r.checks += 1;
    r.last_check_unix_s = now;
    r.metadata_location = head->metadata_location;
    if (head->fixed) {
      r.followed = false;
      r.why_not = head->why_fixed;
      r.state = "not followed";
      LogInfo("not following dataset", {{"dataset", r.name}, {"why", r.why_not}});
      return;
    }
    r.table_snapshot_id = head->snapshot_id;
    if (head->snapshot_id == e->snapshot_id) {
      log_once_.Forget(r.name);
      return;
    }
    s.target = *head;
  }
  LogInfo("table has a new snapshot: refreshing dataset",
          {{"dataset", e->name},
           {"from", SnapshotText(e->snapshot_id)},
           {"to", SnapshotText(head->snapshot_id)}});
  auto job = load_(e->request);
  MutexLock lock(&mu_);
  auto it = states_.find(e->name);
  if (it == states_.end()) return;
  if (!job.ok()) {
    Failed(&it->second, "refreshing to snapshot " + SnapshotText(head->snapshot_id), job.status());
    return;
  }
  it->second.job = std::move(*job);
  it->second.record.state = "refreshing";
}

FollowStatus Follower::Status() const {
  MutexLock lock(&mu_);
  const double now = UnixNow();
  FollowStatus out{options_.period_s, {}};
  for (const auto& [name, s] : states_) out.datasets.push_back(s.record.Status(now));
  return out;
}

std::vector<FollowRecord> Follower::Records() const {
  MutexLock lock(&mu_);
  std::vector<FollowRecord> out;
  out.reserve(states_.size());
  for (const auto& [name, s] : states_) out.push_back(s.record);
  return out;
}

}  // namespace icefloe
