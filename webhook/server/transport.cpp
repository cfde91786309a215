// Plain and TLS transports (see transport.h).
#include "server/transport.h"

#include <openssl/err.h>
#include <sys/socket.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <string>

namespace shmguard::server {
namespace {

// A handshake the socket ended: errno `sys` of a failed read or write (0: the peer closed).
TlsFailure socket_failure(int sys) {
  if (sys == 0) return {kTlsConnectionClosed, "end of stream"};
  if (sys == ECONNRESET || sys == EPIPE) return {kTlsConnectionReset, std::strerror(sys)};
  return {std::strerror(sys), std::strerror(sys)};  // "Connection timed out"
}

// A handshake OpenSSL failed, `err` the first error on its queue.
TlsFailure openssl_failure(unsigned long err) {
  char text[256];
  ERR_error_string_n(err, text, sizeof text);
  if (ERR_GET_LIB(err) == ERR_LIB_SSL && ERR_GET_REASON(err) == SSL_R_UNEXPECTED_EOF_WHILE_READING)
    return {kTlsConnectionClosed, text};
  if (ERR_GET_LIB(err) == ERR_LIB_SYS) return {socket_failure(ERR_GET_REASON(err)).reason, text};
  if (const char* why = ERR_reason_error_string(err)) return {why, text};
  return {"OpenSSL error " + std::to_string(ERR_GET_REASON(err)), text};
}

class Plain final : public Transport {
 public:
  explicit Plain(int fd) : fd_(fd) {}

  IoResult read(char* buf, std::size_t len) override {
    for (;;) {
      ssize_t n = ::recv(fd_, buf, len, 0);
      if (n > 0) return {Io::kOk, static_cast<std::size_t>(n)};
      if (n == 0) return {Io::kEof};
      if (errno == EINTR) continue;
      return {errno == EAGAIN || errno == EWOULDBLOCK ? Io::kWantRead : Io::kError};
    }
  }

  IoResult write(const char* buf, std::size_t len) override {
    for (;;) {
      ssize_t n = ::send(fd_, buf, len, MSG_NOSIGNAL);
      if (n >= 0) return {Io::kOk, static_cast<std::size_t>(n)};
      if (errno == EINTR) continue;
      return {errno == EAGAIN || errno == EWOULDBLOCK ? Io::kWantWrite : Io::kError};
    }
  }

  void shutdown_write() override { ::shutdown(fd_, SHUT_WR); }

 private:
  int fd_;
};

class Tls final : public Transport {
 public:
  Tls(SSL* ssl, int fd) : ssl_(ssl), fd_(fd) {}
  ~Tls() override { SSL_free(ssl_); }

  IoResult read(char* buf, std::size_t len) override {
    int n = SSL_read(ssl_, buf, static_cast<int>(std::min<std::size_t>(len, INT_MAX)));
    if (n > 0) return {Io::kOk, static_cast<std::size_t>(n)};
    return {status(n, Io::kEof)};
  }

  IoResult write(const char* buf, std::size_t len) override {
    int n = SSL_write(ssl_, buf, static_cast<int>(std::min<std::size_t>(len, INT_MAX)));
    if (n > 0) return {Io::kOk, static_cast<std::size_t>(n)};
    return {status(n, Io::kError)};
  }

  bool buffered() const override { return SSL_pending(ssl_) > 0; }

  void shutdown_write() override {
    SSL_shutdown(ssl_);
    ERR_clear_error();
    ::shutdown(fd_, SHUT_WR);
  }

 private:
  // What an SSL_read/SSL_write result of `n` <= 0 means; `on_close` for a clean close_notify.
  Io status(int n, Io on_close) {
    const int sys = n < 0 ? errno : 0;  // before anything else can change it
    int e = SSL_get_error(ssl_, n);
    if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE && e != SSL_ERROR_ZERO_RETURN &&
        !SSL_is_init_finished(ssl_))
      failure_ = handshake_failure(e, sys);
    ERR_clear_error();  // the thread's error queue must not leak into the next connection
    switch (e) {
      case SSL_ERROR_WANT_READ: return Io::kWantRead;
      case SSL_ERROR_WANT_WRITE: return Io::kWantWrite;
      case SSL_ERROR_ZERO_RETURN: return on_close;
      default: return Io::kError;
    }
  }

  static TlsFailure handshake_failure(int e, int sys) {
    if (unsigned long err = ERR_peek_error(); err != 0) return openssl_failure(err);
    if (e == SSL_ERROR_SYSCALL) return socket_failure(sys);
    return {"handshake error " + std::to_string(e), "SSL_get_error " + std::to_string(e)};
  }

  void socket_failed(int err) override {
    if (!SSL_is_init_finished(ssl_) && failure_.reason.empty()) failure_ = socket_failure(err ? err : ECONNRESET);
  }

  TlsFailure failure() const override { return failure_; }

  SSL* ssl_;
  int fd_;
  TlsFailure failure_;
};

}  // namespace

std::unique_ptr<Transport> plain_transport(int fd) { return std::make_unique<Plain>(fd); }

std::unique_ptr<Transport> tls_transport(SSL_CTX* ctx, int fd) {
  SSL* ssl = SSL_new(ctx);
  if (!ssl) {
    ERR_clear_error();
    return nullptr;
  }
  SSL_set_fd(ssl, fd);
  SSL_set_accept_state(ssl);
  return std::make_unique<Tls>(ssl, fd);
}

}  // namespace shmguard::server
