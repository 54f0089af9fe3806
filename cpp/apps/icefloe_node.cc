// icefloe-node: a data node. Holds dataset slices in memory and serves DoGet.
#include <cstdio>
#include <iostream>

#include <arrow/filesystem/localfs.h>

#include "icefloe/common/flags.h"
#include "icefloe/common/http_server.h"
#include "icefloe/common/log.h"
#include "icefloe/common/server_util.h"
#include "icefloe/loader/parquet_file.h"
#include "icefloe/node/node_server.h"

namespace icefloe {
namespace {

struct Flags {
  std::string host = "127.0.0.1";
  std::string port_text = "0";
  int64_t health_port = 0;
  std::string parquet;
  std::string name = "default";
  int64_t batch_rows = 64 * 1024;
};

arrow::Status PreloadParquet(NodeServer* server, const Flags& flags) {
  auto fs = std::make_shared<arrow::fs::LocalFileSystem>();
  ParquetReadOptions options;
  options.batch_rows = flags.batch_rows;
  ARROW_ASSIGN_OR_RAISE(auto data, ReadParquetFile(fs, flags.parquet, options));
  std::vector<CachedBatch> batches;
  uint64_t row = 0;
  for (auto& b : data.batches) {
    uint64_t rows = static_cast<uint64_t>(b->num_rows());
    batches.push_back({row, std::move(b)});
    row += rows;
  }
  ARROW_ASSIGN_OR_RAISE(auto ds,
                        CachedDataset::Make(flags.name, 1, data.schema, std::move(batches)));
  LogInfo("loaded", {{"dataset", flags.name},
                     {"path", flags.parquet},
                     {"rows", std::to_string(ds->num_rows())},
                     {"bytes", std::to_string(ds->nbytes())}});
  server->Put(std::move(ds));
  return arrow::Status::OK();
}

arrow::Status Run(const Flags& flags) {
  int64_t port = 0;
  try {
    port = std::stoll(flags.port_text);
  } catch (...) {
    return arrow::Status::Invalid("port '", flags.port_text, "' is not a number");
  }
  ARROW_ASSIGN_OR_RAISE(auto location, ListenLocation(flags.host, static_cast<int>(port), false));
  NodeServer server(NodeOptions{});
  if (!flags.parquet.empty()) ARROW_RETURN_NOT_OK(PreloadParquet(&server, flags));

  arrow::flight::FlightServerOptions options(location);
  auto st = server.Init(options);
  if (!st.ok()) return st.WithMessage("cannot listen on ", location.ToString(), ": ", st.message());
  std::string shown = flags.host == "0.0.0.0" ? "127.0.0.1" : flags.host;
  server.set_advertised_location("grpc://" + shown + ":" + std::to_string(server.port()));

  HttpServer http;
  http.Get("/healthz", [] { return HttpResponse{200, "ok"}; });
  http.Get("/ready", [] { return HttpResponse{200, "ready"}; });
  ARROW_ASSIGN_OR_RAISE(int health_port,
                        http.Start(flags.host, static_cast<int>(flags.health_port)));

  AnnounceReady("icefloe-node", server, false, flags.host, health_port);
  ARROW_RETURN_NOT_OK(ServeUntilSignal(&server));
  http.Stop();
  return server.Shutdown();
}

}  // namespace
}  // namespace icefloe

int main(int argc, char** argv) {
  icefloe::InitLogging("node");
  icefloe::Flags flags;
  icefloe::FlagParser parser("icefloe-node",
                             "An icefloe data node: caches dataset slices in RAM and serves them "
                             "over Arrow Flight.");
  parser.Positional("host", &flags.host, "Address to listen on (default 127.0.0.1).");
  parser.Positional("port", &flags.port_text, "Flight port; 0 picks a free one (default 0).");
  parser.String("host", &flags.host, "Address to listen on.");
  parser.String("port", &flags.port_text, "Flight port; 0 picks a free one.");
  parser.Int("health-port", &flags.health_port, "HTTP port for /ready and /healthz; 0 picks one.",
             "HEALTH_PORT");
  parser.String("parquet", &flags.parquet, "Load this local Parquet file at start-up.");
  parser.String("name", &flags.name, "Dataset name for --parquet.");
  parser.Int("batch-rows", &flags.batch_rows, "Rows per cached record batch.");
  if (auto st = parser.Parse(argc, argv); !st.ok()) {
    std::fprintf(stderr, "icefloe-node: %s\n", st.message().c_str());
    return 2;
  }
  if (parser.help_requested()) {
    std::cout << parser.Usage();
    return 0;
  }
  auto st = icefloe::Run(flags);
  icefloe::FinalizeProcess();
  if (!st.ok()) {
    std::fprintf(stderr, "icefloe-node: %s\n", st.ToString().c_str());
    return 1;
  }
  return 0;
}
