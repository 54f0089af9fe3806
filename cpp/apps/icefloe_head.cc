// icefloe-head: the head. Knows the datasets and where their slices live.
#include <cstdio>
#include <iostream>

#include "icefloe/common/flags.h"
#include "icefloe/common/http_server.h"
#include "icefloe/common/log.h"
#include "icefloe/common/server_util.h"
#include "icefloe/head/head_server.h"

namespace icefloe {
namespace {

struct Flags {
  std::string host = "127.0.0.1";
  std::string port_text = "0";
  int64_t health_port = 0;
  std::vector<std::string> nodes;
};

arrow::Status Run(const Flags& flags) {
  int64_t port = 0;
  try {
    port = std::stoll(flags.port_text);
  } catch (...) {
    return arrow::Status::Invalid("port '", flags.port_text, "' is not a number");
  }
  ARROW_ASSIGN_OR_RAISE(auto location, ListenLocation(flags.host, static_cast<int>(port), false));
  HeadServer server(HeadOptions{flags.nodes});
  arrow::flight::FlightServerOptions options(location);
  auto st = server.Init(options);
  if (!st.ok()) return st.WithMessage("cannot listen on ", location.ToString(), ": ", st.message());

  HttpServer http;
  http.Get("/healthz", [] { return HttpResponse{200, "ok"}; });
  http.Get("/ready", [] { return HttpResponse{200, "ready"}; });
  ARROW_ASSIGN_OR_RAISE(int health_port,
                        http.Start(flags.host, static_cast<int>(flags.health_port)));

  AnnounceReady("icefloe-head", server, false, flags.host, health_port);
  ARROW_RETURN_NOT_OK(ServeUntilSignal(&server));
  http.Stop();
  return server.Shutdown();
}

}  // namespace
}  // namespace icefloe

int main(int argc, char** argv) {
  icefloe::InitLogging("head");
  icefloe::Flags flags;
  icefloe::FlagParser parser("icefloe-head",
                             "The icefloe head: plans datasets onto data nodes and answers "
                             "GetFlightInfo with the endpoints consumers read.");
  parser.Positional("host", &flags.host, "Address to listen on (default 127.0.0.1).");
  parser.Positional("port", &flags.port_text, "Flight port; 0 picks a free one (default 0).");
  parser.String("host", &flags.host, "Address to listen on.");
  parser.String("port", &flags.port_text, "Flight port; 0 picks a free one.");
  parser.Int("health-port", &flags.health_port, "HTTP port for /ready and /healthz; 0 picks one.",
             "HEALTH_PORT");
  parser.List("node", &flags.nodes, "A data node location (grpc://host:port); repeatable.",
              "ICEFLOE_NODES");
  if (auto st = parser.Parse(argc, argv); !st.ok()) {
    std::fprintf(stderr, "icefloe-head: %s\n", st.message().c_str());
    return 2;
  }
  if (parser.help_requested()) {
    std::cout << parser.Usage();
    return 0;
  }
  auto st = icefloe::Run(flags);
  icefloe::FinalizeProcess();
  if (!st.ok()) {
    std::fprintf(stderr, "icefloe-head: %s\n", st.ToString().c_str());
    return 1;
  }
  return 0;
}
