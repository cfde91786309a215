// The serving certificate (server/cert_store.h): parsed and checked against its key, bad PEM
// refused with the reason, rotated files noticed and swapped in (through a Secret volume's
// symlinks too), a failed reload keeping the pair that serves, and every new handshake getting
// the current pair while the old one lives on for whoever holds it.
#include "server/cert_store.h"

#include <gtest/gtest.h>
#include <openssl/err.h>
#include <unistd.h>

#include <ctime>
#include <thread>

#include "tls_test_util.h"

using shmguard::server::CertStore;
using shmguard::server::parse_cert_pair;
using shmguard::test::make_ca;
using shmguard::test::make_leaf;
using shmguard::test::Pem;
using shmguard::test::ScratchDir;
using shmguard::test::write_text;

namespace {

std::string subject_of(X509* cert) {
  char name[256];
  X509_NAME_oneline(X509_get_subject_name(cert), name, sizeof name);
  return name;
}

// A client handshake over a memory BIO pair with a server SSL made from `server_ctx`: the
// subject of the certificate the client was served ("" when the handshake failed).
std::string served_subject(SSL_CTX* server_ctx) {
  SSL_CTX* client_ctx = SSL_CTX_new(TLS_client_method());
  SSL* server = SSL_new(server_ctx);
  SSL* client = SSL_new(client_ctx);
  BIO *sb = nullptr, *cb = nullptr;
  BIO_new_bio_pair(&sb, 0, &cb, 0);
  SSL_set_bio(server, sb, sb);
  SSL_set_bio(client, cb, cb);
  SSL_set_accept_state(server);
  SSL_set_connect_state(client);
  bool server_done = false, client_done = false, failed = false;
  for (int i = 0; i < 100 && !(server_done && client_done) && !failed; ++i) {
    for (auto [ssl, done] : {std::pair{client, &client_done}, std::pair{server, &server_done}}) {
      if (*done) continue;
      const int r = SSL_do_handshake(ssl);
      if (r == 1) *done = true;
      else if (const int e = SSL_get_error(ssl, r); e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE) failed = true;
    }
  }
  std::string subject;
  if (!failed && client_done)
    if (X509* peer = SSL_get1_peer_certificate(client)) {
      subject = subject_of(peer);
      X509_free(peer);
    }
  ERR_clear_error();
  SSL_free(client);
  SSL_free(server);
  SSL_CTX_free(client_ctx);
  return subject;
}

// Files change identity by inode, size and mtime; a rewrite within the same nanosecond tick and of
// the same size is what the stamp cannot see, so each rotation here waits for the clock to move.
// tls.crt and tls.key in `dir`, holding `p`.
void write_pair(const ScratchDir& dir, const Pem& p) {
  write_text(dir / "tls.crt", p.cert);
  write_text(dir / "tls.key", p.key);
}

void next_tick() { std::this_thread::sleep_for(std::chrono::milliseconds(5)); }

}  // namespace

TEST(ParseCertPair, ACertificateItsChainAndItsKey) {
  const Pem ca = make_ca();
  const Pem leaf = make_leaf(ca, "shmguard.shmguard.svc", "DNS:shmguard.shmguard.svc", -60, 7200);
  const std::time_t before = std::time(nullptr);
  auto pair = parse_cert_pair(leaf.cert + ca.cert, leaf.key);
  ASSERT_TRUE(pair) << pair.error();
  EXPECT_EQ((*pair)->subject, "/CN=shmguard.shmguard.svc");
  EXPECT_EQ(sk_X509_num((*pair)->chain), 1);  // the CA after the leaf is sent as the chain
  EXPECT_GE((*pair)->not_after, before + 7200 - 5);
  EXPECT_LE((*pair)->not_after, before + 7200 + 5);
  EXPECT_EQ(ERR_peek_error(), 0u) << "the error queue is left clean";
}

TEST(ParseCertPair, BadPemSaysWhichPartAndWhy) {
  const Pem ca = make_ca();
  const Pem leaf = make_leaf(ca, "a", "DNS:a");
  auto no_cert = parse_cert_pair("not a certificate", leaf.key);
  ASSERT_FALSE(no_cert);
  EXPECT_EQ(no_cert.error().rfind("certificate: no PEM certificate (", 0), 0u) << no_cert.error();
  EXPECT_NE(no_cert.error().find("no start line"), std::string::npos) << no_cert.error();

  std::string cut = leaf.cert.substr(0, leaf.cert.size() / 2);  // a truncated copy
  auto truncated = parse_cert_pair(cut, leaf.key);
  ASSERT_FALSE(truncated);
  EXPECT_EQ(truncated.error().rfind("certificate: no PEM certificate (", 0), 0u) << truncated.error();

  auto no_key = parse_cert_pair(leaf.cert, "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n");
  ASSERT_FALSE(no_key);
  EXPECT_EQ(no_key.error().rfind("private key: no PEM private key (", 0), 0u) << no_key.error();

  auto other_key = parse_cert_pair(leaf.cert, make_leaf(ca, "b", "DNS:b").key);
  ASSERT_FALSE(other_key);
  EXPECT_EQ(other_key.error(), "private key does not match the certificate");
  EXPECT_EQ(ERR_peek_error(), 0u) << "no OpenSSL error leaks into the next handshake";
}

TEST(CertStore, ReloadsRotatedFilesAndServesTheNewPair) {
  ScratchDir dir;
  const Pem ca = make_ca();
  write_pair(dir, make_leaf(ca, "first", "DNS:first"));
  CertStore store((dir / "tls.crt").string(), (dir / "tls.key").string());
  EXPECT_EQ(store.current(), nullptr);
  ASSERT_TRUE(store.load());
  EXPECT_FALSE(store.changed());
  const auto held = store.current();
  EXPECT_EQ(held->subject, "/CN=first");

  SSL_CTX* ctx = SSL_CTX_new(TLS_server_method());
  store.attach(ctx);
  EXPECT_EQ(served_subject(ctx), "/CN=first");

  next_tick();
  const Pem second = make_leaf(ca, "second", "DNS:second");
  write_text(dir / "tls.key", second.key);  // the key first: between the writes the pair does not match
  EXPECT_TRUE(store.changed());
  auto half = store.load();
  ASSERT_FALSE(half);
  EXPECT_EQ(half.error(), "private key does not match the certificate");
  EXPECT_EQ(store.current()->subject, "/CN=first") << "a failed reload keeps the pair that serves";
  EXPECT_FALSE(store.changed()) << "the failed attempt is not retried until a file changes again";
  next_tick();
  write_text(dir / "tls.crt", second.cert);
  EXPECT_TRUE(store.changed());
  ASSERT_TRUE(store.load());
  EXPECT_EQ(store.current()->subject, "/CN=second");
  EXPECT_EQ(served_subject(ctx), "/CN=second") << "new handshakes get the new pair";
  EXPECT_EQ(held->subject, "/CN=first") << "whoever held the old pair still has it";
  SSL_CTX_free(ctx);
}

TEST(CertStore, BadPemAndMissingFilesKeepTheCurrentPair) {
  ScratchDir dir;
  const Pem ca = make_ca();
  write_pair(dir, make_leaf(ca, "good", "DNS:good"));
  CertStore store((dir / "tls.crt").string(), (dir / "tls.key").string());
  ASSERT_TRUE(store.load());

  next_tick();
  write_text(dir / "tls.crt", "-----BEGIN CERTIFICATE-----\ngarbage\n-----END CERTIFICATE-----\n");
  EXPECT_TRUE(store.changed());
  auto bad = store.load();
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().rfind("certificate: no PEM certificate (", 0), 0u) << bad.error();
  EXPECT_EQ(store.current()->subject, "/CN=good");

  std::filesystem::remove(dir / "tls.key");
  EXPECT_TRUE(store.changed());
  auto gone = store.load();
  ASSERT_FALSE(gone);
  EXPECT_NE(gone.error().find((dir / "tls.key").string()), std::string::npos) << gone.error();
  EXPECT_EQ(store.current()->subject, "/CN=good");
}

TEST(CertStore, ASecretVolumeSwapThroughSymlinksIsSeen) {
  // The kubelet writes a Secret into a new timestamped directory and swaps the `..data` symlink;
  // tls.crt and tls.key are symlinks through it and never change themselves.
  ScratchDir dir;
  const Pem ca = make_ca();
  for (const char* v : {"v1", "v2"}) {
    std::filesystem::create_directory(dir / v);
    const Pem p = make_leaf(ca, v, std::string("DNS:") + v);
    write_text(dir / v / "tls.crt", p.cert);
    write_text(dir / v / "tls.key", p.key);
  }
  std::filesystem::create_directory_symlink("v1", dir / "..data");
  std::filesystem::create_symlink("..data/tls.crt", dir / "tls.crt");
  std::filesystem::create_symlink("..data/tls.key", dir / "tls.key");
  CertStore store((dir / "tls.crt").string(), (dir / "tls.key").string());
  ASSERT_TRUE(store.load());
  EXPECT_EQ(store.current()->subject, "/CN=v1");
  EXPECT_FALSE(store.changed());

  std::filesystem::create_directory_symlink("v2", dir / "..data_tmp");
  std::filesystem::rename(dir / "..data_tmp", dir / "..data");  // atomic, as the kubelet does
  EXPECT_TRUE(store.changed());
  ASSERT_TRUE(store.load());
  EXPECT_EQ(store.current()->subject, "/CN=v2");
}

TEST(CertStore, NoPairMeansNoHandshake) {
  ScratchDir dir;
  CertStore store((dir / "tls.crt").string(), (dir / "tls.key").string());
  EXPECT_FALSE(store.load());
  SSL_CTX* ctx = SSL_CTX_new(TLS_server_method());
  store.attach(ctx);
  EXPECT_EQ(served_subject(ctx), "");
  SSL_CTX_free(ctx);
}
