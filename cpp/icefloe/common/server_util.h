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

/// Options a data node's allocator needs, as jemalloc reads them
/// (JE_ARROW_MALLOC_CONF): freed pages go back to the OS at once. Arrow's
/// default keeps them resident for a second, and during a load that was more
/// than the node's whole memory budget, uncounted (issue 42).
inline constexpr const char* kNodeAllocatorConf = "dirty_decay_ms:0,muzzy_decay_ms:0";

/// Starts this program again (same argv, same pid) with kNodeAllocatorConf in
/// JE_ARROW_MALLOC_CONF, unless that variable is set (an explicit setting
/// wins). jemalloc reads it when the process starts, before main, and Arrow's
/// jemalloc_set_decay_ms reaches only arenas made later: a restart is the one
/// way in. Returns only when it does not restart (set already, or exec failed:
/// then the server runs with Arrow's default and says so).
void RestartWithNodeAllocatorConf(char** argv);

/// Finalizes process-wide Arrow state (the S3 client) before exit.
void FinalizeProcess();

}  // namespace icefloe
