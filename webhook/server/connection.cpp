// One HTTP connection's state machine (see connection.h).
#include "server/connection.h"

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

namespace shmguard::server {
namespace {

constexpr std::size_t kReadChunk = 16 * 1024;
constexpr std::size_t kMaxLingerBytes = 32 * 1024 * 1024;  // lets a client finish sending an oversize body
constexpr int kLingerMs = 2000;

Wait wait_for(Io io) { return io == Io::kWantWrite ? Wait::kWrite : Wait::kRead; }

}  // namespace

Connection::Connection(int fd, std::unique_ptr<Transport> transport, const LoopOptions& opts, const Handler& handler,
                       const RejectHook& on_reject, std::int64_t now_ms)
    : fd_(fd),
      transport_(std::move(transport)),
      opts_(opts),
      handler_(handler),
      on_reject_(on_reject),
      connected_at_(now_ms),
      deadline_(now_ms + opts.request_timeout_ms) {}  // the TLS handshake counts as part of the request

Connection::~Connection() {
  transport_.reset();  // SSL_free before the descriptor goes
  ::close(fd_);
}

Wait Connection::on_ready(std::int64_t now, Phase phase) {
  for (;;) {
    switch (state_) {
      case State::kReading: {
        Wait w = read_request(now, phase);
        if (state_ == State::kReading) return w;
        break;  // a response is ready: write it now
      }
      case State::kWriting: {
        Wait w = write_response(now);
        if (state_ == State::kWriting) return w;  // blocked, or failed
        break;  // written: the next request, or lingering before the close
      }
      case State::kLinger:
        return linger();
    }
  }
}

Wait Connection::read_request(std::int64_t now, Phase phase) {
  bool eof = false;
  Io blocked = Io::kWantRead;
  char buf[kReadChunk];
  while (in_.size() < opts_.max_body_bytes + kMaxHeaderBytes + kReadChunk) {
    IoResult r = transport_->read(buf, sizeof buf);
    if (r.status == Io::kEof) {
      eof = true;
      break;
    }
    if (r.status == Io::kError) {
      tell_tls_failure();
      return Wait::kClose;
    }
    if (r.status != Io::kOk) {
      blocked = r.status;
      break;
    }
    in_.append(buf, r.bytes);
    // A short read with nothing buffered in TLS means the socket is drained: skip the read that
    // would only return EAGAIN (level-triggered epoll reports anything that comes later).
    if (r.bytes < sizeof buf && !transport_->buffered()) break;
  }
  if (!in_.empty() && !request_started_) {
    request_started_ = true;
    deadline_ = now + opts_.request_timeout_ms;
  }
  if (handle_buffered(now, phase)) return Wait::kWrite;
  if (eof || (phase == Phase::kStopping && idle(now))) return Wait::kClose;
  if (!request_started_) deadline_ = now + opts_.idle_timeout_ms;
  return wait_for(blocked);
}

Wait Connection::on_error() {
  int err = 0;
  socklen_t len = sizeof err;
  ::getsockopt(fd_, SOL_SOCKET, SO_ERROR, &err, &len);
  transport_->socket_failed(err);
  tell_tls_failure();
  return Wait::kClose;
}

void Connection::tell_tls_failure() const {
  if (!opts_.on_tls_failure) return;
  if (TlsFailure why = transport_->failure(); !why.reason.empty()) opts_.on_tls_failure(why);
}

bool Connection::handle_buffered(std::int64_t now, Phase phase) {
  if (in_.empty()) return false;
  HttpRequest req;
  auto pr = parse_request(in_, opts_.max_body_bytes, req);
  if (pr.status == ParseStatus::kComplete) {
    in_.erase(0, pr.consumed);
    HttpResponse res;
    try {
      handler_(req, res);
    } catch (...) {  // a handler's trouble is the client's 500, never a dead server
      res = HttpResponse{};
      res.status = 500;
      res.body = "internal error\n";
    }
    respond(res, res.close || !req.keep_alive || phase != Phase::kServing, now);
    return true;
  }
  if (pr.status == ParseStatus::kError) {
    if (on_reject_) on_reject_(pr.error_status);
    HttpResponse res;
    res.status = pr.error_status;
    res.body = pr.message + "\n";
    in_.clear();
    respond(res, true, now);
    return true;
  }
  return false;  // incomplete: wait for more
}

void Connection::respond(const HttpResponse& res, bool close, std::int64_t now) {
  HttpResponse r = res;
  r.close = close;
  out_ = format_response(r);
  out_off_ = 0;
  ++served_;
  close_after_ = close;
  state_ = State::kWriting;
  deadline_ = now + opts_.write_timeout_ms;
}

Wait Connection::write_response(std::int64_t now) {
  while (out_off_ < out_.size()) {
    IoResult r = transport_->write(out_.data() + out_off_, std::min<std::size_t>(out_.size() - out_off_, 1 << 20));
    if (r.status == Io::kOk) {
      out_off_ += r.bytes;
      continue;
    }
    if (r.status == Io::kWantRead || r.status == Io::kWantWrite) return wait_for(r.status);
    return Wait::kClose;
  }
  out_.clear();
  out_.shrink_to_fit();
  out_off_ = 0;
  if (close_after_) {
    // Half-close and discard what the client still sends, so the response is not lost to a
    // reset caused by unread data (e.g. the body of a 413).
    transport_->shutdown_write();
    state_ = State::kLinger;
    deadline_ = now + kLingerMs;
    return Wait::kRead;
  }
  state_ = State::kReading;
  request_started_ = false;
  if (in_.capacity() > 64 * 1024 && in_.empty()) in_.shrink_to_fit();
  return Wait::kRead;
}

Wait Connection::linger() {
  char buf[kReadChunk];
  for (;;) {
    ssize_t n = ::recv(fd_, buf, sizeof buf, 0);  // raw bytes: nothing of it is read as TLS any more
    if (n > 0) {
      lingered_ += static_cast<std::size_t>(n);
      if (lingered_ > kMaxLingerBytes) return Wait::kClose;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return Wait::kRead;
    return Wait::kClose;
  }
}

}  // namespace shmguard::server
