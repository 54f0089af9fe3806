#include "icefloe/common/wire_status.h"

#include <string_view>

#include <arrow/flight/types.h>

namespace icefloe {

namespace flight = arrow::flight;

arrow::Status ToWireStatus(const arrow::Status& status) {
  if (status.ok()) return status;
  if (auto detail = flight::FlightStatusDetail::UnwrapStatus(status)) {
    // Unavailable from a peer that slipped through: not this server's state.
    if (detail->code() != flight::FlightStatusCode::Unavailable) return status;
    return flight::MakeFlightError(flight::FlightStatusCode::Failed, status.message(),
                                   kErrorNodeUnavailable);
  }
  switch (status.code()) {
    case arrow::StatusCode::Invalid:
    case arrow::StatusCode::KeyError:
    case arrow::StatusCode::NotImplemented:
      return status;
    case arrow::StatusCode::IndexError:
    case arrow::StatusCode::TypeError:
      return arrow::Status::Invalid(status.message());
    case arrow::StatusCode::OutOfMemory:
      return flight::MakeFlightError(flight::FlightStatusCode::Failed, status.message(),
                                     kErrorOutOfMemory);
    case arrow::StatusCode::IOError:
      return flight::MakeFlightError(flight::FlightStatusCode::Failed, status.message(),
                                     kErrorStorage);
    case arrow::StatusCode::AlreadyExists:
      return flight::MakeFlightError(flight::FlightStatusCode::Failed, status.message(),
                                     kErrorAlreadyExists);
    case arrow::StatusCode::CapacityError:
      return flight::MakeFlightError(flight::FlightStatusCode::Failed, status.message(),
                                     kErrorBusy);
    case arrow::StatusCode::Cancelled:
      return flight::MakeFlightError(flight::FlightStatusCode::Failed, status.message(),
                                     kErrorCancelled);
    default:
      // Never a bare UNKNOWN on the wire: say what it was.
      return flight::MakeFlightError(flight::FlightStatusCode::Failed, status.ToString(),
                                     kErrorInternal);
  }
}

arrow::Status PeerError(const arrow::Status& status, const std::string& peer) {
  if (status.ok()) return status;
  auto detail = flight::FlightStatusDetail::UnwrapStatus(status);
  if (detail && (detail->code() == flight::FlightStatusCode::Unavailable ||
                 detail->code() == flight::FlightStatusCode::TimedOut)) {
    return flight::MakeFlightError(flight::FlightStatusCode::Failed,
                                   "node " + peer + " is unreachable: " + status.message(),
                                   kErrorNodeUnavailable);
  }
  return status.WithMessage("node ", peer, ": ", status.message());
}

bool IsPeerUnavailable(const arrow::Status& status) {
  auto detail = flight::FlightStatusDetail::UnwrapStatus(status);
  return detail && detail->extra_info() == kErrorNodeUnavailable;
}

bool IsPeerRefusal(const arrow::Status& status) {
  auto detail = flight::FlightStatusDetail::UnwrapStatus(status);
  return detail && (detail->code() == flight::FlightStatusCode::Unauthorized ||
                    detail->code() == flight::FlightStatusCode::Unauthenticated);
}

std::string PeerWords(const arrow::Status& status, const std::string& peer) {
  std::string_view text = status.message();
  const std::string prefix = "node " + peer + ": ";
  if (text.substr(0, prefix.size()) == prefix) text.remove_prefix(prefix.size());
  static constexpr std::string_view kPreamble = "with message: ";
  if (size_t at = text.find(kPreamble); at != std::string_view::npos) {
    text.remove_prefix(at + kPreamble.size());
  }
  if (size_t at = text.rfind(". Detail: "); at != std::string_view::npos) text = text.substr(0, at);
  return std::string(text);
}

}  // namespace icefloe
