// Plain and TLS bytes behind one small interface (the shape of Envoy's transport sockets), so the
// connection logic that faces hostile clients is written once. Both are non-blocking: a call
// moves what it can and says what it is waiting for.
#pragma once

#include <openssl/ssl.h>

#include <cstddef>
#include <memory>
#include <string>

namespace shmguard::server {

enum class Io {
  kOk,         // `bytes` moved
  kWantRead,   // nothing now; call again when the socket is readable
  kWantWrite,  // nothing now; call again when the socket is writable (TLS may need to write to read)
  kEof,        // the peer closed cleanly
  kError,      // give up on the connection
};

struct IoResult {
  Io status;
  std::size_t bytes = 0;
};

// Why a client's TLS handshake failed. `reason` is the metric's label, a closed set: the peer's
// reset ("connection reset") or close ("connection closed": OpenSSL 3's "unexpected eof while
// reading") before the handshake was done, else OpenSSL's reason ("wrong version number",
// "http request", "tlsv1 alert unknown ca": the client does not trust our certificate).
// `detail` is for the log: OpenSSL's whole error string (ERR_error_string_n, with its code) or
// the system's words for a socket error.
struct TlsFailure {
  std::string reason;
  std::string detail;
};
inline constexpr const char* kTlsConnectionReset = "connection reset";
inline constexpr const char* kTlsConnectionClosed = "connection closed";

class Transport {
 public:
  virtual ~Transport() = default;
  virtual IoResult read(char* buf, std::size_t len) = 0;
  virtual IoResult write(const char* buf, std::size_t len) = 0;
  // True when more decrypted bytes wait inside the transport (no socket event will announce them).
  virtual bool buffered() const { return false; }
  // Ends our direction: a TLS close_notify, then a TCP half-close. The socket stays readable.
  virtual void shutdown_write() = 0;
  // The socket itself failed with `err` (SO_ERROR, when epoll reports EPOLLERR): during a TLS
  // handshake, a failed handshake, which failure() then tells.
  virtual void socket_failed(int /*err*/) {}
  // After kError or socket_failed(): why a TLS handshake failed; an empty reason when the failure
  // was no handshake's (plain transport, or after the handshake).
  virtual TlsFailure failure() const { return {}; }
};

// `fd` stays owned by the caller.
std::unique_ptr<Transport> plain_transport(int fd);
// Takes a new SSL for `fd` in accept state (the first read drives the handshake); null when
// OpenSSL cannot make one.
std::unique_ptr<Transport> tls_transport(SSL_CTX* ctx, int fd);

}  // namespace shmguard::server
