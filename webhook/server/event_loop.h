// An epoll HTTP/1.1 server over non-blocking sockets and (optionally) non-blocking OpenSSL.
// Idle, slow or half-open clients cost a little memory, never a thread: every worker thread
// multiplexes all of its connections, and each request must arrive whole within a deadline.
#pragma once

#include "base/result.h"
#include <openssl/ssl.h>

#include <atomic>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "server/connection.h"

namespace shmguard::server {

class EventLoopServer {
 public:
  // `ssl_ctx` null: plain HTTP. The server does not own the context.
  EventLoopServer(LoopOptions opts, SSL_CTX* ssl_ctx, Handler handler, RejectHook on_reject = {});
  ~EventLoopServer();

  // Binds and listens; port 0 picks a free port. The failure names the address and the reason.
  Status bind(const std::string& address, int port);
  int port() const { return port_; }

  // Starts the worker threads.
  void start();
  // From now on every response closes its connection (the phase before stop()).
  void close_after_responses() { closing_ = true; }
  // Stops accepting, lets in-flight requests finish (bounded by drain_timeout_ms), closes idle
  // connections, and joins the workers.
  void stop();

  class Worker;  // one epoll set and the connections it owns (event_loop.cpp)

 private:
  friend class Worker;

  LoopOptions opts_;
  SSL_CTX* ssl_ctx_;
  Handler handler_;
  RejectHook on_reject_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> closing_{false};
  std::atomic<bool> stopping_{false};
  std::atomic<std::size_t> open_{0};
  std::vector<std::thread> workers_;
  std::vector<int> wake_fds_;
};

}  // namespace shmguard::server
