// An epoll HTTP/1.1 server over non-blocking sockets and (optionally) non-blocking OpenSSL.
// Idle, slow or half-open clients cost a little memory, never a thread: the worker threads share
// one epoll set over all connections, and each request must arrive whole within a deadline.
#pragma once

#include "base/result.h"
#include <openssl/ssl.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
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

  class Worker;  // a thread waiting on the shared epoll set (event_loop.cpp)
  struct Slot;   // a connection's place: its generation, state and the connection

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
  int ep_ = -1;       // the epoll set every worker waits on
  int wake_fd_ = -1;  // stop()'s wake-up, one count per worker
  std::unique_ptr<Slot[]> slots_;
  std::size_t slot_count_ = 0;  // max_connections
  std::mutex free_mu_;
  std::vector<std::uint32_t> free_;  // slots without a connection
  std::atomic<bool> draining_{false};
  std::atomic<std::int64_t> drain_deadline_{0};
  std::atomic<std::int64_t> last_sweep_{0};

  bool take(Slot& slot, std::uint32_t gen);  // armed -> busy for this generation: the caller holds it
  // The held connection's turn(s) for `events`, until the slot is let go or closed.
  void serve(Slot& slot, std::uint32_t gen, std::uint32_t events, std::int64_t now);
  // busy -> armed; true instead when an event came meanwhile: the caller still holds it, to serve it.
  bool release(Slot& slot, std::uint32_t gen);
  void close(Slot& slot);
  void accept_all(std::int64_t now);
  void maybe_sweep(std::int64_t now);
  void sweep(std::int64_t now);
  void begin_drain(std::int64_t now);
};

}  // namespace shmguard::server
