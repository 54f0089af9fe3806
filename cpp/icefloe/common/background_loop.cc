#include "icefloe/common/background_loop.h"

#include <pthread.h>

#include <utility>

namespace icefloe {

BackgroundLoop::~BackgroundLoop() { Stop(); }

bool BackgroundLoop::Start(std::string name, Duration period, std::function<void()> body) {
  return Start(std::move(name), [period, body = std::move(body)]() -> std::optional<Duration> {
    body();
    return period;
  });
}

bool BackgroundLoop::Start(std::string name, Body body) {
  MutexLock join(&join_mu_);
  {
    MutexLock lock(&mu_);
    if (started_ || stopping_) return false;
    started_ = true;
  }
  thread_ = std::thread([this, name = std::move(name), body = std::move(body)] {
    // The OS keeps 15 bytes of a thread's name; the rest is dropped there only.
    pthread_setname_np(pthread_self(), name.substr(0, 15).c_str());
    Run(body);
  });
  return true;
}

void BackgroundLoop::Run(const Body& body) {
  while (true) {
    {
      MutexLock lock(&mu_);
      if (stopping_) return;
      woken_ = false;  // a Wake from now on asks for the round after this one
    }
    const std::optional<Duration> wait = body();
    if (!wait) return;
    const auto from = std::chrono::steady_clock::now();
    MutexLock lock(&mu_);
    // Spurious wake-ups wait again for the rest of the period.
    while (!stopping_ && !woken_) {
      const Duration left = *wait - (std::chrono::steady_clock::now() - from);
      if (left <= Duration::zero()) break;
      cv_.WaitFor(&mu_, left);
    }
  }
}

void BackgroundLoop::Wake() {
  MutexLock lock(&mu_);
  woken_ = true;
  cv_.NotifyAll();
}

void BackgroundLoop::Stop() {
  {
    MutexLock lock(&mu_);
    stopping_ = true;
    cv_.NotifyAll();
  }
  MutexLock join(&join_mu_);
  if (thread_.joinable()) thread_.join();
}

}  // namespace icefloe
