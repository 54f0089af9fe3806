// Flags every server binary takes (listen address, health port, security),
// registered and interpreted in one place.
#pragma once

#include <functional>
#include <string>
#include <utility>

#include <arrow/flight/types.h>
#include <arrow/result.h>

#include "icefloe/common/flags.h"
#include "icefloe/common/http_server.h"
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

/// Init()s a Flight server on the resolved address with its TLS and token
/// settings; an error names the address.
arrow::Status InitFlightServer(arrow::flight::FlightServerBase* server,
                               const ServerSettings& settings);

/// What the HTTP side port reports: /ready, /metrics, /status and / bodies.
struct HealthRoutes {
  std::function<std::pair<bool, std::string>()> ready;
  std::function<std::string()> metrics;  ///< Prometheus text
  std::function<std::string()> status;   ///< JSON
  std::function<std::string()> page;     ///< HTML for /; empty: no page
};
/// Registers /healthz, /ready (200 "ready" or 503 "not ready: <reason>"),
/// /metrics, /status and (with a page) /.
void AddHealthRoutes(HttpServer* http, HealthRoutes routes);

/// The common main(): parses flags (exit 2 with the message on bad ones),
/// prints --help, runs, finalizes process state, and exits 1 with the error.
int ServerMain(const char* program, FlagParser* parser, int argc, char** argv,
               const std::function<arrow::Status()>& run);

}  // namespace icefloe
