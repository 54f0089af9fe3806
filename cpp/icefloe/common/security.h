// Security settings shared by every server and client: TLS, the cluster
// token, and the key that signs tickets.
//
// - TLS: a server certificate/key pair; optionally a CA whose client
//   certificates are required (mTLS). Outbound calls (head -> node, node ->
//   head) trust `tls_root_certs` and present the same pair for mTLS.
// - Token: when set, every call must carry `authorization: Bearer <token>`;
//   others get UNAUTHENTICATED. Compared in constant time.
// - Ticket key: signs tickets (HMAC-SHA256). Defaults to a key derived from
//   the token, so one secret configures a cluster.
// Secrets come from files or the environment, never from argv, and are never
// logged.
#pragma once

#include <memory>
#include <string>

#include <arrow/flight/client.h>
#include <arrow/flight/server.h>
#include <arrow/result.h>

namespace icefloe {

struct SecurityOptions {
  std::string token;               ///< cluster token (empty: no authentication)
  std::string ticket_key;          ///< explicit ticket key (empty: derived from token)
  std::string tls_cert_pem;        ///< server (and mTLS client) certificate chain
  std::string tls_key_pem;         ///< its private key
  std::string tls_client_ca_pem;   ///< when set, clients must present a cert signed by it
  std::string tls_root_certs_pem;  ///< roots to trust for outbound TLS calls

  bool tls() const { return !tls_cert_pem.empty(); }
  /// The key that signs and verifies tickets ("" when neither token nor key is set).
  std::string TicketKey() const;
};

/// Paths and values as given on the command line or in the environment.
struct SecurityFlags {
  std::string token_file;  ///< file holding the token; ICEFLOE_TOKEN env also works
  std::string token_env;   ///< value of ICEFLOE_TOKEN
  std::string ticket_key_file;
  std::string tls_cert_file;
  std::string tls_key_file;
  std::string tls_client_ca_file;
  std::string tls_root_certs_file;
};

/// Reads the files named in `flags`. IOError naming a file that cannot be read
/// (never its contents); Invalid when only one of cert/key is given.
arrow::Result<SecurityOptions> LoadSecurity(const SecurityFlags& flags);

/// Reads a secret or PEM file, trimming trailing whitespace from secrets.
arrow::Result<std::string> ReadSecretFile(const std::string& path, bool trim);

/// Adds TLS and token checks to a server's options.
void ApplyServerSecurity(const SecurityOptions& security,
                         arrow::flight::FlightServerOptions* options);

/// Client options for outbound calls (TLS roots, mTLS pair).
arrow::flight::FlightClientOptions ClientOptions(const SecurityOptions& security);

/// Call options with the bearer token (when set) and a timeout.
arrow::flight::FlightCallOptions CallOptions(const SecurityOptions& security, double timeout_s);

/// Header carrying the head's signature on node-internal actions.
inline constexpr const char* kActionSignatureHeader = "x-icefloe-signature";
/// Hex HMAC-SHA256 of an action's type and body under the cluster key.
std::string SignAction(const std::string& key, const std::string& type, const std::string& body);
/// OK when the call carries a valid signature of this action under `key`;
/// Unauthorized naming the action and who signs it (`sender`: "the head",
/// "a data node") otherwise, also when `key` is empty (a server without a
/// cluster secret accepts no signed-only action).
arrow::Status VerifyActionSignature(const std::string& key,
                                    const arrow::flight::ServerCallContext& context,
                                    const std::string& type, const std::string& body,
                                    std::string_view sender);

/// Whether a call from gRPC peer `peer` comes from an address `host`
/// resolves to (Kubeflow workers without a cluster secret accept node actions
/// from their leader only).
struct PeerCheck {
  std::string expected;  ///< `host`'s addresses, comma-separated ("" when it does not resolve)
  std::string seen;      ///< the caller's address (PeerAddress(peer), else `peer` itself)
  /// Empty when the call comes from `host`; else why not, in words that
  /// name `host`, the expected and the seen address (never the action or the
  /// caller's port, so every refusal of one caller reads alike).
  std::string refusal;
};
PeerCheck CheckPeerIsHost(const std::string& peer, const std::string& host);

/// OK when the call comes from an address `host` resolves to (CheckPeerIsHost);
/// Unauthorized "action '<type>' is <refusal>" otherwise.
arrow::Status VerifyPeerIsHost(const arrow::flight::ServerCallContext& context,
                               const std::string& host, const std::string& type);

/// The IP address in a gRPC peer string ("ipv4:10.0.0.1:5000",
/// "ipv6:[::1]:5000"); empty when it has none.
std::string PeerAddress(const std::string& peer);

/// The server middleware that enforces the token (exposed for tests).
std::shared_ptr<arrow::flight::ServerMiddlewareFactory> MakeTokenMiddleware(std::string token);

}  // namespace icefloe
