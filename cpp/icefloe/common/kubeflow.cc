#include "icefloe/common/kubeflow.h"

#include <charconv>
#include <cstdlib>
#include <cstring>

namespace icefloe {

bool InvokedAs(const char* argv0, const std::string& name) {
  if (argv0 == nullptr) return false;
  const char* base = std::strrchr(argv0, '/');
  return name == (base ? base + 1 : argv0);
}

namespace {

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

bool ParseU64(const std::string& s, uint64_t* out) {
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return !s.empty() && ec == std::errc() && ptr == s.data() + s.size();
}

}  // namespace

arrow::Result<KubeflowEnv> KubeflowEnv::FromEnvironment(bool for_head) {
  KubeflowEnv env;
  env.metadata_loc = Env("METADATA_LOC");
  env.schema_name = Env("SCHEMA_NAME");
  env.table_name = Env("TABLE_NAME");
  env.leader_address = Env("LWS_LEADER_ADDRESS");
  env.transform = Env("ICEFLOE_TRANSFORM");
  env.local = !Env("RUNTIME_ENV").empty();
  if (for_head && env.metadata_loc.empty()) {
    return arrow::Status::Invalid("METADATA_LOC is not set (the Iceberg metadata.json to cache)");
  }
  if (for_head && !env.local) {
    if (env.leader_address.empty()) return arrow::Status::Invalid("LWS_LEADER_ADDRESS is not set");
    std::string size = Env("LWS_GROUP_SIZE");
    uint64_t n = 0;
    if (!ParseU64(size, &n) || n < 2 || n > 10000) {
      return arrow::Status::Invalid("LWS_GROUP_SIZE '", size,
                                    "' is not a group size of 2..10000 (head + workers)");
    }
    env.group_size = static_cast<int>(n);
  }
  return env;
}

std::string KubeflowEnv::DatasetName() const {
  if (schema_name.empty() && table_name.empty()) return "default";
  if (schema_name.empty()) return table_name;
  return schema_name + "." + table_name;
}

arrow::Result<std::vector<std::string>> KubeflowEnv::WorkerLocations(int port, bool tls) const {
  const std::string scheme = tls ? "grpc+tls://" : "grpc://";
  if (local) {
    std::vector<std::string> out;
    for (int p : kKubeflowLocalWorkerPorts)
      out.push_back(scheme + "localhost:" + std::to_string(p));
    return out;
  }
  size_t dot = leader_address.find('.');
  std::string first = leader_address.substr(0, dot);
  std::string rest = dot == std::string::npos ? "" : leader_address.substr(dot);
  if (first.empty())
    return arrow::Status::Invalid("LWS_LEADER_ADDRESS '", leader_address, "' has no host name");
  std::vector<std::string> out;
  for (int i = 1; i < group_size; ++i) {
    out.push_back(scheme + first + "-" + std::to_string(i) + rest + ":" + std::to_string(port));
  }
  return out;
}

arrow::Result<KubeflowShard> KubeflowShardOf(const std::vector<std::string>& path, uint64_t rows) {
  if (path.empty()) return arrow::Status::Invalid("Missing local_rank in path");
  if (path.size() < 2) return arrow::Status::Invalid("Missing total in path");
  uint64_t index = 0, total = 0;
  if (!ParseU64(path[0], &index)) return arrow::Status::Invalid("Invalid local_rank value");
  if (!ParseU64(path[1], &total)) return arrow::Status::Invalid("Invalid total value");
  if (total == 0 || index >= total) return arrow::Status::IndexError("Invalid partition range");
  uint64_t per = rows / total + (rows % total != 0 ? 1 : 0);
  if (per == 0 || index > (rows - 1) / per) {
    return arrow::Status::IndexError("Invalid partition range");
  }
  uint64_t first = index * per;
  uint64_t last = std::min(first + per, rows) - 1;
  return KubeflowShard{first, last};
}

}  // namespace icefloe
