#include "icefloe/common/http_server.h"

#include <thread>

#include <httplib.h>

namespace icefloe {

struct HttpServer::Impl {
  httplib::Server server;
  std::thread thread;
};

HttpServer::HttpServer() : impl_(std::make_unique<Impl>()) {
  impl_->server.set_read_timeout(5, 0);
  impl_->server.set_write_timeout(5, 0);
  impl_->server.set_payload_max_length(64 * 1024);
  impl_->server.new_task_queue = [] { return new httplib::ThreadPool(2); };
}

HttpServer::~HttpServer() { Stop(); }

void HttpServer::Get(const std::string& path, Handler handler) {
  impl_->server.Get(path, [handler](const httplib::Request&, httplib::Response& res) {
    HttpResponse r = handler();
    res.status = r.status;
    res.set_content(r.body, r.content_type.c_str());
  });
}

arrow::Result<int> HttpServer::Start(const std::string& host, int port) {
  int bound = port;
  if (port == 0) {
    bound = impl_->server.bind_to_any_port(host.c_str());
  } else if (!impl_->server.bind_to_port(host.c_str(), port)) {
    bound = -1;
  }
  if (bound < 0) {
    return arrow::Status::IOError("cannot listen for HTTP on ", host, ":", port,
                                  " (address in use or not local?)");
  }
  impl_->thread = std::thread([this] { impl_->server.listen_after_bind(); });
  return bound;
}

void HttpServer::Stop() {
  if (impl_->thread.joinable()) {
    impl_->server.stop();
    impl_->thread.join();
  }
}

}  // namespace icefloe
