#include "icefloe/common/thread_pool.h"

#include <algorithm>

namespace icefloe {

ThreadPool::ThreadPool(std::string name, int threads, size_t max_queued)
    : name_(std::move(name)), max_queued_(max_queued) {
  const int n = std::max(1, threads);
  threads_.reserve(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) threads_.emplace_back([this] { Work(); });
}

ThreadPool::~ThreadPool() { Shutdown(); }

arrow::Status ThreadPool::Submit(std::function<void()> task) {
  MutexLock lock(&mu_);
  if (stopping_) return arrow::Status::Cancelled(name_, " is shutting down");
  if (queue_.size() - head_ >= max_queued_) {
    return arrow::Status::CapacityError(name_, " is full: ", running_, " running and ",
                                        queue_.size() - head_, " queued; retry later");
  }
  queue_.push_back(std::move(task));
  cv_.NotifyOne();
  return arrow::Status::OK();
}

size_t ThreadPool::pending() const {
  MutexLock lock(&mu_);
  return queue_.size() - head_ + running_;
}

void ThreadPool::Work() {
  while (true) {
    std::function<void()> task;
    {
      MutexLock lock(&mu_);
      while (head_ == queue_.size() && !stopping_) cv_.Wait(&mu_);
      if (head_ == queue_.size()) return;  // stopping and drained
      task = std::move(queue_[head_++]);
      if (head_ == queue_.size()) {
        queue_.clear();
        head_ = 0;
      }
      ++running_;
    }
    task();
    MutexLock lock(&mu_);
    --running_;
  }
}

void ThreadPool::Shutdown() {
  MutexLock join_lock(&join_mu_);
  {
    MutexLock lock(&mu_);
    stopping_ = true;
    cv_.NotifyAll();
  }
  for (auto& t : threads_) {
    if (t.joinable()) t.join();
  }
}

}  // namespace icefloe
