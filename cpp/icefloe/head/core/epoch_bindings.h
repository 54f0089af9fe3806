// Which generation an epoch reads. The first consumer of a job to ask for an
// epoch (dataset, seed, epoch, world size) binds it to the copy current then;
// every other consumer of that epoch (the other ranks, each DataLoader worker)
// is answered with the same generation, even when a refresh published a newer
// one in between, so a job's epoch never mixes two copies. Its next epoch
// binds the newest. A binding whose generation is gone is bound anew.
//
// Thread-safe; bounded (the oldest bindings go first).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <string>

#include "icefloe/common/mutex.h"

namespace icefloe {

class EpochBindings {
 public:
  explicit EpochBindings(size_t max_bindings = 4096) : max_(max_bindings) {}

  /// The generation bound to `key`; binds `current` when there is none or
  /// `held(bound)` says the bound generation is no longer cached.
  uint64_t Bind(const std::string& key, uint64_t current, const std::function<bool(uint64_t)>& held)
      EXCLUDES(mu_);
  size_t size() const EXCLUDES(mu_);

  /// The key of one epoch of one job.
  static std::string Key(const std::string& dataset, uint64_t seed, uint64_t epoch,
                         uint32_t world_size);

 private:
  struct Binding {
    uint64_t generation = 0;
    uint64_t order = 0;  // when bound: the oldest go first
  };
  const size_t max_;
  mutable Mutex mu_;
  std::map<std::string, Binding> bindings_ GUARDED_BY(mu_);
  std::map<uint64_t, std::string> by_order_ GUARDED_BY(mu_);
  uint64_t next_order_ GUARDED_BY(mu_) = 0;
};

}  // namespace icefloe
