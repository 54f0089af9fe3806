// Flags every server binary takes (listen address, health port, security),
// registered and interpreted in one place.
#pragma once

#include <string>

#include <arrow/flight/types.h>
#include <arrow/result.h>

#include "icefloe/common/flags.h"
#include "icefloe/common/security.h"

namespace icefloe {

struct ServerFlags {
  std::string host = "127.0.0.1";
  std::string port = "0";
  int64_t health_port = 0;
  std::string advertise;  ///< host name clients should dial (default: host)
  SecurityFlags security;
};

/// Registers <host> <port> positionals and --host, --port, --health-port,
/// --advertise, --token-file, --cluster-secret-file, --tls-* on `parser`.
void AddServerFlags(FlagParser* parser, ServerFlags* flags);

/// What the flags resolve to.
struct ServerSettings {
  arrow::flight::Location listen;
  int port = 0;  ///< as given (0 = pick a free one)
  std::string advertise_host;
  int health_port = 0;
  SecurityOptions security;
};
arrow::Result<ServerSettings> ResolveServerFlags(const ServerFlags& flags);

/// grpc[+tls]://<advertise host>:<port> for a started server.
std::string AdvertisedLocation(const ServerSettings& settings, int port);

}  // namespace icefloe
