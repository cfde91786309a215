// The serving certificate: loaded from files, validated, swapped atomically on change, and handed
// to every new TLS handshake through OpenSSL's certificate callback (open connections keep theirs).
#pragma once

#include "base/result.h"
#include <openssl/ssl.h>
#include <sys/stat.h>

#include <ctime>
#include <memory>
#include <mutex>
#include <string>

namespace shmguard::server {

struct CertPair {
  X509* cert = nullptr;
  STACK_OF(X509)* chain = nullptr;
  EVP_PKEY* key = nullptr;
  std::time_t not_after = 0;
  std::string subject;
  CertPair() = default;
  CertPair(const CertPair&) = delete;
  CertPair& operator=(const CertPair&) = delete;
  ~CertPair();
};

// Identity of a file's current content as seen through symlinks (Secret volumes swap `..data`).
struct FileStamp {
  dev_t dev = 0;
  ino_t ino = 0;
  off_t size = -1;
  std::int64_t mtime_ns = 0;
  bool operator==(const FileStamp&) const = default;
};
FileStamp stamp_of(const std::string& path);

class CertStore {
 public:
  CertStore(std::string cert_file, std::string key_file)
      : cert_file_(std::move(cert_file)), key_file_(std::move(key_file)) {}

  // Reads both files, checks that the key matches the certificate, and swaps it in.
  // On failure the current pair stays and the failure says why.
  Status load();

  // True when either file changed since the last load attempt.
  bool changed() const;

  std::shared_ptr<const CertPair> current() const;

  // Installs the certificate callback on `ctx`.
  void attach(SSL_CTX* ctx);

 private:
  static int cert_cb(SSL* ssl, void* arg);

  std::string cert_file_;
  std::string key_file_;
  mutable std::mutex mu_;
  std::shared_ptr<const CertPair> current_;
  FileStamp cert_stamp_;
  FileStamp key_stamp_;
};

// Parses a PEM certificate chain and key.
Result<std::shared_ptr<CertPair>> parse_cert_pair(const std::string& cert_pem, const std::string& key_pem);

// The oldest error on this thread's OpenSSL error queue, as text; the queue is cleared.
std::string openssl_error();

}  // namespace shmguard::server
