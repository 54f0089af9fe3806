// The states of a cached copy, and the one place each is mapped to and from
// its wire string.
//
// CopyState: a dataset in the head's catalog. The strings are what the
// head's replies, the Python client and the status page read:
//   loading   a load of it runs (not yet readable)
//   ready     every slice has its replicas
//   degraded  some slice has no live replica (reads of it fail until healed)
//   healing   a repair load of its lost rows runs
//   failed    its load failed
//
// LoadState: a load of a copy on one node (NodeLoadState in node.load,
// node.load_status and node.status):
//   queued    waiting for one of the node's load threads
//   loading   reading its tasks
//   staged    done, waiting for node.commit
//   failed    its error says why
//   absent    the node has no load of this generation
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
arrow::Result<CopyState> CopyStateFromName(std::string_view text, std::string_view field);
/// Whether the copy's load finished: ready, degraded or healing (a copy
/// that is judged for health, reused by an identical load, served).
bool Loaded(CopyState state);

enum class LoadState : uint8_t { kQueued, kLoading, kStaged, kFailed, kAbsent };

/// Every load state's wire string, in enum order (the field tables' choices).
inline constexpr std::string_view kLoadStateNames[] = {"queued", "loading", "staged", "failed",
                                                       "absent"};
static_assert(std::size(kLoadStateNames) == static_cast<size_t>(LoadState::kAbsent) + 1);

/// The wire string of `state`.
std::string_view LoadStateName(LoadState state);
/// Writes the wire string (messages, test output).
std::ostream& operator<<(std::ostream& os, LoadState state);
/// The load state named `text`; Invalid naming `field` and the accepted
/// strings otherwise.
arrow::Result<LoadState> LoadStateFromName(std::string_view text, std::string_view field);

}  // namespace icefloe
