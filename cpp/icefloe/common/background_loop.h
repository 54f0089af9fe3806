// One background thread running a body in rounds, waiting between rounds
// until a period passed, Wake() was called or Stop() began. Every periodic
// loop of the servers (heartbeats, polls, adoption, the follower, lease
// expiry, disk-tier read-ahead, the parent watch) runs on one of these instead of a hand-written
// stop flag, condition variable and join.
//
//   BackgroundLoop loop;  // last member: stops before what the body uses
//   loop.Start("heartbeat", std::chrono::seconds(1), [this] { Beat(); });
//   ...
//   loop.Stop();  // prompt: a waiting loop ends at once, a round finishes
//
// Thread-safe. The body runs on the loop's thread only, outside every lock of
// the loop; it must be bounded in time by its own deadlines (Stop() waits for
// the round in progress) and must not call Stop().
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <thread>

#include "icefloe/common/mutex.h"

namespace icefloe {

class BackgroundLoop {
 public:
  using Duration = std::chrono::duration<double>;  // seconds
  /// One round; answers how long to wait before the next, nullopt to end.
  using Body = std::function<std::optional<Duration>()>;

  BackgroundLoop() = default;
  /// Stops (see Stop).
  ~BackgroundLoop();
  BackgroundLoop(const BackgroundLoop&) = delete;
  BackgroundLoop& operator=(const BackgroundLoop&) = delete;

  /// Starts the thread: a round at once, then one every `period` (measured
  /// from a round's end). Only the first Start of a loop starts it; a later
  /// one, or one after Stop, does nothing and answers false. `name` names
  /// the thread (the OS shows its first 15 bytes).
  bool Start(std::string name, Duration period, std::function<void()> body) EXCLUDES(mu_, join_mu_);
  /// As above, with the wait after each round chosen by the round itself.
  bool Start(std::string name, Body body) EXCLUDES(mu_, join_mu_);

  /// Ends the current wait at once, or, while a round runs, skips the wait
  /// after it: the next round comes without delay.
  void Wake() EXCLUDES(mu_);

  /// Ends the wait at once, lets a running round finish, joins the thread.
  /// Idempotent; no round starts after it began.
  void Stop() EXCLUDES(mu_, join_mu_);

 private:
  void Run(const Body& body) EXCLUDES(mu_);

  Mutex mu_;
  CondVar cv_;
  bool started_ GUARDED_BY(mu_) = false;
  bool stopping_ GUARDED_BY(mu_) = false;
  bool woken_ GUARDED_BY(mu_) = false;
  Mutex join_mu_;  // Start and Stop on different threads
  std::thread thread_ GUARDED_BY(join_mu_);
};

}  // namespace icefloe
