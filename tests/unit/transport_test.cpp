// Plain and TLS transports (server/transport.h) over real sockets: the handshake driven by the
// first read, bytes both ways, what waits inside TLS (buffered), a clean close_notify, and the
// reason a failed handshake gives: a client that does not trust us, one speaking plain HTTP, one
// that closes or resets before the handshake is done.
#include "server/transport.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <string>

#include "server/cert_store.h"
#include "tls_test_util.h"

namespace server = shmguard::server;
using server::Io;
using shmguard::test::make_ca;
using shmguard::test::make_leaf;
using shmguard::test::Pem;

namespace {

// As `shmguard serve` does (serve_command.cpp): OpenSSL writes to the socket with write(2), and a
// peer gone mid-handshake must be an error, not a SIGPIPE.
const bool kSigpipeIgnored = [] { return ::signal(SIGPIPE, SIG_IGN) != SIG_ERR; }();

void nonblocking(int fd) { fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK); }

struct SocketPair {
  int server = -1, client = -1;
  SocketPair() {
    int fds[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, fds) != 0) throw std::runtime_error("socketpair");
    server = fds[0];
    client = fds[1];
    nonblocking(server);
    nonblocking(client);
  }
  ~SocketPair() {
    if (server >= 0) close(server);
    if (client >= 0) close(client);
  }
  void close_client() {
    close(client);
    client = -1;
  }
};

// A TCP connection on loopback (a reset needs TCP: SO_LINGER 0 makes close() send an RST).
struct TcpPair {
  int server = -1, client = -1;
  TcpPair() {
    const int listener = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    if (bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || listen(listener, 1) != 0 ||
        getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len) != 0)
      throw std::runtime_error("listen");
    client = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(client, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) throw std::runtime_error("connect");
    server = accept(listener, nullptr, nullptr);
    close(listener);
    nonblocking(server);
  }
  ~TcpPair() {
    if (server >= 0) close(server);
    if (client >= 0) close(client);
  }
  void reset_client() {
    linger l{1, 0};
    setsockopt(client, SOL_SOCKET, SO_LINGER, &l, sizeof l);
    close(client);
    client = -1;
  }
};

class Tls : public ::testing::Test {
 protected:
  void SetUp() override {
    ca = make_ca();
    serving = make_leaf(ca, "shmguard.shmguard.svc", "DNS:shmguard.shmguard.svc");
    auto pair = server::parse_cert_pair(serving.cert, serving.key);
    ASSERT_TRUE(pair) << pair.error();
    server_ctx = SSL_CTX_new(TLS_server_method());
    SSL_CTX_use_certificate(server_ctx, (*pair)->cert);
    SSL_CTX_use_PrivateKey(server_ctx, (*pair)->key);
    client_ctx = client_context(ca.cert);
  }
  void TearDown() override {
    if (client) SSL_free(client);
    SSL_CTX_free(client_ctx);
    SSL_CTX_free(server_ctx);
    ERR_clear_error();
  }

  // A client that verifies the server against `ca_pem` and the service's name.
  static SSL_CTX* client_context(const std::string& ca_pem) {
    SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
    BIO* b = BIO_new_mem_buf(ca_pem.data(), static_cast<int>(ca_pem.size()));
    X509* c = PEM_read_bio_X509(b, nullptr, nullptr, nullptr);
    X509_STORE_add_cert(SSL_CTX_get_cert_store(ctx), c);
    X509_free(c);
    BIO_free(b);
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
    X509_VERIFY_PARAM_set1_host(SSL_CTX_get0_param(ctx), "shmguard.shmguard.svc", 0);
    return ctx;
  }

  // Drives both ends until the server's first read returns something other than "want": the
  // handshake is then done (or failed) and `first` holds that read's result.
  server::IoResult handshake(server::Transport& t, int client_fd, char* buf, std::size_t len) {
    client = SSL_new(client_ctx);
    SSL_set_fd(client, client_fd);
    SSL_set_connect_state(client);
    for (int i = 0; i < 200; ++i) {
      if (!client_done) {
        const int r = SSL_do_handshake(client);
        if (r == 1) client_done = true;
        else if (int e = SSL_get_error(client, r); e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE) client_failed = true;
      }
      const auto got = t.read(buf, len);
      if (got.status != Io::kWantRead && got.status != Io::kWantWrite) return got;
      if (client_done && i > 10) return got;  // the server waits for data now
      if (client_failed) {
        // The client's alert is on its way; one more read sees it.
        return t.read(buf, len);
      }
    }
    return {Io::kError};
  }

  Pem ca, serving;
  SSL_CTX* server_ctx = nullptr;
  SSL_CTX* client_ctx = nullptr;
  SSL* client = nullptr;
  bool client_done = false, client_failed = false;
};

}  // namespace

TEST(Plain, BytesBothWaysThenWantReadThenEof) {
  SocketPair p;
  auto t = server::plain_transport(p.server);
  char buf[64];
  EXPECT_EQ(t->read(buf, sizeof buf).status, Io::kWantRead);
  ASSERT_EQ(write(p.client, "ping", 4), 4);
  auto r = t->read(buf, sizeof buf);
  ASSERT_EQ(r.status, Io::kOk);
  EXPECT_EQ(std::string(buf, r.bytes), "ping");
  auto w = t->write("pong", 4);
  ASSERT_EQ(w.status, Io::kOk);
  EXPECT_EQ(w.bytes, 4u);
  ASSERT_EQ(read(p.client, buf, sizeof buf), 4);
  EXPECT_EQ(std::string(buf, 4), "pong");
  EXPECT_FALSE(t->buffered());
  t->shutdown_write();
  EXPECT_EQ(read(p.client, buf, sizeof buf), 0) << "the half-close reaches the peer";
  p.close_client();
  EXPECT_EQ(t->read(buf, sizeof buf).status, Io::kEof);
  EXPECT_EQ(t->failure().reason, "") << "a plain transport has no handshake to fail";
}

TEST(Plain, WritingToAClosedPeerIsAnErrorNotASignal) {
  SocketPair p;
  auto t = server::plain_transport(p.server);
  p.close_client();
  EXPECT_EQ(t->write("x", 1).status, Io::kError);  // MSG_NOSIGNAL: EPIPE, no SIGPIPE
}

TEST_F(Tls, HandshakeThenBytesBothWaysAndACleanClose) {
  SocketPair p;
  auto t = server::tls_transport(server_ctx, p.server);
  ASSERT_NE(t, nullptr);
  char buf[16];
  const auto first = handshake(*t, p.client, buf, sizeof buf);
  ASSERT_TRUE(client_done);
  EXPECT_EQ(first.status, Io::kWantRead);
  EXPECT_EQ(t->failure().reason, "");

  const std::string request(100, 'r');
  ASSERT_EQ(SSL_write(client, request.data(), static_cast<int>(request.size())), 100);
  std::string got;
  auto r = t->read(buf, sizeof buf);
  ASSERT_EQ(r.status, Io::kOk);
  got.append(buf, r.bytes);
  EXPECT_TRUE(t->buffered()) << "the rest of the record waits inside TLS, announced by no socket event";
  while (t->buffered()) {
    r = t->read(buf, sizeof buf);
    ASSERT_EQ(r.status, Io::kOk);
    got.append(buf, r.bytes);
  }
  EXPECT_EQ(got, request);

  ASSERT_EQ(t->write("answer", 6).bytes, 6u);
  char cbuf[16];
  int n = -1;
  for (int i = 0; i < 100 && n <= 0; ++i) n = SSL_read(client, cbuf, sizeof cbuf);
  ASSERT_EQ(n, 6);
  EXPECT_EQ(std::string(cbuf, 6), "answer");

  SSL_shutdown(client);  // the client's close_notify
  EXPECT_EQ(t->read(buf, sizeof buf).status, Io::kEof);
  EXPECT_EQ(t->failure().reason, "") << "a close after the handshake is no handshake failure";
  t->shutdown_write();
  EXPECT_EQ(SSL_read(client, cbuf, sizeof cbuf), 0);
  EXPECT_EQ(SSL_get_error(client, 0), SSL_ERROR_ZERO_RETURN) << "our close_notify reached the client";
}

TEST_F(Tls, AClientThatDoesNotTrustUsSaysUnknownCa) {
  SSL_CTX_free(client_ctx);
  client_ctx = client_context(make_ca("another CA").cert);
  SocketPair p;
  auto t = server::tls_transport(server_ctx, p.server);
  char buf[16];
  const auto r = handshake(*t, p.client, buf, sizeof buf);
  EXPECT_TRUE(client_failed);
  EXPECT_EQ(r.status, Io::kError);
  const auto why = t->failure();
  EXPECT_EQ(why.reason, "tlsv1 alert unknown ca");
  EXPECT_NE(why.detail.find("error:"), std::string::npos) << "OpenSSL's whole error string: " << why.detail;
  EXPECT_EQ(ERR_peek_error(), 0u) << "the thread's error queue is left clean";
}

TEST_F(Tls, PlainHttpOnTheTlsPort) {
  SocketPair p;
  auto t = server::tls_transport(server_ctx, p.server);
  const std::string http = "GET /mutate HTTP/1.1\r\nHost: x\r\n\r\n";
  ASSERT_EQ(write(p.client, http.data(), http.size()), static_cast<ssize_t>(http.size()));
  char buf[16];
  EXPECT_EQ(t->read(buf, sizeof buf).status, Io::kError);
  EXPECT_EQ(t->failure().reason, "http request");
}

TEST_F(Tls, APeerThatClosesBeforeTheHandshake) {
  SocketPair p;
  auto t = server::tls_transport(server_ctx, p.server);
  char buf[16];
  EXPECT_EQ(t->read(buf, sizeof buf).status, Io::kWantRead);
  p.close_client();
  EXPECT_EQ(t->read(buf, sizeof buf).status, Io::kError);
  EXPECT_EQ(t->failure().reason, server::kTlsConnectionClosed);
}

TEST_F(Tls, APeerThatResetsBeforeTheHandshake) {
  TcpPair p;
  auto t = server::tls_transport(server_ctx, p.server);
  char buf[16];
  EXPECT_EQ(t->read(buf, sizeof buf).status, Io::kWantRead);
  // Half a ClientHello, then a reset.
  const unsigned char hello_start[] = {0x16, 0x03, 0x01, 0x02, 0x00, 0x01};
  ASSERT_EQ(write(p.client, hello_start, sizeof hello_start), static_cast<ssize_t>(sizeof hello_start));
  p.reset_client();
  Io status = Io::kWantRead;
  for (int i = 0; i < 100 && status == Io::kWantRead; ++i) {
    status = t->read(buf, sizeof buf).status;
    if (status == Io::kWantRead) usleep(1000);
  }
  EXPECT_EQ(status, Io::kError);
  EXPECT_EQ(t->failure().reason, server::kTlsConnectionReset);
  EXPECT_FALSE(t->failure().detail.empty());
}

TEST_F(Tls, ASocketErrorDuringTheHandshakeIsItsFailure) {
  SocketPair p;
  auto t = server::tls_transport(server_ctx, p.server);
  t->socket_failed(ETIMEDOUT);
  EXPECT_EQ(t->failure().reason, std::strerror(ETIMEDOUT));
  t->socket_failed(ECONNRESET);
  EXPECT_EQ(t->failure().reason, std::strerror(ETIMEDOUT)) << "the first failure is the one told";

  SocketPair q;
  auto u = server::tls_transport(server_ctx, q.server);
  u->socket_failed(0);  // EPOLLERR with no SO_ERROR
  EXPECT_EQ(u->failure().reason, server::kTlsConnectionReset);
}

TEST_F(Tls, ASocketErrorAfterTheHandshakeIsNoHandshakeFailure) {
  SocketPair p;
  auto t = server::tls_transport(server_ctx, p.server);
  char buf[16];
  handshake(*t, p.client, buf, sizeof buf);
  ASSERT_TRUE(client_done);
  t->socket_failed(ECONNRESET);
  EXPECT_EQ(t->failure().reason, "");
}
