// Errors on the wire: every server method passes its status through
// ToWireStatus so clients can tell what failed.
//
// Flight carries Invalid, KeyError and NotImplemented (and its own codes:
// Unauthenticated, Unavailable, ...) as themselves; other Arrow codes would
// arrive as a generic server error. Those are sent as FlightStatusCode::Failed
// with extra_info naming the kind ("icefloe:OutOfMemory", "icefloe:IOError",
// "icefloe:NodeUnavailable", "icefloe:AlreadyExists", "icefloe:Busy",
// "icefloe:Cancelled", "icefloe:RowsNotHeld"), which the Python client maps to
// icefloe.OutOfMemory, StorageError, Unavailable, AlreadyExists, Busy,
// Cancelled and RowsNotHeld.
#pragma once

#include <string>

#include <arrow/status.h>

namespace icefloe {

inline constexpr const char* kErrorOutOfMemory = "icefloe:OutOfMemory";
inline constexpr const char* kErrorStorage = "icefloe:IOError";
inline constexpr const char* kErrorNodeUnavailable = "icefloe:NodeUnavailable";
inline constexpr const char* kErrorAlreadyExists = "icefloe:AlreadyExists";
inline constexpr const char* kErrorBusy = "icefloe:Busy";
inline constexpr const char* kErrorCancelled = "icefloe:Cancelled";
inline constexpr const char* kErrorInternal = "icefloe:Internal";
/// A node asked for rows it does not all hold (a node restarted with part of
/// its copy): another replica may hold them, so readers fail over on it.
inline constexpr const char* kErrorRowsNotHeld = "icefloe:RowsNotHeld";

arrow::Status ToWireStatus(const arrow::Status& status);

/// A failure to reach another icefloe server (as the head calling a node):
/// a plain IOError naming the peer, without the peer's Flight code (so the
/// caller does not look unavailable itself).
arrow::Status PeerError(const arrow::Status& status, const std::string& peer);

/// True for a PeerError that says the peer could not be reached.
bool IsPeerUnavailable(const arrow::Status& status);

/// True for a PeerError that says the peer refused the call (Flight
/// Unauthorized or Unauthenticated): it answers, but will not do it for us.
bool IsPeerRefusal(const arrow::Status& status);

/// The words `peer` answered with, from a PeerError: without the "node
/// <peer>: " prefix PeerError adds, gRPC's "... error, with message: " and
/// Flight's ". Detail: <code>" suffix.
std::string PeerWords(const arrow::Status& status, const std::string& peer);

}  // namespace icefloe
