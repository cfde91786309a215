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

class Transport {
 public:
  virtual ~Transport() = default;
  virtual IoResult read(char* buf, std::size_t len) = 0;
  virtual IoResult write(const char* buf, std::size_t len) = 0;
  // True when more decrypted bytes wait inside the transport (no socket event will announce them).
  virtual bool buffered() const { return false; }
  // Ends our direction: a TLS close_notify, then a TCP half-close. The socket stays readable.
  virtual void shutdown_write() = 0;
  // After kError: why a TLS handshake failed, in OpenSSL's words ("http request", "tlsv1 alert
  // unknown ca": the client does not trust our certificate); "" when the failure was no handshake's.
  virtual std::string failure_reason() const { return ""; }
};

// `fd` stays owned by the caller.
std::unique_ptr<Transport> plain_transport(int fd);
// Takes a new SSL for `fd` in accept state (the first read drives the handshake); null when
// OpenSSL cannot make one.
std::unique_ptr<Transport> tls_transport(SSL_CTX* ctx, int fd);

}  // namespace shmguard::server
