#include "icefloe/common/server_flags.h"

#include <charconv>
#include <cstdio>
#include <cstdlib>

#include "icefloe/common/server_util.h"

namespace icefloe {

void AddServerFlags(FlagParser* parser, ServerFlags* flags) {
  parser->Positional("host", &flags->host, "Address to listen on (default 127.0.0.1).");
  parser->Positional("port", &flags->port, "Flight port; 0 picks a free one (default 0).");
  parser->String("host", &flags->host, "Address to listen on.");
  parser->String("port", &flags->port, "Flight port; 0 picks a free one.");
  parser->Int("health-port", &flags->health_port,
              "HTTP port for /ready, /healthz and /metrics; 0 picks one.", "HEALTH_PORT");
  parser->String("advertise", &flags->advertise,
                 "Host name other processes use to reach this server (default: --host, or "
                 "127.0.0.1 for 0.0.0.0).",
                 "ICEFLOE_ADVERTISE_HOST");
  parser->String("token-file", &flags->security.token_file,
                 "File holding the cluster token clients must present (or set ICEFLOE_TOKEN).");
  parser->String("cluster-secret-file", &flags->security.ticket_key_file,
                 "File holding the secret that signs tickets and head-to-node actions "
                 "(default: derived from the token).");
  parser->String("tls-cert", &flags->security.tls_cert_file, "PEM certificate: serve grpc+tls.");
  parser->String("tls-key", &flags->security.tls_key_file, "PEM private key for --tls-cert.");
  parser->String("tls-client-ca", &flags->security.tls_client_ca_file,
                 "PEM CA: require client certificates signed by it (mTLS).");
  parser->String("tls-root-certs", &flags->security.tls_root_certs_file,
                 "PEM roots this server trusts when it calls other icefloe servers.");
}

arrow::Result<ServerSettings> ResolveServerFlags(const ServerFlags& flags) {
  int port = 0;
  auto [ptr, ec] = std::from_chars(flags.port.data(), flags.port.data() + flags.port.size(), port);
  if (ec != std::errc() || ptr != flags.port.data() + flags.port.size()) {
    return arrow::Status::Invalid("port '", flags.port, "' is not a number");
  }
  ServerSettings s;
  SecurityFlags security = flags.security;
  if (const char* token = std::getenv("ICEFLOE_TOKEN")) security.token_env = token;
  ARROW_ASSIGN_OR_RAISE(s.security, LoadSecurity(security));
  ARROW_ASSIGN_OR_RAISE(s.listen, ListenLocation(flags.host, port, s.security.tls()));
  s.port = port;
  if (flags.health_port < 0 || flags.health_port > 65535) {
    return arrow::Status::Invalid("health port ", flags.health_port, " is out of range");
  }
  s.health_port = static_cast<int>(flags.health_port);
  s.advertise_host = !flags.advertise.empty()                          ? flags.advertise
                     : (flags.host == "0.0.0.0" || flags.host == "::") ? "127.0.0.1"
                                                                       : flags.host;
  return s;
}

std::string AdvertisedLocation(const ServerSettings& settings, int port) {
  return std::string(settings.security.tls() ? "grpc+tls://" : "grpc://") +
         settings.advertise_host + ":" + std::to_string(port);
}

arrow::Status InitFlightServer(arrow::flight::FlightServerBase* server,
                               const ServerSettings& settings) {
  arrow::flight::FlightServerOptions options(settings.listen);
  ApplyServerSecurity(settings.security, &options);
  auto st = server->Init(options);
  if (!st.ok()) {
    return st.WithMessage("cannot listen on ", settings.listen.ToString(), ": ", st.message());
  }
  return arrow::Status::OK();
}

void AddHealthRoutes(HttpServer* http, HealthRoutes routes) {
  http->Get("/healthz", [] { return HttpResponse{200, "ok"}; });
  http->Get("/ready", [ready = routes.ready] {
    auto [ok, reason] = ready();
    return ok ? HttpResponse{200, "ready"} : HttpResponse{503, "not ready: " + reason};
  });
  http->Get("/metrics", [metrics = routes.metrics] {
    return HttpResponse{200, metrics(), "text/plain; version=0.0.4"};
  });
  http->Get("/status", [status = routes.status] {
    return HttpResponse{200, status(), "application/json"};
  });
  if (routes.page) {
    http->Get("/", [page = routes.page] {
      return HttpResponse{200, page(), "text/html; charset=utf-8"};
    });
  }
}

int ServerMain(const char* program, FlagParser* parser, int argc, char** argv,
               const std::function<arrow::Status()>& run) {
  if (auto st = parser->Parse(argc, argv); !st.ok()) {
    std::fprintf(stderr, "%s: %s\n", program, st.message().c_str());
    return 2;
  }
  if (parser->help_requested()) {
    std::fputs(parser->Usage().c_str(), stdout);
    return 0;
  }
  arrow::Status st = run();
  FinalizeProcess();
  if (!st.ok()) {
    std::fprintf(stderr, "%s: %s\n", program, st.ToString().c_str());
    return 1;
  }
  return 0;
}

}  // namespace icefloe
