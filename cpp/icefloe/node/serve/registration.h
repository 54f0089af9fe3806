// A data node announcing itself to the head: "node.register" right away and
// then every interval as a heartbeat, so a restarted head finds its nodes
// again. Calls are signed with the cluster key and bounded by a timeout.
#pragma once

#include <atomic>
#include <functional>
#include <string>

#include <arrow/status.h>

#include "icefloe/common/background_loop.h"
#include "icefloe/common/security.h"
#include "icefloe/protocol/messages.h"

namespace icefloe {

class HeadRegistration {
 public:
  using StatusFn = std::function<NodeStatus()>;

  HeadRegistration(std::string head_location, std::string self_location, SecurityOptions security,
                   StatusFn status, double interval_s = 1.0);
  ~HeadRegistration();

  /// Starts the heartbeat thread (one, owned here).
  void Start();
  /// Stops and joins it. Idempotent.
  void Stop();
  /// Whether the last heartbeat reached the head.
  bool connected() const { return connected_.load(); }

 private:
  void Beat();
  void LogDebugOnce(const arrow::Status& st);

  std::string head_;
  std::string self_;
  SecurityOptions security_;
  StatusFn status_;
  double interval_s_;
  std::atomic<bool> connected_{false};
  bool warned_ = false;  // heartbeat thread only
  BackgroundLoop loop_;  // last: stops before what Beat uses
};

}  // namespace icefloe
