// A fixed set of threads with a bounded queue of tasks, and FanOut: one call
// per item on a pool, waited for until a deadline.
//
// Every thread a server starts for background work comes from a ThreadPool
// (or is a single named thread with an owner), so the number of threads and
// queued tasks is bounded and shutdown is explicit (ARCHITECTURE.md lists them).
//
// Thread-safe. Tasks must not throw and must be bounded in time by their own
// deadlines: Shutdown() waits for every queued and running task.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <arrow/result.h>
#include <arrow/status.h>

#include "icefloe/common/mutex.h"

namespace icefloe {

class ThreadPool {
 public:
  /// `threads` workers (at least 1); at most `max_queued` tasks wait for one.
  ThreadPool(std::string name, int threads, size_t max_queued);
  /// Shuts down (see Shutdown).
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  /// Queues `task`. CapacityError naming the pool when the queue is full,
  /// Cancelled once Shutdown() began.
  arrow::Status Submit(std::function<void()> task) EXCLUDES(mu_);

  /// Refuses new tasks, runs every queued one, joins the threads. Idempotent.
  void Shutdown() EXCLUDES(mu_);

  /// Tasks queued or running now.
  size_t pending() const EXCLUDES(mu_);
  int threads() const { return static_cast<int>(threads_.size()); }
  const std::string& name() const { return name_; }

 private:
  void Work() EXCLUDES(mu_);

  const std::string name_;
  const size_t max_queued_;
  mutable Mutex mu_;
  CondVar cv_;
  std::vector<std::function<void()>> queue_ GUARDED_BY(mu_);  // FIFO via head index
  size_t head_ GUARDED_BY(mu_) = 0;
  size_t running_ GUARDED_BY(mu_) = 0;
  bool stopping_ GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;  // set in the constructor, joined once
  Mutex join_mu_;
};

/// Runs `fn(i)` for every i in [0, n) on `pool` and waits until all returned
/// or `deadline` passed. Entry i is the result, or nullopt when call i had not
/// finished by the deadline (it still runs to its own end; `fn` must capture
/// by value what it needs). A task the pool refused gets the refusal.
template <typename T>
std::vector<std::optional<arrow::Result<T>>> FanOut(
    ThreadPool* pool, size_t n, std::function<arrow::Result<T>(size_t)> fn,
    std::chrono::steady_clock::time_point deadline) {
  struct State {
    Mutex mu;
    CondVar cv;
    std::vector<std::optional<arrow::Result<T>>> results GUARDED_BY(mu);
    size_t done GUARDED_BY(mu) = 0;
  };
  auto state = std::make_shared<State>();
  {
    MutexLock lock(&state->mu);
    state->results.resize(n);
  }
  auto finish = [state](size_t i, arrow::Result<T> r) {
    MutexLock lock(&state->mu);
    state->results[i] = std::move(r);
    ++state->done;
    state->cv.NotifyAll();
  };
  for (size_t i = 0; i < n; ++i) {
    arrow::Status st = pool->Submit([fn, finish, i] { finish(i, fn(i)); });
    if (!st.ok()) finish(i, st);
  }
  MutexLock lock(&state->mu);
  while (state->done < n) {
    if (!state->cv.WaitUntil(&state->mu, deadline) &&
        std::chrono::steady_clock::now() >= deadline) {
      break;
    }
  }
  return state->results;  // a copy: late calls keep writing into the shared state
}

}  // namespace icefloe
