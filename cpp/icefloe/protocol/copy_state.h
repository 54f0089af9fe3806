// The state of a cached copy (a dataset in the head's catalog), and the one
// place it is mapped to and from its wire string. The strings are what the
// head's replies, the Python client and the status page read:
//   loading   a load of it runs (not yet readable)
//   ready     every slice has its replicas
//   degraded  some slice has no live replica (reads of it fail until healed)
//   healing   a repair load of its lost rows runs
//   failed    its load failed
#pragma once

#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <iterator>
#include <string_view>

#include <arrow/result.h>

namespace icefloe {

enum class CopyState : uint8_t { kLoading, kReady, kDegraded, kHealing, kFailed };

/// Every state's wire string, in enum order (the field tables' choices).
inline constexpr std::string_view kCopyStateNames[] = {"loading", "ready", "degraded", "healing",
                                                       "failed"};

static_assert(std::size(kCopyStateNames) == static_cast<size_t>(CopyState::kFailed) + 1);

/// The wire string of `state`.
std::string_view CopyStateName(CopyState state);
/// Writes the wire string (messages, test output).
std::ostream& operator<<(std::ostream& os, CopyState state);
/// The state named `text`; Invalid naming `field` (e.g. "dataset 'state'")
/// and the accepted strings otherwise.
arrow::Result<CopyState> ParseCopyState(std::string_view text, std::string_view field);
/// Whether the copy's load finished: ready, degraded or healing (a copy
/// that is judged for health, reused by an identical load, served).
bool Loaded(CopyState state);

}  // namespace icefloe
