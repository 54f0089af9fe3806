// CatalogAdopter: the head's side of "the catalog lives on the nodes".
//
// Every interval_s it reads the registry's latest reports of the live nodes
// and (head/core/adopt.h):
//   - adopts copies the catalog does not hold (after a head restart: every
//     dataset the nodes hold), drops stale copies on their nodes;
//   - hands each holder the current catalog record of its copy (node.record)
//     when the one it reports differs.
// A fresh head is *recovering* for up to recover_s: the nodes have not all
// reported yet, so the catalog may still be missing names. Until then
// catalog reads and loads answer Unavailable ("the head is recovering its
// catalog") instead of a wrong "no such dataset"; recovery ends early once
// every static node has reported. recover_s = 0 serves at once (a cluster
// known to be new).
//
// Thread-safe. Owns one thread between Start() and Stop(); node calls run on
// the shared `calls` pool, each bounded by call_timeout_s.
#pragma once

#include <chrono>
#include <functional>
#include <set>
#include <string>

#include <arrow/status.h>

#include "icefloe/common/background_loop.h"
#include "icefloe/common/mutex.h"
#include "icefloe/common/thread_pool.h"
#include "icefloe/head/core/adopt.h"
#include "icefloe/head/core/catalog.h"
#include "icefloe/head/core/node_rpc.h"
#include "icefloe/head/core/registry.h"

namespace icefloe {

struct AdopterOptions {
  double recover_s = 0;       ///< longest wait for the nodes' first reports
  double interval_s = 1.0;    ///< between rounds
  double call_timeout_s = 5;  ///< node.record, node.evict
};

class CatalogAdopter {
 public:
  /// Whether a name is being loaded by this head (never adopted meanwhile).
  using LoadingFn = std::function<bool(const std::string&)>;

  /// Every pointer outlives the adopter.
  CatalogAdopter(AdopterOptions options, NodeRpc* rpc, ThreadPool* calls, NodeRegistry* registry,
                 Catalog* catalog, LoadingFn loading, uint64_t first_generation);
  ~CatalogAdopter();

  void Start() EXCLUDES(mu_);
  void Stop() EXCLUDES(mu_);
  /// One round now (the thread runs them; the head runs one after each
  /// load; tests call it directly). Rounds never overlap.
  void RunOnce() EXCLUDES(mu_, round_mu_);

  /// OK once the catalog is recovered; Unavailable (a Flight code) before.
  arrow::Status CheckServing() const EXCLUDES(mu_);
  bool recovering() const EXCLUDES(mu_);

 private:
  bool RecoveryDone(const std::vector<NodeInfo>& nodes) const REQUIRES(mu_);
  void Adopt(const AdoptionInput& input) EXCLUDES(mu_);
  void PushRecords(const std::vector<NodeReport>& reports) EXCLUDES(mu_);

  const AdopterOptions options_;
  NodeRpc* const rpc_;
  ThreadPool* const calls_;
  NodeRegistry* const registry_;
  Catalog* const catalog_;
  const LoadingFn loading_;
  const uint64_t first_generation_;
  const std::chrono::steady_clock::time_point started_;
  Mutex round_mu_;  // one round at a time (the thread's, or one after a load)
  mutable Mutex mu_;
  bool recovering_ GUARDED_BY(mu_);
  std::set<CopyId> seen_ GUARDED_BY(mu_);  // copies in the catalog at the last round
  std::set<CopyId> gone_ GUARDED_BY(mu_);  // copies that left the catalog since
  BackgroundLoop loop_;                    // last: stops before what its rounds use
};

}  // namespace icefloe
