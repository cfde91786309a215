// The event loop's shared epoll set: many clients over keep-alive connections, served by any
// worker; closed, idle and half-sent connections; a stop with connections open. Run under
// ThreadSanitizer by hack/test.sh (stage tsan): a connection is touched by one thread at a time.
#include "server/event_loop.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

using namespace shmguard::server;

namespace {

int connect_to(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  timeval tv{5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

bool send_all(int fd, const std::string& s) {
  for (std::size_t off = 0; off < s.size();) {
    const auto n = ::send(fd, s.data() + off, s.size() - off, MSG_NOSIGNAL);
    if (n <= 0) return false;
    off += static_cast<std::size_t>(n);
  }
  return true;
}

// One response's body ("" on a closed or timed-out connection).
std::string read_response(int fd) {
  std::string buf;
  char tmp[4096];
  for (;;) {
    const auto head_end = buf.find("\r\n\r\n");
    if (head_end != std::string::npos) {
      const auto cl = buf.find("Content-Length: ");
      const std::size_t len = cl == std::string::npos ? 0 : std::stoul(buf.substr(cl + 16));
      if (buf.size() >= head_end + 4 + len) return buf.substr(head_end + 4, len);
    }
    const auto n = ::recv(fd, tmp, sizeof tmp, 0);
    if (n <= 0) return "";
    buf.append(tmp, static_cast<std::size_t>(n));
  }
}

std::string request(const std::string& body) {
  return "POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

struct Server {
  explicit Server(LoopOptions opts)
      : loop(opts, nullptr, [this](const HttpRequest& q, HttpResponse& s) {
          served.fetch_add(1);
          s.body = q.body;
        }) {
    EXPECT_TRUE(loop.bind("127.0.0.1", 0).ok());
    loop.start();
  }
  std::atomic<int> served{0};
  EventLoopServer loop;
};

}  // namespace

TEST(EventLoop, ManyKeepAliveClientsAreEachAnsweredInOrder) {
  LoopOptions opts;
  opts.threads = 3;
  opts.max_connections = 64;
  Server srv(opts);
  constexpr int kClients = 12, kRequests = 150;
  std::atomic<int> wrong{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&, c] {
      const int fd = connect_to(srv.loop.port());
      if (fd < 0) return (void)wrong.fetch_add(kRequests);
      for (int i = 0; i < kRequests; ++i) {
        const std::string body = "client " + std::to_string(c) + " request " + std::to_string(i) + std::string(i * 7, 'x');
        if (!send_all(fd, request(body)) || read_response(fd) != body) wrong.fetch_add(1);
      }
      ::close(fd);
    });
  }
  for (auto& t : clients) t.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(srv.served.load(), kClients * kRequests);
  srv.loop.stop();
}

TEST(EventLoop, ClosedAndHalfSentConnectionsFreeTheirSlots) {
  LoopOptions opts;
  opts.threads = 2;
  opts.max_connections = 4;  // every slot is used many times over
  opts.request_timeout_ms = 300;
  Server srv(opts);
  for (int round = 0; round < 40; ++round) {
    const int fd = connect_to(srv.loop.port());
    ASSERT_GE(fd, 0);
    if (round % 2) {
      send_all(fd, "POST /echo HTTP/1.1\r\nContent-Length: 10\r\n\r\nabc");  // half a body, then gone
    } else {
      ASSERT_TRUE(send_all(fd, request("r" + std::to_string(round))));
      EXPECT_EQ(read_response(fd), "r" + std::to_string(round));
    }
    ::close(fd);
  }
  // A client that sends half a request and waits is closed by the sweep at its deadline.
  const int slow = connect_to(srv.loop.port());
  send_all(slow, "POST /echo HTTP/1.1\r\nContent-Length: 10\r\n\r\nabc");
  const auto t0 = std::chrono::steady_clock::now();
  char b;
  EXPECT_LE(::recv(slow, &b, 1, 0), 0);  // closed (a 408 body may come first on other servers; none here)
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(3));
  ::close(slow);
  // Every slot is free again: max_connections clients are all served. A slot is freed when the
  // server reads the client's close, after the client moved on: a client the cap refused (closed
  // at once) connects again, as a client of a full server would.
  std::vector<int> fds;
  for (int i = 0; i < 4; ++i) {
    std::string got;
    for (int attempt = 0; attempt < 100 && got.empty(); ++attempt) {
      if (attempt) std::this_thread::sleep_for(std::chrono::milliseconds(10));
      const int fd = connect_to(srv.loop.port());
      ASSERT_GE(fd, 0);
      if (send_all(fd, request("again")) && !(got = read_response(fd)).empty()) fds.push_back(fd);
      else ::close(fd);
    }
    EXPECT_EQ(got, "again") << i;
  }
  EXPECT_EQ(fds.size(), 4u);
  for (int fd : fds) ::close(fd);
  srv.loop.stop();
}

TEST(EventLoop, StopClosesIdleConnectionsAndLetsOthersFinish) {
  LoopOptions opts;
  opts.threads = 2;
  Server srv(opts);
  std::vector<int> idle;
  for (int i = 0; i < 6; ++i) {
    idle.push_back(connect_to(srv.loop.port()));
    ASSERT_TRUE(send_all(idle.back(), request("x")));
    ASSERT_EQ(read_response(idle.back()), "x");
  }
  const auto t0 = std::chrono::steady_clock::now();
  srv.loop.stop();  // idle keep-alive connections close at once: stop() does not wait out the drain
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(2));
  for (int fd : idle) {
    char b;
    EXPECT_EQ(::recv(fd, &b, 1, 0), 0);  // an orderly close
    ::close(fd);
  }
}
