// LogOnce: one log line per subject per distinct reason, for conditions that
// repeat on every call or poll (a data node refusing the head's node actions,
// seen by the head on each poll and by the node on each call). Without it
// such a condition either floods the log or, as before, says nothing.
#pragma once

#include <cstddef>
#include <map>
#include <set>
#include <string>

#include "icefloe/common/mutex.h"

namespace icefloe {

/// Remembers which (subject, reason) pairs were already logged.
///
/// Bounded: at most `max_subjects` subjects and `max_reasons` reasons per
/// subject are kept; past those First() answers false (nothing more is logged)
/// until Forget() clears room. Thread-safe.
class LogOnce {
 public:
  explicit LogOnce(size_t max_subjects = 256, size_t max_reasons = 8)
      : max_subjects_(max_subjects), max_reasons_(max_reasons) {}

  /// True the first time `reason` is seen for `subject`: the caller logs it.
  bool First(const std::string& subject, const std::string& reason) EXCLUDES(mu_);
  /// Forgets `subject` (its condition cleared), so its next reason logs
  /// again. True when anything was remembered for it.
  bool Forget(const std::string& subject) EXCLUDES(mu_);

 private:
  const size_t max_subjects_;
  const size_t max_reasons_;
  Mutex mu_;
  std::map<std::string, std::set<std::string>> said_ GUARDED_BY(mu_);
};

}  // namespace icefloe
