// icefloe-node: a data node. Holds dataset slices in memory and serves DoGet.
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <thread>

#include <arrow/filesystem/localfs.h>
#include <arrow/memory_pool.h>

#include "icefloe/common/bytes.h"
#include "icefloe/common/flags.h"
#include "icefloe/common/http_server.h"
#include "icefloe/common/kubeflow.h"
#include "icefloe/common/log.h"
#include "icefloe/common/server_flags.h"
#include "icefloe/common/server_util.h"
#include "icefloe/loader/parquet_file.h"
#include "icefloe/node/copy/shared_export.h"
#include "icefloe/node/serve/node_server.h"
#include "icefloe/node/serve/registration.h"
#include "icefloe/node/tier/tier_manifest.h"

namespace icefloe {
namespace {

struct Flags {
  ServerFlags server;
  std::string default_dataset;
  int64_t memory_limit = 0;
  // One per core, at most 64 (what --load-threads accepts).
  int64_t load_threads = std::clamp<int64_t>(std::thread::hardware_concurrency(), 1, 64);
  int64_t max_loads = 2;
  int64_t staged_lease_ms = 30'000;
  bool kubeflow = false;  // started as `worker`
  bool share_memory = false;
  std::string disk_dir;
  int64_t disk_limit = 0;
  int64_t prefetch_limit = -1;  // -1: not given
  std::string prefetch_policy = "belady";
  std::string head;
  std::string parquet;
  std::string name = "default";
  int64_t batch_rows = kDefaultBatchRows;
};

// Debug aid: serve one local Parquet file as dataset `name`, rows [0, N).
arrow::Status PreloadParquet(NodeServer* server, const Flags& flags) {
  auto fs = std::make_shared<arrow::fs::LocalFileSystem>();
  ParquetReadOptions options;
  options.batch_rows = flags.batch_rows;
  auto pool = server->NewPool("dataset '" + flags.name + "'");
  options.pool = pool.get();
  ARROW_ASSIGN_OR_RAISE(auto data, ReadParquetFile(fs, flags.parquet, options));
  std::vector<CachedBatch> batches;
  uint64_t row = 0;
  for (auto& b : data.batches) {
    uint64_t rows = static_cast<uint64_t>(b->num_rows());
    batches.push_back({row, std::move(b)});
    row += rows;
  }
  ARROW_ASSIGN_OR_RAISE(auto ds, CachedDataset::Make(flags.name, 1, data.schema, std::move(batches),
                                                     std::move(pool)));
  LogInfo("loaded", {{"dataset", flags.name},
                     {"path", flags.parquet},
                     {"rows", std::to_string(ds->num_rows())},
                     {"bytes", std::to_string(ds->nbytes())}});
  server->Put(std::move(ds));
  return arrow::Status::OK();
}

// Says whether this host puts shared files in huge pages: readers of a
// shuffled epoch gather rows from all over them, ~1.25x faster from huge
// pages than from 4 KiB ones (docs/protocol.md, "Huge pages").
void LogSharedPages() {
  auto policy = ShmemHugePages();
  if (!policy.ok()) {
    LogInfo("shared files in 4 KiB pages", {{"reason", policy.status().ToString()}});
  } else if (*policy == "never" || *policy == "deny") {
    LogInfo("shared files in 4 KiB pages",
            {{"shmem_enabled", *policy},
             {"hint",
              "shuffled epochs read faster with shmem_enabled=advise "
              "(docs/protocol.md, \"Huge pages\")"}});
  } else {
    LogInfo("shared files in huge pages", {{"shmem_enabled", *policy}});
  }
}

arrow::Status Run(const Flags& flags) {
  ARROW_ASSIGN_OR_RAISE(ServerSettings settings, ResolveServerFlags(flags.server));
  NodeOptions options;
  options.security = settings.security;
  options.memory_limit_bytes = flags.memory_limit;
  if (flags.load_threads < 1 || flags.load_threads > 64) {
    return arrow::Status::Invalid("--load-threads must be in 1..64, got ", flags.load_threads);
  }
  options.load_threads = static_cast<int32_t>(flags.load_threads);
  if (flags.max_loads < 1 || flags.max_loads > 64) {
    return arrow::Status::Invalid("--max-loads must be in 1..64, got ", flags.max_loads);
  }
  options.loads.max_running = static_cast<int32_t>(flags.max_loads);
  if (flags.staged_lease_ms < 100 || flags.staged_lease_ms > 86'400'000) {
    return arrow::Status::Invalid("--staged-lease-ms must be in 100..86400000, got ",
                                  flags.staged_lease_ms);
  }
  options.loads.staged_lease_s = static_cast<double>(flags.staged_lease_ms) / 1000.0;
  if (flags.kubeflow && settings.security.TicketKey().empty()) {
    // Kubeflow starts its cache pods with no secret: node actions are taken
    // from the leader pod's address only.
    if (const char* leader = std::getenv("LWS_LEADER_ADDRESS"); leader && *leader) {
      options.trusted_head_host = leader;
      LogInfo("no cluster secret: node actions accepted from the leader only",
              {{"leader", leader}});
    }
  }
  options.io.s3 = iceberg::S3SettingsFromEnv();
  options.default_dataset = flags.default_dataset;
  options.share_memory = flags.share_memory;
  if (flags.disk_limit > 0 && flags.disk_dir.empty()) {
    return arrow::Status::Invalid("--disk-limit needs --disk-dir (the tier's directory)");
  }
  if (!flags.disk_dir.empty()) {
    if (flags.disk_limit <= 0) {
      return arrow::Status::Invalid("--disk-dir needs --disk-limit (the most bytes it may hold)");
    }
    options.disk_dir = flags.disk_dir;
    options.disk_limit_bytes = flags.disk_limit;
  }
  if (flags.prefetch_limit >= 0) {
    if (flags.disk_dir.empty()) {
      return arrow::Status::Invalid(
          "--prefetch-limit needs --disk-dir (it sizes the disk tier's "
          "RAM working set)");
    }
    options.readahead_limit_bytes = flags.prefetch_limit;
  }
  if (flags.prefetch_policy == "lru") {
    options.readahead_policy = WorkingSet::Policy::kLru;
  } else if (flags.prefetch_policy != "belady") {
    return arrow::Status::Invalid("--prefetch-policy: '", flags.prefetch_policy,
                                  "' is neither belady nor lru");
  }
  NodeServer server(options);
  if (!flags.disk_dir.empty()) {
    // What an earlier run left on the tier: copies proven intact, the rest removed.
    ARROW_ASSIGN_OR_RAISE(TierAdoption adopted, server.AdoptTier());
    LogInfo("disk tier", {{"dir", flags.disk_dir},
                          {"limit", FormatBytes(flags.disk_limit)},
                          {"copies adopted", std::to_string(adopted.copies.size())},
                          {"files adopted", std::to_string(adopted.files_adopted)},
                          {"files removed", std::to_string(adopted.files_removed)}});
    for (const std::string& why : adopted.refused)
      LogWarn("disk tier: not adopted", {{"why", why}});
  }
  if (!flags.parquet.empty()) ARROW_RETURN_NOT_OK(PreloadParquet(&server, flags));

  ARROW_RETURN_NOT_OK(InitFlightServer(&server, settings));
  const std::string location = AdvertisedLocation(settings, server.port());
  server.set_advertised_location(location);

  HttpServer http;
  AddHealthRoutes(&http,
                  {[&server] { return server.Ready(); }, [&server] { return server.Metrics(); },
                   [&server] { return Dump(server.Status().ToJson()); },
                   /*page=*/{}});
  ARROW_ASSIGN_OR_RAISE(int health_port, http.Start(flags.server.host, settings.health_port));

  std::unique_ptr<HeadRegistration> registration;
  if (!flags.head.empty()) {
    registration = std::make_unique<HeadRegistration>(flags.head, location, settings.security,
                                                      [&server] { return server.Status(); });
    registration->Start();
  }
  LogInfo("node started", {{"memory_limit", flags.memory_limit > 0 ? FormatBytes(flags.memory_limit)
                                                                   : std::string("unlimited")},
                           {"load_threads", std::to_string(options.load_threads)},
                           {"allocator", arrow::default_memory_pool()->backend_name()}});
  if (flags.share_memory) LogSharedPages();
  AnnounceReady("icefloe-node", location, settings.advertise_host, health_port);
  ARROW_RETURN_NOT_OK(ServeUntilSignal(&server));
  if (registration) registration->Stop();
  http.Stop();
  server.StopBackground();
  return server.Shutdown();
}

}  // namespace
}  // namespace icefloe

int main(int argc, char** argv) {
  // Before anything else: it may start the program again.
  icefloe::RestartWithNodeAllocatorConf(argv);
  // Loads churn through buffers Arrow allocates from its default pool (file
  // reads, decompression) while cached data stays for hours: jemalloc returns
  // those to the OS, where the wheel's default (mimalloc) keeps ~0.3 bytes per
  // cached byte resident (benchmarks/memory.py). Arrow reads this on first
  // use; an explicit setting wins.
  setenv("ARROW_DEFAULT_MEMORY_POOL", "jemalloc", /*overwrite=*/0);
  icefloe::InitLogging("node");
  icefloe::Flags flags;
  if (icefloe::InvokedAs(argv[0], "worker")) {
    flags.kubeflow = true;
    // Kubeflow mode: health on 8080, the table named by the environment.
    flags.server.health_port = 8080;
    auto env = icefloe::KubeflowEnv::FromEnvironment(/*for_head=*/false);
    if (env.ok()) flags.default_dataset = env->DatasetName();
  }
  icefloe::FlagParser parser("icefloe-node",
                             "An icefloe data node: caches dataset slices in RAM and serves them "
                             "over Arrow Flight.");
  icefloe::AddServerFlags(&parser, &flags.server);
  parser.Bytes("memory-limit", &flags.memory_limit,
               "Most Arrow bytes this node may hold, e.g. 8GiB (default: unlimited).",
               "ICEFLOE_MEMORY_LIMIT");
  parser.String("disk-dir", &flags.disk_dir,
                "Directory of this node's disk tier: rows a load cannot keep within "
                "--memory-limit are written there and served memory-mapped (emptied at start).",
                "ICEFLOE_DISK_DIR");
  parser.Bytes("disk-limit", &flags.disk_limit,
               "Most bytes the disk tier may hold, e.g. 100GiB (needs --disk-dir).",
               "ICEFLOE_DISK_LIMIT");
  parser.Bytes("prefetch-limit", &flags.prefetch_limit,
               "RAM the disk tier's read-ahead may fill ahead of the streams, within "
               "--memory-limit (default: an eighth of it; 0: no read-ahead, and window and "
               "sample epochs read the tier on page faults only).",
               "ICEFLOE_PREFETCH_LIMIT");
  parser.String("prefetch-policy", &flags.prefetch_policy,
                "Which disk-tier batches the working set keeps: belady (the ones read furthest "
                "ahead go first; reads ahead of the streams) or lru (the baseline; no "
                "read-ahead).",
                "ICEFLOE_PREFETCH_POLICY");
  parser.Int("load-threads", &flags.load_threads,
             "Files one load reads in parallel (1..64; default: one per core, at most 64).");
  parser.Bool("share-memory", &flags.share_memory,
              "Hold each dataset in a sealed memory file that readers on this host, running "
              "as this user, map instead of streaming it (docs/protocol.md).");
  parser.Int("max-loads", &flags.max_loads, "Dataset loads that may run at once.");
  parser.Int("staged-lease-ms", &flags.staged_lease_ms,
             "Drop a load the head stopped following (no node.load_status) after this long.");
  parser.String("head", &flags.head, "Head location to register with (grpc://host:port).",
                "ICEFLOE_HEAD");
  parser.String("default-dataset", &flags.default_dataset,
                "Dataset that Kubeflow-format tickets read; /ready waits for it.");
  parser.String("parquet", &flags.parquet, "Debug: serve this local Parquet file as --name.");
  parser.String("name", &flags.name, "Dataset name for --parquet.");
  parser.Int("batch-rows", &flags.batch_rows, "Rows per cached record batch for --parquet.");
  return icefloe::ServerMain("icefloe-node", &parser, argc, argv,
                             [&flags] { return icefloe::Run(flags); });
}
