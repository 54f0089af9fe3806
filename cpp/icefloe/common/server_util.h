// What every icefloe server binary does around its Flight server: pick the
// listen location, serve until SIGINT/SIGTERM, and announce readiness.
#pragma once

#include <string>

#include <arrow/flight/server.h>
#include <arrow/result.h>

namespace icefloe {

/// Builds grpc+tcp://host:port (or grpc+tls:// when `tls`).
arrow::Result<arrow::flight::Location> ListenLocation(const std::string& host, int port, bool tls);

/// Prints the line launchers wait for, on stdout:
///   <component> ready location=grpc://HOST:PORT health=http://HOST:PORT
/// `location` is what clients dial.
void AnnounceReady(const std::string& component, const std::string& location,
                   const std::string& health_host, int health_port);

/// Serves until SIGINT or SIGTERM, then returns OK (a clean shutdown). With
/// ICEFLOE_PARENT_PID set, also shuts down once that process is no longer the
/// parent (it exited without stopping the server).
arrow::Status ServeUntilSignal(arrow::flight::FlightServerBase* server);

/// Finalizes process-wide Arrow state (the S3 client) before exit.
void FinalizeProcess();

}  // namespace icefloe
