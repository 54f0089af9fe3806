// A small HTTP side port for probes and metrics: /healthz, /ready, /metrics.
//
// Kubernetes probes and Prometheus talk plain HTTP, not gRPC, so every server
// runs one of these next to its Flight port. Handlers run on the HTTP server's
// own bounded thread pool and must be thread-safe.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include <arrow/result.h>
#include <arrow/status.h>

namespace icefloe {

struct HttpResponse {
  int status = 200;
  std::string body;
  std::string content_type = "text/plain; charset=utf-8";
};

class HttpServer {
 public:
  using Handler = std::function<HttpResponse()>;

  HttpServer();
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  /// Registers a GET route. Call before Start().
  void Get(const std::string& path, Handler handler);

  /// Binds host:port (0 picks a free port) and serves on a background thread.
  /// Returns the bound port, or IOError naming the address.
  arrow::Result<int> Start(const std::string& host, int port);

  /// Stops serving and joins the thread. Idempotent.
  void Stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace icefloe
