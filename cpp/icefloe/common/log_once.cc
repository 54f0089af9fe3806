#include "icefloe/common/log_once.h"

namespace icefloe {

bool LogOnce::First(const std::string& subject, const std::string& reason) {
  MutexLock lock(&mu_);
  auto it = said_.find(subject);
  if (it == said_.end()) {
    if (said_.size() >= max_subjects_) return false;
    it = said_.emplace(subject, std::set<std::string>{}).first;
  }
  if (it->second.count(reason) > 0 || it->second.size() >= max_reasons_) return false;
  it->second.insert(reason);
  return true;
}

bool LogOnce::Forget(const std::string& subject) {
  MutexLock lock(&mu_);
  return said_.erase(subject) > 0;
}

}  // namespace icefloe
