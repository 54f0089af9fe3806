#include "icefloe/common/server_util.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>

#include <arrow/filesystem/s3fs.h>

#include "icefloe/common/background_loop.h"
#include "icefloe/common/log.h"

namespace icefloe {

arrow::Result<arrow::flight::Location> ListenLocation(const std::string& host, int port, bool tls) {
  if (port < 0 || port > 65535) return arrow::Status::Invalid("port ", port, " is out of range");
  return tls ? arrow::flight::Location::ForGrpcTls(host, port)
             : arrow::flight::Location::ForGrpcTcp(host, port);
}

void AnnounceReady(const std::string& component, const std::string& location,
                   const std::string& health_host, int health_port) {
  std::printf("%s ready location=%s health=http://%s:%d\n", component.c_str(), location.c_str(),
              health_host.c_str(), health_port);
  std::fflush(stdout);
  LogInfo("listening", {{"location", location}, {"health_port", std::to_string(health_port)}});
}

namespace {

// A server started for one process (LocalCluster sets ICEFLOE_PARENT_PID)
// shuts down when that process is gone, killed or crashed without stopping it,
// instead of holding its memory and ports: it is then no longer our parent.
// The watcher is one thread, owned by ServeUntilSignal, which stops it.
class ParentWatcher {
 public:
  ParentWatcher() {
    const char* env = std::getenv("ICEFLOE_PARENT_PID");
    if (env == nullptr || *env == '\0') return;
    char* end = nullptr;
    const long parent = std::strtol(env, &end, 10);
    if (*end != '\0' || parent <= 1) {
      LogWarn("ignoring ICEFLOE_PARENT_PID: not a process id", {{"value", env}});
      return;
    }
    loop_.Start("parent watch", [parent = static_cast<pid_t>(parent)] { return Look(parent); });
  }

 private:
  // One look: the next in 500 ms while `parent` is ours, else a shutdown.
  static std::optional<BackgroundLoop::Duration> Look(pid_t parent) {
    if (getppid() == parent) return std::chrono::milliseconds(500);
    LogWarn("parent process is gone; shutting down", {{"parent_pid", std::to_string(parent)}});
    kill(getpid(), SIGTERM);  // the same clean shutdown as a signal from outside
    return std::nullopt;
  }

  BackgroundLoop loop_;  // stopped by its destructor
};

}  // namespace

arrow::Status ServeUntilSignal(arrow::flight::FlightServerBase* server) {
  ARROW_RETURN_NOT_OK(server->SetShutdownOnSignals({SIGINT, SIGTERM}));
  ParentWatcher watcher;
  ARROW_RETURN_NOT_OK(server->Serve());
  if (int sig = server->GotSignal(); sig != 0) {
    LogInfo("shutting down", {{"signal", std::to_string(sig)}});
  }
  return arrow::Status::OK();
}

void RestartWithNodeAllocatorConf(char** argv) {
  constexpr const char* kVar = "JE_ARROW_MALLOC_CONF";
  if (std::getenv(kVar) != nullptr) return;
  if (::setenv(kVar, kNodeAllocatorConf, /*overwrite=*/0) != 0) return;
  ::execv("/proc/self/exe", argv);
  // Still here: exec failed. Unset, so that a child does not take the
  // setting for one this process runs with.
  const int err = errno;
  ::unsetenv(kVar);
  std::fprintf(stderr,
               "icefloe: could not restart with %s=%s (%s); freed memory stays resident "
               "for up to a second\n",
               kVar, kNodeAllocatorConf, std::strerror(err));
}

void FinalizeProcess() {
  if (arrow::fs::IsS3Initialized() && !arrow::fs::IsS3Finalized()) {
    auto st = arrow::fs::FinalizeS3();
    if (!st.ok()) LogWarn("S3 finalize failed", {{"error", st.ToString()}});
  }
}

}  // namespace icefloe
