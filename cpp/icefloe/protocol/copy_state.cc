#include "icefloe/protocol/copy_state.h"

#include <ostream>
#include <string>

namespace icefloe {

std::string_view CopyStateName(CopyState state) {
  return kCopyStateNames[static_cast<size_t>(state)];
}

std::ostream& operator<<(std::ostream& os, CopyState state) { return os << CopyStateName(state); }

arrow::Result<CopyState> ParseCopyState(std::string_view text, std::string_view field) {
  for (size_t i = 0; i < std::size(kCopyStateNames); ++i) {
    if (kCopyStateNames[i] == text) return static_cast<CopyState>(i);
  }
  std::string accepted;
  for (std::string_view name : kCopyStateNames) {
    accepted += accepted.empty() ? "" : ", ";
    accepted += name;
  }
  return arrow::Status::Invalid(field, ": unknown copy state '", text, "'; one of ", accepted);
}

bool Loaded(CopyState state) {
  return state == CopyState::kReady || state == CopyState::kDegraded ||
         state == CopyState::kHealing;
}

}  // namespace icefloe
