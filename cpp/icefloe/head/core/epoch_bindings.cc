#include "icefloe/head/core/epoch_bindings.h"

namespace icefloe {

std::string EpochBindings::Key(const std::string& dataset, uint64_t seed, uint64_t epoch,
                               uint32_t world_size) {
  return dataset + '\n' + std::to_string(seed) + ':' + std::to_string(epoch) + ':' +
         std::to_string(world_size);
}

uint64_t EpochBindings::Bind(const std::string& key, uint64_t current,
                             const std::function<bool(uint64_t)>& held) {
  MutexLock lock(&mu_);
  auto it = bindings_.find(key);
  if (it != bindings_.end()) {
    const uint64_t bound = it->second.generation;
    if (bound == current || held(bound)) return bound;
    by_order_.erase(it->second.order);
    bindings_.erase(it);
  }
  while (max_ > 0 && bindings_.size() >= max_ && !by_order_.empty()) {
    bindings_.erase(by_order_.begin()->second);
    by_order_.erase(by_order_.begin());
  }
  const uint64_t order = next_order_++;
  bindings_[key] = {current, order};
  by_order_[order] = key;
  return current;
}

size_t EpochBindings::size() const {
  MutexLock lock(&mu_);
  return bindings_.size();
}

}  // namespace icefloe
