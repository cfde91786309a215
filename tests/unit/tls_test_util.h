// What the TLS unit tests (access_test, cert_store_test, transport_test) share: a CA and the
// certificates it signs, made in memory with OpenSSL (P-256 keys: quick to make), a scratch
// directory, files, base64. Nothing here comes from the code under test.
#pragma once

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>

namespace shmguard::test {

struct Pem {
  std::string cert;
  std::string key;
};

namespace detail {

inline void check(bool ok, const char* what) {
  if (!ok) throw std::runtime_error(std::string("test certificate: ") + what);
}

inline std::string bio_text(BIO* bio) {
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio, &data);
  return std::string(data, static_cast<std::size_t>(n));
}

inline std::string key_pem(EVP_PKEY* key) {
  std::unique_ptr<BIO, decltype(&BIO_free)> bio(BIO_new(BIO_s_mem()), BIO_free);
  check(PEM_write_bio_PrivateKey(bio.get(), key, nullptr, nullptr, 0, nullptr, nullptr) == 1, "key PEM");
  return bio_text(bio.get());
}

inline std::string cert_pem(X509* cert) {
  std::unique_ptr<BIO, decltype(&BIO_free)> bio(BIO_new(BIO_s_mem()), BIO_free);
  check(PEM_write_bio_X509(bio.get(), cert) == 1, "certificate PEM");
  return bio_text(bio.get());
}

inline void add_ext(X509* cert, X509* issuer, int nid, const std::string& value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str());
  check(ext != nullptr, "extension");
  X509_add_ext(cert, ext, -1);
  X509_EXTENSION_free(ext);
}

// A certificate for `cn` valid from `from_s` to `to_s` seconds from now, signed by `issuer`
// (self-signed when null); `sans` as OpenSSL writes them ("IP:127.0.0.1,DNS:localhost").
inline Pem make_cert(const std::string& cn, const Pem* issuer, const std::string& sans, bool ca,
                     long from_s = -60, long to_s = 86400) {
  std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)> key(EVP_EC_gen("P-256"), EVP_PKEY_free);
  check(key != nullptr, "key");
  std::unique_ptr<X509, decltype(&X509_free)> cert(X509_new(), X509_free);
  X509_set_version(cert.get(), 2);
  static long serial = 1;
  ASN1_INTEGER_set(X509_get_serialNumber(cert.get()), ++serial);
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), from_s);
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), to_s);
  X509_set_pubkey(cert.get(), key.get());
  X509_NAME* name = X509_get_subject_name(cert.get());
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1, 0);
  std::unique_ptr<X509, decltype(&X509_free)> issuer_cert(nullptr, X509_free);
  std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)> issuer_key(nullptr, EVP_PKEY_free);
  if (issuer) {
    std::unique_ptr<BIO, decltype(&BIO_free)> cb(BIO_new_mem_buf(issuer->cert.data(), static_cast<int>(issuer->cert.size())), BIO_free);
    std::unique_ptr<BIO, decltype(&BIO_free)> kb(BIO_new_mem_buf(issuer->key.data(), static_cast<int>(issuer->key.size())), BIO_free);
    issuer_cert.reset(PEM_read_bio_X509(cb.get(), nullptr, nullptr, nullptr));
    issuer_key.reset(PEM_read_bio_PrivateKey(kb.get(), nullptr, nullptr, nullptr));
    check(issuer_cert && issuer_key, "issuer");
  }
  X509* signer = issuer ? issuer_cert.get() : cert.get();
  X509_set_issuer_name(cert.get(), X509_get_subject_name(signer));
  add_ext(cert.get(), signer, NID_basic_constraints, ca ? "critical,CA:TRUE" : "CA:FALSE");
  if (ca) add_ext(cert.get(), signer, NID_key_usage, "critical,keyCertSign,cRLSign");
  if (!sans.empty()) add_ext(cert.get(), signer, NID_subject_alt_name, sans);
  check(X509_sign(cert.get(), issuer ? issuer_key.get() : key.get(), EVP_sha256()) > 0, "sign");
  return {cert_pem(cert.get()), key_pem(key.get())};
}

}  // namespace detail

inline Pem make_ca(const std::string& cn = "shmguard test CA") { return detail::make_cert(cn, nullptr, "", true); }

// A serving (or client) certificate for `cn` with `sans`, signed by `ca`.
inline Pem make_leaf(const Pem& ca, const std::string& cn, const std::string& sans, long from_s = -60,
                     long to_s = 86400) {
  return detail::make_cert(cn, &ca, sans, false, from_s, to_s);
}

// A fresh directory under the system's temp dir, removed with its contents at the end of scope.
class ScratchDir {
 public:
  ScratchDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "shmguard-test-XXXXXX").string();
    if (!mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
    path_ = tmpl;
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

inline void write_text(const std::filesystem::path& p, const std::string& text) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out << text;
  if (!out) throw std::runtime_error("cannot write " + p.string());
}

inline std::string base64_encode(const std::string& in) {
  std::string out(4 * ((in.size() + 2) / 3) + 1, '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(in.data()), static_cast<int>(in.size()));
  out.resize(static_cast<std::size_t>(n));
  return out;
}

}  // namespace shmguard::test
