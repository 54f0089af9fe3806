// Kubeflow Trainer's data-cache contract (see docs/kubeflow.md and
// shared/design/kubeflow-compat.md): the `head` and `worker` entry points,
// their environment, and the LWS naming rule for finding workers.
#pragma once

#include <string>
#include <vector>

#include <arrow/result.h>

namespace icefloe {

/// True when the program was started under `name` (argv[0]'s basename), as
/// the image's `head` and `worker` symlinks do.
bool InvokedAs(const char* argv0, const std::string& name);

/// What Kubeflow's dataset initializer puts in the cache pods' environment.
struct KubeflowEnv {
  std::string metadata_loc;  ///< METADATA_LOC: Iceberg metadata JSON (s3://, s3a://, file://, path)
  std::string schema_name;   ///< SCHEMA_NAME
  std::string table_name;    ///< TABLE_NAME
  /// ICEFLOE_TRANSFORM: a load transform as JSON text (docs/transforms.md), or empty.
  std::string transform;
  std::string leader_address;  ///< LWS_LEADER_ADDRESS, e.g. job-cache-0.job-cache.ns
  int group_size = 0;          ///< LWS_GROUP_SIZE: workers + 1
  /// RUNTIME_ENV is set: Kubeflow's local mode, where the head and two
  /// workers run on one machine outside Kubernetes (no LWS variables).
  bool local = false;

  /// Reads the variables. Invalid naming the first missing one (only
  /// METADATA_LOC and, for the head outside local mode,
  /// LWS_LEADER_ADDRESS/LWS_GROUP_SIZE are required).
  static arrow::Result<KubeflowEnv> FromEnvironment(bool for_head);

  /// The name the table is cached under: "<schema>.<table>", or "default".
  std::string DatasetName() const;

  /// grpc://<first label>-<i>.<rest>:<port> for workers i = 1 .. group_size-1
  /// (grpc+tls:// when `tls`: the workers serve TLS like the head). In local
  /// mode the two workers that Kubeflow's local scripts start:
  /// localhost:50052 and localhost:50053, whatever `port`.
  arrow::Result<std::vector<std::string>> WorkerLocations(int port, bool tls = false) const;
};

/// The worker ports of Kubeflow's local mode.
inline constexpr int kKubeflowLocalWorkerPorts[] = {50052, 50053};

/// The Kubeflow shard a PATH descriptor [index, total] names, as inclusive
/// global rows [first, last] of a dataset with `rows` rows. Errors as the
/// contract words them: Invalid("Missing local_rank in path"), Invalid("Missing
/// total in path"), Invalid("Invalid local_rank value"), Invalid("Invalid total
/// value"), IndexError("Invalid partition range").
struct KubeflowShard {
  uint64_t first = 0;
  uint64_t last = 0;
};
arrow::Result<KubeflowShard> KubeflowShardOf(const std::vector<std::string>& path, uint64_t rows);

}  // namespace icefloe
