// An epoll HTTP/1.1 server over non-blocking sockets and (optionally) non-blocking OpenSSL.
// Idle, slow or half-open clients cost a little memory, never a thread: every worker thread
// multiplexes all of its connections, and each request must arrive whole within a deadline.
#pragma once

#include <openssl/ssl.h>

#include <atomic>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "server/http.h"

namespace shmguard::server {

struct LoopOptions {
  int threads = 2;
  std::size_t max_body_bytes = 8 * 1024 * 1024;
  int request_timeout_ms = 10000;  // handshake + whole request, from its first byte
  int idle_timeout_ms = 90000;     // keep-alive connection with no request in progress
  int write_timeout_ms = 10000;
  std::size_t max_connections = 8192;
  int drain_timeout_ms = 5000;     // on stop(): how long in-flight requests may take
};

using Handler = std::function<void(const HttpRequest&, HttpResponse&)>;
// Called for requests the parser refused (for metrics); may be empty.
using RejectHook = std::function<void(int status)>;

class EventLoopServer {
 public:
  // `ssl_ctx` null: plain HTTP. The server does not own the context.
  EventLoopServer(LoopOptions opts, SSL_CTX* ssl_ctx, Handler handler, RejectHook on_reject = {});
  ~EventLoopServer();

  // Binds and listens; port 0 picks a free port. False with `err` on failure.
  bool bind(const std::string& address, int port, std::string& err);
  int port() const { return port_; }

  // Starts the worker threads.
  void start();
  // Stops accepting, lets in-flight requests finish (bounded by drain_timeout_ms), closes idle
  // connections, and joins the workers.
  void stop();

  std::size_t open_connections() const { return open_.load(); }

 private:
  void worker_main(int index);

  LoopOptions opts_;
  SSL_CTX* ssl_ctx_;
  Handler handler_;
  RejectHook on_reject_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  std::atomic<std::size_t> open_{0};
  std::vector<std::thread> workers_;
  std::vector<int> wake_fds_;
};

}  // namespace shmguard::server
