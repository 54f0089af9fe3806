// icefloe-head: the head. Knows the datasets and where their slices live.
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <thread>

#include "icefloe/common/bytes.h"
#include "icefloe/common/flags.h"
#include "icefloe/common/http_server.h"
#include "icefloe/common/kubeflow.h"
#include "icefloe/common/log.h"
#include "icefloe/common/server_flags.h"
#include "icefloe/common/server_util.h"
#include "icefloe/head/service/head_server.h"
#include "icefloe/iceberg/scan.h"
#include "icefloe/protocol/data_file_json.h"
#include "icefloe/protocol/messages.h"
#include "icefloe/protocol/transform_spec.h"

namespace icefloe {
namespace {

struct Flags {
  ServerFlags server;
  bool kubeflow = false;  // started as `head`: Kubeflow's data-cache contract
  std::string default_dataset;
  std::vector<std::string> nodes;
  int64_t heartbeat_timeout_ms = 5000;
  int64_t poll_ms = 1000;
  int64_t max_loads = 4;
  int64_t max_queued_loads = 16;
  int64_t load_timeout_s = 3600;
  int64_t evict_timeout_ms = 30000;
  int64_t startup_timeout_s = 600;
  int64_t recover_ms = 3000;
  int64_t retain_s = 600;
  int64_t follow_s = 0;  // 0: datasets stay on the snapshot they were loaded at
};

// A positive flag value, or an error naming the flag.
arrow::Status Positive(const char* flag, int64_t value, int64_t max) {
  if (value < 1 || value > max) {
    return arrow::Status::Invalid("--", flag, " must be in 1..", max, ", got ", value);
  }
  return arrow::Status::OK();
}

arrow::Status Run(const Flags& flags) {
  ARROW_ASSIGN_OR_RAISE(ServerSettings settings, ResolveServerFlags(flags.server));
  HeadOptions options;
  options.nodes = flags.nodes;
  options.security = settings.security;
  options.io.s3 = iceberg::S3SettingsFromEnv();
  ARROW_RETURN_NOT_OK(Positive("heartbeat-timeout-ms", flags.heartbeat_timeout_ms, 3'600'000));
  ARROW_RETURN_NOT_OK(Positive("max-loads", flags.max_loads, 256));
  ARROW_RETURN_NOT_OK(Positive("max-queued-loads", flags.max_queued_loads, 65536));
  ARROW_RETURN_NOT_OK(Positive("load-timeout-s", flags.load_timeout_s, 7 * 24 * 3600));
  ARROW_RETURN_NOT_OK(Positive("evict-timeout-ms", flags.evict_timeout_ms, 3'600'000));
  ARROW_RETURN_NOT_OK(Positive("poll-ms", flags.poll_ms, 3'600'000));
  options.registry.dead_after_s = static_cast<double>(flags.heartbeat_timeout_ms) / 1000.0;
  options.registry.poll_interval_s = static_cast<double>(flags.poll_ms) / 1000.0;
  if (flags.recover_ms < 0 || flags.recover_ms > 600'000) {
    return arrow::Status::Invalid("--recover-ms must be in 0..600000, got ", flags.recover_ms);
  }
  options.adopter.recover_s = static_cast<double>(flags.recover_ms) / 1000.0;
  options.adopter.interval_s = options.registry.poll_interval_s;
  options.adopter.call_timeout_s = options.registry.call_timeout_s;
  options.loads.max_concurrent_loads = static_cast<int32_t>(flags.max_loads);
  options.loads.max_queued_loads = static_cast<int32_t>(flags.max_queued_loads);
  options.loads.load_timeout_s = static_cast<double>(flags.load_timeout_s);
  options.loads.evict_timeout_s = static_cast<double>(flags.evict_timeout_ms) / 1000.0;
  if (flags.retain_s < 0 || flags.retain_s > 7 * 24 * 3600) {
    return arrow::Status::Invalid("--retain-s must be in 0..604800, got ", flags.retain_s);
  }
  options.loads.retain_s = static_cast<double>(flags.retain_s);
  options.loads.retain_idle_s = std::min(30.0, options.loads.retain_s / 4);
  options.default_dataset = flags.default_dataset;
  options.startup_timeout_s = static_cast<double>(flags.startup_timeout_s);
  if (flags.follow_s < 0 || flags.follow_s > 7 * 24 * 3600) {
    return arrow::Status::Invalid("--follow must be in 0..604800 seconds, got ", flags.follow_s);
  }
  options.follow.period_s = static_cast<double>(flags.follow_s);
  if (flags.kubeflow) {
    // Kubeflow mode: the table named by the environment, loaded at start-up.
    ARROW_ASSIGN_OR_RAISE(KubeflowEnv env, KubeflowEnv::FromEnvironment(/*for_head=*/true));
    // Workers by the LWS naming rule (in local mode, RUNTIME_ENV set: the two
    // local workers), unless listed explicitly (--node / ICEFLOE_NODES); they
    // serve TLS when the head does.
    if (options.nodes.empty()) {
      ARROW_ASSIGN_OR_RAISE(options.nodes,
                            env.WorkerLocations(settings.port, settings.security.tls()));
    }
    options.default_dataset = env.DatasetName();
    LoadRequest load;
    load.name = env.DatasetName();
    load.source = env.metadata_loc;
    if (!env.transform.empty()) {
      // Checked like a load action's: a bad spec stops the head at once.
      ARROW_ASSIGN_OR_RAISE(nlohmann::json body,
                            ParseJsonObject(env.transform, "ICEFLOE_TRANSFORM"));
      arrow::Result<TransformSpec> spec = TransformSpec::FromJson(body);
      if (spec.ok()) {
        if (arrow::Status known = spec->CheckKnownFields(); !known.ok()) spec = known;
      }
      if (!spec.ok()) {
        return spec.status().WithMessage("ICEFLOE_TRANSFORM: ", spec.status().message());
      }
      load.transform = std::move(*spec);
    }
    options.startup_load = load;
    std::string workers;
    for (const auto& node : options.nodes) workers += (workers.empty() ? "" : ",") + node;
    LogInfo("kubeflow mode", {{"dataset", load.name},
                              {"metadata", env.metadata_loc},
                              {"local", env.local ? "true" : "false"},
                              {"workers", workers}});
  }
  HeadServer server(options);
  ARROW_RETURN_NOT_OK(InitFlightServer(&server, settings));
  server.StartBackground();

  HttpServer http;
  AddHealthRoutes(&http,
                  {[&server] { return server.Ready(); }, [&server] { return server.Metrics(); },
                   [&server] { return Dump(server.ClusterStatus()); },
                   [&server] { return server.StatusPage(); }});
  ARROW_ASSIGN_OR_RAISE(int health_port, http.Start(flags.server.host, settings.health_port));

  AnnounceReady("icefloe-head", AdvertisedLocation(settings, server.port()),
                settings.advertise_host, health_port);
  // A start-up load that can never succeed ends the process with its error,
  // so the pod restarts visibly instead of serving a cache with missing rows.
  arrow::Status startup_error;
  std::thread startup;
  if (options.startup_load) {
    startup = std::thread([&] {
      arrow::Status st = server.RunStartupLoad();
      if (!st.ok() && !st.IsCancelled()) {
        LogError("start-up load failed", {{"error", st.ToString()}});
        startup_error = st;
        (void)server.Shutdown();
      }
    });
  }
  arrow::Status served = ServeUntilSignal(&server);
  server.StopBackground();
  if (startup.joinable()) startup.join();
  http.Stop();
  ARROW_RETURN_NOT_OK(served);
  ARROW_RETURN_NOT_OK(startup_error);
  return server.Shutdown();
}

// `icefloe-head plan`: prints what a load of a table would read.
int PlanMain(int argc, char** argv) {
  std::string location, columns, filter, ref;
  int64_t snapshot_id = -1, as_of_ms = -1;
  bool as_json = false;
  FlagParser parser("icefloe-head plan",
                    "Plans a scan of an Iceberg table and prints the snapshot, files, rows, "
                    "bytes and what pruning skipped. S3 settings come from the AWS environment.");
  parser.Positional("location", &location, "metadata.json location or table directory.");
  parser.Int("snapshot-id", &snapshot_id, "Read this snapshot.");
  parser.String("ref", &ref, "Read this branch or tag.");
  parser.Int("as-of-ms", &as_of_ms, "Read the snapshot current at this time (ms since epoch).");
  parser.String("columns", &columns, "Comma-separated columns to project.");
  parser.String("filter", &filter, "SQL-style row filter, e.g. \"x > 5 AND y = 'a'\".");
  parser.Bool("json", &as_json, "Print JSON instead of text.");
  if (auto st = parser.Parse(argc, argv); !st.ok() || location.empty()) {
    std::fprintf(stderr, "icefloe-head plan: %s\n",
                 st.ok() ? "missing table location (see --help)" : st.message().c_str());
    return 2;
  }
  if (parser.help_requested()) {
    std::cout << parser.Usage();
    return 0;
  }
  iceberg::ScanOptions options;
  if (snapshot_id >= 0) options.snapshot_id = snapshot_id;
  if (!ref.empty()) options.ref = ref;
  if (as_of_ms >= 0) options.as_of_ms = as_of_ms;
  for (size_t pos = 0; !columns.empty() && pos <= columns.size();) {
    size_t comma = columns.find(',', pos);
    if (comma == std::string::npos) comma = columns.size();
    if (comma > pos) options.columns.push_back(columns.substr(pos, comma - pos));
    pos = comma + 1;
  }
  options.filter = filter;
  iceberg::FileIOOptions io_options;
  io_options.s3 = iceberg::S3SettingsFromEnv();
  iceberg::FileIO io(io_options);
  auto plan = iceberg::PlanScan(io, location, options);
  if (!plan.ok()) {
    std::fprintf(stderr, "icefloe-head plan: %s\n", plan.status().ToString().c_str());
    FinalizeProcess();
    return 1;
  }
  nlohmann::json files = nlohmann::json::array();
  for (const auto& t : plan->tasks) {
    nlohmann::json deletes = nlohmann::json::array();
    for (const auto& d : t.deletes) deletes.push_back(DataFileToJson(d));
    nlohmann::json f = DataFileToJson(t.data_file);
    f["deletes"] = deletes;
    files.push_back(f);
  }
  const auto& m = plan->metrics;
  nlohmann::json out = {
      {"metadata_location", plan->metadata_location},
      {"snapshot_id", plan->snapshot_id ? nlohmann::json(*plan->snapshot_id) : nlohmann::json()},
      {"schema", plan->arrow_schema->ToString()},
      {"files", files},
      {"records", plan->total_records()},
      {"bytes", plan->total_bytes()},
      {"manifests_total", m.manifests_total},
      {"manifests_pruned", m.manifests_pruned},
      {"data_files_total", m.data_files_total},
      {"data_files_pruned_by_partition", m.data_files_pruned_by_partition},
      {"data_files_pruned_by_bounds", m.data_files_pruned_by_bounds},
      {"delete_files", m.delete_files},
      {"planning_ms", m.planning_ms}};
  if (as_json) {
    std::cout << out.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << std::endl;
  } else {
    std::cout << "table     " << plan->metadata_location << "\n"
              << "snapshot  " << (plan->snapshot_id ? std::to_string(*plan->snapshot_id) : "none")
              << "\n"
              << "files     " << plan->tasks.size() << " to read of " << m.data_files_total
              << " (pruned: " << m.data_files_pruned_by_partition << " by partition, "
              << m.data_files_pruned_by_bounds << " by column bounds)\n"
              << "manifests " << m.manifests_total - m.manifests_pruned << " read of "
              << m.manifests_total << "\n"
              << "rows      " << plan->total_records() << " before deletes and filter\n"
              << "bytes     " << FormatBytes(plan->total_bytes()) << "\n"
              << "deletes   " << m.delete_files << " delete files\n"
              << "planned in " << m.planning_ms << " ms\n";
  }
  FinalizeProcess();
  return 0;
}

}  // namespace
}  // namespace icefloe

int main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "plan") return icefloe::PlanMain(argc - 1, argv + 1);
  icefloe::InitLogging("head");
  icefloe::Flags flags;
  flags.kubeflow = icefloe::InvokedAs(argv[0], "head");
  if (flags.kubeflow) flags.server.health_port = 8080;
  icefloe::FlagParser parser("icefloe-head",
                             "The icefloe head: plans datasets onto data nodes and answers "
                             "GetFlightInfo with the endpoints consumers read.");
  icefloe::AddServerFlags(&parser, &flags.server);
  parser.List("node", &flags.nodes, "A data node location (grpc://host:port); repeatable.",
              "ICEFLOE_NODES");
  parser.Int("heartbeat-timeout-ms", &flags.heartbeat_timeout_ms,
             "A node silent this long is marked dead.");
  parser.Int("poll-ms", &flags.poll_ms,
             "How often the head asks every node for its status, checks its copies' health "
             "(and starts heals) and adopts what the nodes report.");
  parser.Int("recover-ms", &flags.recover_ms,
             "After a start, how long the head waits for its nodes' reports (to adopt the "
             "datasets they hold) before it serves catalog reads and loads; 0: at once.");
  parser.Int("max-loads", &flags.max_loads, "Loads that may run at once.");
  parser.Int("max-queued-loads", &flags.max_queued_loads,
             "Loads that may wait for one of those; more are refused.");
  parser.Int("load-timeout-s", &flags.load_timeout_s,
             "A load whose nodes have not all finished reading by then fails (and is cleaned up).");
  parser.Int("evict-timeout-ms", &flags.evict_timeout_ms,
             "How long an evict waits for all its nodes (asked in parallel).");
  parser.Int("retain-s", &flags.retain_s,
             "A copy that a reload (a refresh) replaced is kept for the consumers still "
             "reading it, so that an epoch finishes on the generation it started on: at most "
             "this many seconds, and freed once it has had no reader for min(30 s, a quarter of "
             "this); 0: freed at once.");
  parser.Int("startup-timeout-s", &flags.startup_timeout_s,
             "Kubeflow mode: give up (exit non-zero) when the start-up load has not succeeded "
             "within this many seconds.",
             "ICEFLOE_STARTUP_TIMEOUT");
  parser.Int("follow", &flags.follow_s,
             "Every this many seconds, check each dataset loaded from a table directory (no "
             "snapshot pinned) for a new snapshot and reload it when there is one; 0: off.",
             "ICEFLOE_FOLLOW_S");
  parser.String("default-dataset", &flags.default_dataset,
                "Dataset that Kubeflow-style PATH [index, total] descriptors shard.");
  return icefloe::ServerMain("icefloe-head", &parser, argc, argv,
                             [&flags] { return icefloe::Run(flags); });
}
