#include "icefloe/protocol/copy_state.h"

#include <ostream>
#include <string>

namespace icefloe {

std::string_view CopyStateName(CopyState state) {
  return kCopyStateNames[static_cast<size_t>(state)];
}

std::ostream& operator<<(std::ostream& os, CopyState state) { return os << CopyStateName(state); }

namespace {

// The index of `text` in `names`, or Invalid naming `field`.
template <size_t N>
arrow::Result<size_t> IndexOf(const std::string_view (&names)[N], std::string_view text,
                              std::string_view field, std::string_view what) {
  for (size_t i = 0; i < N; ++i) {
    if (names[i] == text) return i;
  }
  std::string accepted;
  for (std::string_view name : names) {
    accepted += accepted.empty() ? "" : ", ";
    accepted += name;
  }
  return arrow::Status::Invalid(field, ": unknown ", what, " '", text, "'; one of ", accepted);
}

}  // namespace

arrow::Result<CopyState> CopyStateFromName(std::string_view text, std::string_view field) {
  ARROW_ASSIGN_OR_RAISE(size_t i, IndexOf(kCopyStateNames, text, field, "copy state"));
  return static_cast<CopyState>(i);
}

std::string_view LoadStateName(LoadState state) {
  return kLoadStateNames[static_cast<size_t>(state)];
}

std::ostream& operator<<(std::ostream& os, LoadState state) { return os << LoadStateName(state); }

arrow::Result<LoadState> LoadStateFromName(std::string_view text, std::string_view field) {
  ARROW_ASSIGN_OR_RAISE(size_t i, IndexOf(kLoadStateNames, text, field, "load state"));
  return static_cast<LoadState>(i);
}

bool Loaded(CopyState state) {
  return state == CopyState::kReady || state == CopyState::kDegraded ||
         state == CopyState::kHealing;
}

}  // namespace icefloe
