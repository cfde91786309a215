// An epoll HTTP/1.1 server over non-blocking sockets and (optionally) non-blocking OpenSSL.
// Idle, slow or half-open clients cost a little memory, never a thread: every worker thread
// multiplexes all of its connections, and each request must arrive whole within a deadline.
#pragma once

#include "base/result.h"
#include <openssl/ssl.h>

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
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
  // Per worker: its wake-up eventfd, the connections another worker accepted and handed to it,
  // and how many it holds. Whichever worker wakes for the listening socket gives each new
  // connection to the worker holding fewest, so that a few keep-alive connections (the API
  // server's) are spread over the threads instead of all staying on the one that accepted them.
  struct Inbox {
    int wake_fd = -1;
    std::mutex mu;
    std::vector<int> fds;
    std::atomic<std::size_t> held{0};
  };
  std::vector<std::unique_ptr<Inbox>> inboxes_;
};

}  // namespace shmguard::server
