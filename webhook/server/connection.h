// One HTTP/1.1 connection over a Transport: reads a request whole (within a deadline), hands it
// to the handler, writes the response, keeps the connection alive or closes it gently. Knows
// nothing of epoll: each call says what to wait for next.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "server/http.h"
#include "server/transport.h"

namespace shmguard::server {

struct LoopOptions {
  int threads = 2;
  std::size_t max_body_bytes = 8 * 1024 * 1024;
  int request_timeout_ms = 10000;  // handshake + whole request, from its first byte
  int idle_timeout_ms = 90000;     // keep-alive connection with no request in progress
  int write_timeout_ms = 10000;
  std::size_t max_connections = 8192;
  int drain_timeout_ms = 5000;     // on stop(): how long in-flight requests may take
  const char* name = "http";       // worker threads are named NAME-0, NAME-1... (top -H, /proc)
  // Called when a client's TLS handshake fails, with why (for the log and metrics); may be empty.
  std::function<void(const TlsFailure& why)> on_tls_failure{};
};

using Handler = std::function<void(const HttpRequest&, HttpResponse&)>;
// Called for requests the parser refused (for metrics); may be empty.
using RejectHook = std::function<void(int status)>;

// What the connection waits for next.
enum class Wait { kRead, kWrite, kClose };

// Where the server is in its life: serving; closing (about to stop: every response closes its
// connection, so clients reconnect, through the Service, to a replica that stays); stopping (no
// new connections; those between requests close, in-flight requests finish).
enum class Phase { kServing, kClosing, kStopping };

// A client that connected this recently has not had time to send its first request yet: a stop
// does not count its connection as idle.
inline constexpr std::int64_t kFirstRequestGraceMs = 1000;

class Connection {
 public:
  Connection(int fd, std::unique_ptr<Transport> transport, const LoopOptions& opts, const Handler& handler,
             const RejectHook& on_reject, std::int64_t now_ms);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // The socket is ready: go as far as possible without blocking.
  Wait on_ready(std::int64_t now_ms, Phase phase);
  // The socket reported an error (EPOLLERR: the peer's reset, mostly): told as a failed handshake
  // when it came during one; the connection is to be closed.
  Wait on_error();

  int fd() const { return fd_; }
  bool expired(std::int64_t now_ms) const { return now_ms > deadline_; }
  // Nothing is lost by closing it: between requests, after one or a while after connecting.
  bool idle(std::int64_t now_ms) const {
    return state_ == State::kReading && !request_started_ &&
           (served_ > 0 || now_ms - connected_at_ > kFirstRequestGraceMs);
  }
  bool lingering() const { return state_ == State::kLinger; }

 private:
  enum class State { kReading, kWriting, kLinger };

  Wait read_request(std::int64_t now, Phase phase);
  Wait write_response(std::int64_t now);
  Wait linger();
  void respond(const HttpResponse& res, bool close, std::int64_t now);
  void tell_tls_failure() const;  // the transport's failure, if a handshake's, to on_tls_failure
  // True when a whole request (or a refused one) is buffered and answered.
  bool handle_buffered(std::int64_t now, Phase phase);

  int fd_;
  std::unique_ptr<Transport> transport_;
  const LoopOptions& opts_;
  const Handler& handler_;
  const RejectHook& on_reject_;
  State state_ = State::kReading;
  std::string in_;
  std::string out_;
  std::size_t out_off_ = 0;
  bool close_after_ = false;
  bool request_started_ = false;
  std::int64_t connected_at_;
  int served_ = 0;  // responses written
  std::int64_t deadline_;
  std::size_t lingered_ = 0;
};

}  // namespace shmguard::server
