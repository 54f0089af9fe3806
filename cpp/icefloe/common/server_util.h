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
///   <component> ready location=grpc://127.0.0.1:PORT health=http://127.0.0.1:PORT
/// `location` is what clients dial; a 0.0.0.0 host is shown as 127.0.0.1.
void AnnounceReady(const std::string& component, const arrow::flight::FlightServerBase& server,
                   bool tls, const std::string& host, int health_port);

/// Serves until SIGINT or SIGTERM, then returns OK (a clean shutdown).
arrow::Status ServeUntilSignal(arrow::flight::FlightServerBase* server);

/// Finalizes process-wide Arrow state (the S3 client) before exit.
void FinalizeProcess();

}  // namespace icefloe
