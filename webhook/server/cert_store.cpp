// Serving-certificate loading and hot swap (see cert_store.h).
#include "server/cert_store.h"

#include "base/text.h"

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <fstream>
#include <sstream>

namespace shmguard::server {
std::string openssl_error() {
  unsigned long e = ERR_get_error();
  ERR_clear_error();
  if (e == 0) return "unknown OpenSSL error";
  char buf[256];
  ERR_error_string_n(e, buf, sizeof buf);
  return buf;
}

namespace {

std::time_t asn1_to_time(const ASN1_TIME* t) {
  std::tm tm{};
  if (ASN1_TIME_to_tm(t, &tm) != 1) return 0;
  return timegm(&tm);
}

}  // namespace

CertPair::~CertPair() {
  if (cert) X509_free(cert);
  if (chain) sk_X509_pop_free(chain, X509_free);
  if (key) EVP_PKEY_free(key);
}

FileStamp stamp_of(const std::string& path) {
  FileStamp s;
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return s;
  s.dev = st.st_dev;
  s.ino = st.st_ino;
  s.size = st.st_size;
  s.mtime_ns = static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  return s;
}

Result<std::shared_ptr<CertPair>> parse_cert_pair(const std::string& cert_pem, const std::string& key_pem) {
  ERR_clear_error();
  auto pair = std::make_shared<CertPair>();
  BIO* cb = BIO_new_mem_buf(cert_pem.data(), static_cast<int>(cert_pem.size()));
  pair->cert = PEM_read_bio_X509(cb, nullptr, nullptr, nullptr);
  if (!pair->cert) {
    BIO_free(cb);
    return Failure{"certificate: no PEM certificate (" + openssl_error() + ")"};
  }
  pair->chain = sk_X509_new_null();
  while (X509* extra = PEM_read_bio_X509(cb, nullptr, nullptr, nullptr)) sk_X509_push(pair->chain, extra);
  ERR_clear_error();  // the loop ends on "no start line"
  BIO_free(cb);
  BIO* kb = BIO_new_mem_buf(key_pem.data(), static_cast<int>(key_pem.size()));
  pair->key = PEM_read_bio_PrivateKey(kb, nullptr, nullptr, nullptr);
  BIO_free(kb);
  if (!pair->key) return Failure{"private key: no PEM private key (" + openssl_error() + ")"};
  if (X509_check_private_key(pair->cert, pair->key) != 1) {
    ERR_clear_error();
    return Failure{"private key does not match the certificate"};
  }
  pair->not_after = asn1_to_time(X509_get0_notAfter(pair->cert));
  char name[256];
  X509_NAME_oneline(X509_get_subject_name(pair->cert), name, sizeof name);
  pair->subject = name;
  return pair;
}

Status CertStore::load() {
  FileStamp cs = stamp_of(cert_file_);
  FileStamp ks = stamp_of(key_file_);
  {
    std::lock_guard<std::mutex> lock(mu_);
    cert_stamp_ = cs;
    key_stamp_ = ks;
  }
  auto cert_pem = read_file(cert_file_);
  if (!cert_pem) return cert_pem.failure_part();
  auto key_pem = read_file(key_file_);
  if (!key_pem) return key_pem.failure_part();
  auto pair = parse_cert_pair(*cert_pem, *key_pem);
  if (!pair) return Failure{pair.error()};
  std::lock_guard<std::mutex> lock(mu_);
  current_ = std::move(*pair);
  return Ok{};
}

bool CertStore::changed() const {
  FileStamp cs = stamp_of(cert_file_);
  FileStamp ks = stamp_of(key_file_);
  std::lock_guard<std::mutex> lock(mu_);
  return !(cs == cert_stamp_) || !(ks == key_stamp_);
}

std::shared_ptr<const CertPair> CertStore::current() const {
  std::lock_guard<std::mutex> lock(mu_);
  return current_;
}

void CertStore::attach(SSL_CTX* ctx) { SSL_CTX_set_cert_cb(ctx, &CertStore::cert_cb, this); }

int CertStore::cert_cb(SSL* ssl, void* arg) {
  auto* self = static_cast<CertStore*>(arg);
  auto pair = self->current();
  if (!pair) return 0;
  // SSL_use_* take their own references, so the pair may be swapped out afterwards.
  if (SSL_use_certificate(ssl, pair->cert) != 1) return 0;
  if (SSL_use_PrivateKey(ssl, pair->key) != 1) return 0;
  if (sk_X509_num(pair->chain) > 0 && SSL_set1_chain(ssl, pair->chain) != 1) return 0;
  return 1;
}

}  // namespace shmguard::server
