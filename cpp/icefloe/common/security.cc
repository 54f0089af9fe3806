#include "icefloe/common/security.h"

#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <fstream>
#include <set>
#include <sstream>
#include <string_view>

#include <arrow/flight/server_middleware.h>
#include <arrow/flight/types.h>

#include "icefloe/common/bytes.h"
#include "icefloe/common/hmac.h"

namespace icefloe {

namespace flight = arrow::flight;

std::string SecurityOptions::TicketKey() const {
  if (!ticket_key.empty()) return ticket_key;
  if (token.empty()) return "";
  HmacDigest d = HmacSha256(token, "icefloe ticket key v1");
  return std::string(reinterpret_cast<const char*>(d.data()), d.size());
}

arrow::Result<std::string> ReadSecretFile(const std::string& path, bool trim) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return arrow::Status::IOError("cannot read ", path);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string s = ss.str();
  if (trim) {
    while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
    if (s.empty()) return arrow::Status::Invalid(path, " is empty");
  }
  return s;
}

arrow::Result<SecurityOptions> LoadSecurity(const SecurityFlags& flags) {
  SecurityOptions s;
  if (!flags.token_file.empty()) {
    ARROW_ASSIGN_OR_RAISE(s.token, ReadSecretFile(flags.token_file, true));
  } else {
    s.token = flags.token_env;
  }
  if (!flags.ticket_key_file.empty()) {
    ARROW_ASSIGN_OR_RAISE(s.ticket_key, ReadSecretFile(flags.ticket_key_file, true));
  }
  if (flags.tls_cert_file.empty() != flags.tls_key_file.empty()) {
    return arrow::Status::Invalid("--tls-cert and --tls-key must be given together");
  }
  if (!flags.tls_cert_file.empty()) {
    ARROW_ASSIGN_OR_RAISE(s.tls_cert_pem, ReadSecretFile(flags.tls_cert_file, false));
    ARROW_ASSIGN_OR_RAISE(s.tls_key_pem, ReadSecretFile(flags.tls_key_file, false));
  }
  if (!flags.tls_client_ca_file.empty()) {
    if (s.tls_cert_pem.empty()) return arrow::Status::Invalid("--tls-client-ca needs --tls-cert");
    ARROW_ASSIGN_OR_RAISE(s.tls_client_ca_pem, ReadSecretFile(flags.tls_client_ca_file, false));
  }
  if (!flags.tls_root_certs_file.empty()) {
    ARROW_ASSIGN_OR_RAISE(s.tls_root_certs_pem, ReadSecretFile(flags.tls_root_certs_file, false));
  }
  return s;
}

std::string SignAction(const std::string& key, const std::string& type, const std::string& body) {
  HmacDigest d = HmacSha256(key, type + "\n" + body);
  return HexEncode(std::string_view(reinterpret_cast<const char*>(d.data()), d.size()));
}

arrow::Status VerifyActionSignature(const std::string& key,
                                    const flight::ServerCallContext& context,
                                    const std::string& type, const std::string& body,
                                    std::string_view sender) {
  if (key.empty()) {
    return flight::MakeFlightError(
        flight::FlightStatusCode::Unauthorized,
        "action '" + type +
            "' is refused: this server has no cluster secret to check its signature (start "
            "every server with the same --cluster-secret-file, or --token-file)");
  }
  const auto& headers = context.incoming_headers();
  auto it = headers.find(kActionSignatureHeader);
  if (it == headers.end() || !ConstantTimeEquals(it->second, SignAction(key, type, body))) {
    return flight::MakeFlightError(
        flight::FlightStatusCode::Unauthorized,
        "action '" + type + "' is refused: its signature (" + kActionSignatureHeader +
            ") is missing or not made with this server's cluster secret; only " +
            std::string(sender) +
            " of this cluster sends it (every server needs the same --cluster-secret-file)");
  }
  return arrow::Status::OK();
}

std::string PeerAddress(const std::string& peer) {
  std::string_view p = peer;
  if (p.rfind("ipv4:", 0) == 0) {
    p.remove_prefix(5);
    size_t colon = p.rfind(':');
    return std::string(colon == std::string_view::npos ? p : p.substr(0, colon));
  }
  if (p.rfind("ipv6:", 0) == 0) {
    p.remove_prefix(5);
    size_t close = p.find(']');
    if (p.empty() || p[0] != '[' || close == std::string_view::npos) return "";
    return std::string(p.substr(1, close - 1));
  }
  return "";
}

namespace {

// The addresses `host` resolves to (numeric strings), or the error.
arrow::Result<std::set<std::string>> Resolve(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  int rc = getaddrinfo(host.c_str(), nullptr, &hints, &found);
  if (rc != 0) return arrow::Status::IOError("cannot resolve ", host, ": ", gai_strerror(rc));
  std::set<std::string> out;
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    char text[INET6_ADDRSTRLEN] = {0};
    if (getnameinfo(a->ai_addr, a->ai_addrlen, text, sizeof(text), nullptr, 0, NI_NUMERICHOST) ==
        0) {
      out.insert(text);
    }
  }
  freeaddrinfo(found);
  return out;
}

}  // namespace

PeerCheck CheckPeerIsHost(const std::string& peer, const std::string& host) {
  PeerCheck check;
  check.seen = PeerAddress(peer);
  if (check.seen.empty()) check.seen = peer;
  auto addresses = Resolve(host);
  if (addresses.ok()) {
    for (const auto& a : *addresses) check.expected += (check.expected.empty() ? "" : ",") + a;
    if (addresses->count(check.seen)) return check;
  }
  check.refusal =
      "only accepted from " + host + " (this worker's leader, LWS_LEADER_ADDRESS; it " +
      "has no cluster secret), " +
      (addresses.ok() ? "which resolves to " + check.expected
                      : "which does not resolve (" + addresses.status().message() + ")") +
      ", but the call came from " + check.seen;
  return check;
}

arrow::Status VerifyPeerIsHost(const flight::ServerCallContext& context, const std::string& host,
                               const std::string& type) {
  PeerCheck check = CheckPeerIsHost(context.peer(), host);
  if (check.refusal.empty()) return arrow::Status::OK();
  return flight::MakeFlightError(flight::FlightStatusCode::Unauthorized,
                                 "action '" + type + "' is " + check.refusal);
}

namespace {

class TokenMiddlewareFactory : public flight::ServerMiddlewareFactory {
 public:
  explicit TokenMiddlewareFactory(std::string token) : expected_("Bearer " + std::move(token)) {}

  arrow::Status StartCall(const flight::CallInfo&, const flight::ServerCallContext& context,
                          std::shared_ptr<flight::ServerMiddleware>* middleware) override {
    const auto& headers = context.incoming_headers();
    auto it = headers.find("authorization");
    if (it == headers.end()) {
      return flight::MakeFlightError(flight::FlightStatusCode::Unauthenticated,
                                     "missing token: this cluster requires authorization: Bearer "
                                     "<token>");
    }
    if (!ConstantTimeEquals(it->second, expected_)) {
      return flight::MakeFlightError(flight::FlightStatusCode::Unauthenticated, "invalid token");
    }
    return arrow::Status::OK();
  }

 private:
  std::string expected_;
};

}  // namespace

std::shared_ptr<flight::ServerMiddlewareFactory> MakeTokenMiddleware(std::string token) {
  return std::make_shared<TokenMiddlewareFactory>(std::move(token));
}

void ApplyServerSecurity(const SecurityOptions& security, flight::FlightServerOptions* options) {
  if (security.tls()) {
    options->tls_certificates.push_back({security.tls_cert_pem, security.tls_key_pem});
    if (!security.tls_client_ca_pem.empty()) {
      options->verify_client = true;
      options->root_certificates = security.tls_client_ca_pem;
    }
  }
  if (!security.token.empty()) {
    options->middleware.emplace_back("icefloe-token", MakeTokenMiddleware(security.token));
  }
}

flight::FlightClientOptions ClientOptions(const SecurityOptions& security) {
  auto options = flight::FlightClientOptions::Defaults();
  options.tls_root_certs = security.tls_root_certs_pem;
  if (!security.tls_client_ca_pem.empty()) {
    options.cert_chain = security.tls_cert_pem;
    options.private_key = security.tls_key_pem;
  }
  return options;
}

flight::FlightCallOptions CallOptions(const SecurityOptions& security, double timeout_s) {
  flight::FlightCallOptions call;
  call.timeout = flight::TimeoutDuration{timeout_s};
  if (!security.token.empty())
    call.headers.emplace_back("authorization", "Bearer " + security.token);
  return call;
}

}  // namespace icefloe
