// The epoll HTTP server (see event_loop.h). One epoll set per worker; the listening socket is
// shared with EPOLLEXCLUSIVE so one worker wakes per new connection.
#include "server/event_loop.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <memory>
#include <unordered_map>

namespace shmguard::server {
namespace {

std::int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

enum class State { kHandshake, kReading, kWriting, kLinger };

struct Conn {
  int fd = -1;
  SSL* ssl = nullptr;
  State state = State::kReading;
  std::string in;
  std::string out;
  std::size_t out_off = 0;
  bool close_after = false;
  bool request_started = false;
  std::int64_t deadline = 0;
  std::uint32_t events = 0;
  std::size_t lingered = 0;
  ~Conn() {
    if (ssl) SSL_free(ssl);
    if (fd >= 0) ::close(fd);
  }
};

constexpr std::size_t kReadChunk = 16 * 1024;
constexpr std::size_t kMaxLingerBytes = 32 * 1024 * 1024;  // lets a client finish sending an oversize body
constexpr int kLingerMs = 2000;

}  // namespace

EventLoopServer::EventLoopServer(LoopOptions opts, SSL_CTX* ssl_ctx, Handler handler, RejectHook on_reject)
    : opts_(opts), ssl_ctx_(ssl_ctx), handler_(std::move(handler)), on_reject_(std::move(on_reject)) {}

EventLoopServer::~EventLoopServer() {
  stop();
  if (listen_fd_ >= 0) ::close(listen_fd_);
}

bool EventLoopServer::bind(const std::string& address, int port, std::string& err) {
  sockaddr_storage ss{};
  socklen_t len = 0;
  int family = AF_INET;
  if (address.find(':') != std::string::npos) {
    auto* a6 = reinterpret_cast<sockaddr_in6*>(&ss);
    a6->sin6_family = AF_INET6;
    a6->sin6_port = htons(static_cast<std::uint16_t>(port));
    if (inet_pton(AF_INET6, address.c_str(), &a6->sin6_addr) != 1) {
      err = "invalid bind address " + address;
      return false;
    }
    family = AF_INET6;
    len = sizeof(sockaddr_in6);
  } else {
    auto* a4 = reinterpret_cast<sockaddr_in*>(&ss);
    a4->sin_family = AF_INET;
    a4->sin_port = htons(static_cast<std::uint16_t>(port));
    if (inet_pton(AF_INET, address.c_str(), &a4->sin_addr) != 1) {
      err = "invalid bind address " + address;
      return false;
    }
    len = sizeof(sockaddr_in);
  }
  listen_fd_ = ::socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (listen_fd_ < 0) {
    err = std::string("socket: ") + std::strerror(errno);
    return false;
  }
  int one = 1;
  ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&ss), len) != 0 || ::listen(listen_fd_, 1024) != 0) {
    err = "cannot listen on " + address + ":" + std::to_string(port) + ": " + std::strerror(errno);
    ::close(listen_fd_);
    listen_fd_ = -1;
    return false;
  }
  sockaddr_storage bound{};
  socklen_t blen = sizeof bound;
  ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&bound), &blen);
  port_ = family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port)
                             : ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  return true;
}

void EventLoopServer::start() {
  int n = std::max(1, opts_.threads);
  for (int i = 0; i < n; ++i) wake_fds_.push_back(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  for (int i = 0; i < n; ++i) workers_.emplace_back([this, i] { worker_main(i); });
}

void EventLoopServer::stop() {
  if (stopping_.exchange(true)) {
    for (auto& t : workers_)
      if (t.joinable()) t.join();
    return;
  }
  for (int fd : wake_fds_) {
    std::uint64_t one = 1;
    [[maybe_unused]] auto r = ::write(fd, &one, sizeof one);
  }
  for (auto& t : workers_)
    if (t.joinable()) t.join();
  for (int fd : wake_fds_) ::close(fd);
  wake_fds_.clear();
}

void EventLoopServer::worker_main(int index) {
  int ep = ::epoll_create1(EPOLL_CLOEXEC);
  int wake = wake_fds_[static_cast<std::size_t>(index)];
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLEXCLUSIVE;
  ev.data.fd = listen_fd_;
  ::epoll_ctl(ep, EPOLL_CTL_ADD, listen_fd_, &ev);
  ev.events = EPOLLIN;
  ev.data.fd = wake;
  ::epoll_ctl(ep, EPOLL_CTL_ADD, wake, &ev);

  std::unordered_map<int, std::unique_ptr<Conn>> conns;
  bool draining = false;
  std::int64_t drain_deadline = 0;
  std::int64_t last_sweep = now_ms();

  auto close_conn = [&](Conn& c) {
    ::epoll_ctl(ep, EPOLL_CTL_DEL, c.fd, nullptr);
    int fd = c.fd;
    conns.erase(fd);  // destroys c
    open_.fetch_sub(1);
  };
  auto want = [&](Conn& c, std::uint32_t events) {
    if (c.events == events) return;
    epoll_event e{};
    e.events = events;
    e.data.fd = c.fd;
    ::epoll_ctl(ep, EPOLL_CTL_MOD, c.fd, &e);
    c.events = events;
  };
  auto begin_linger = [&](Conn& c) {
    // Half-close and discard what the client still sends, so our response is not lost to a
    // reset caused by unread data (e.g. the body of a 413).
    if (c.ssl) {
      SSL_shutdown(c.ssl);
      ERR_clear_error();
    }
    ::shutdown(c.fd, SHUT_WR);
    c.state = State::kLinger;
    c.deadline = now_ms() + kLingerMs;
    want(c, EPOLLIN);
  };

  // Drives one connection as far as it can go without blocking. Returns after arranging the
  // next epoll interest, or after closing the connection.
  auto drive = [&](Conn& c) {
    for (;;) {
      switch (c.state) {
        case State::kHandshake: {
          int r = SSL_do_handshake(c.ssl);
          if (r == 1) {
            c.state = State::kReading;
            continue;
          }
          int e = SSL_get_error(c.ssl, r);
          ERR_clear_error();
          if (e == SSL_ERROR_WANT_READ) return want(c, EPOLLIN);
          if (e == SSL_ERROR_WANT_WRITE) return want(c, EPOLLOUT);
          return close_conn(c);
        }
        case State::kReading: {
          bool eof = false;
          std::uint32_t blocked = EPOLLIN;
          char buf[kReadChunk];
          while (c.in.size() < opts_.max_body_bytes + kMaxHeaderBytes + kReadChunk) {
            ssize_t n;
            if (c.ssl) {
              n = SSL_read(c.ssl, buf, sizeof buf);
              if (n <= 0) {
                int e = SSL_get_error(c.ssl, static_cast<int>(n));
                ERR_clear_error();
                if (e == SSL_ERROR_WANT_READ) break;
                if (e == SSL_ERROR_WANT_WRITE) {
                  blocked = EPOLLOUT;
                  break;
                }
                if (e == SSL_ERROR_ZERO_RETURN) {
                  eof = true;
                  break;
                }
                return close_conn(c);
              }
            } else {
              n = ::recv(c.fd, buf, sizeof buf, 0);
              if (n == 0) {
                eof = true;
                break;
              }
              if (n < 0) {
                if (errno == EINTR) continue;
                if (errno == EAGAIN || errno == EWOULDBLOCK) break;
                return close_conn(c);
              }
            }
            c.in.append(buf, static_cast<std::size_t>(n));
            // A short read with nothing buffered in TLS means the socket is drained: skip the
            // read that would only return EAGAIN (level-triggered epoll reports anything later).
            if (static_cast<std::size_t>(n) < sizeof buf && (!c.ssl || SSL_pending(c.ssl) == 0)) break;
          }
          if (!c.in.empty() && !c.request_started) {
            c.request_started = true;
            c.deadline = now_ms() + opts_.request_timeout_ms;
          }
          if (!c.in.empty()) {
            HttpRequest req;
            auto pr = parse_request(c.in, opts_.max_body_bytes, req);
            if (pr.status == ParseStatus::kComplete) {
              c.in.erase(0, pr.consumed);
              HttpResponse res;
              try {
                handler_(req, res);
              } catch (...) {
                res = HttpResponse{};
                res.status = 500;
                res.body = "internal error\n";
              }
              res.close = res.close || !req.keep_alive || stopping_.load();
              c.out = format_response(res);
              c.out_off = 0;
              c.close_after = res.close;
              c.state = State::kWriting;
              c.deadline = now_ms() + opts_.write_timeout_ms;
              continue;
            }
            if (pr.status == ParseStatus::kError) {
              if (on_reject_) on_reject_(pr.error_status);
              HttpResponse res;
              res.status = pr.error_status;
              res.body = pr.message + "\n";
              res.close = true;
              c.in.clear();
              c.out = format_response(res);
              c.out_off = 0;
              c.close_after = true;
              c.state = State::kWriting;
              c.deadline = now_ms() + opts_.write_timeout_ms;
              continue;
            }
          }
          if (eof) return close_conn(c);
          if (stopping_.load() && !c.request_started) return close_conn(c);
          if (!c.request_started) c.deadline = now_ms() + opts_.idle_timeout_ms;
          return want(c, blocked);
        }
        case State::kWriting: {
          while (c.out_off < c.out.size()) {
            const char* p = c.out.data() + c.out_off;
            int len = static_cast<int>(std::min<std::size_t>(c.out.size() - c.out_off, 1 << 20));
            ssize_t n;
            if (c.ssl) {
              n = SSL_write(c.ssl, p, len);
              if (n <= 0) {
                int e = SSL_get_error(c.ssl, static_cast<int>(n));
                ERR_clear_error();
                if (e == SSL_ERROR_WANT_WRITE) return want(c, EPOLLOUT);
                if (e == SSL_ERROR_WANT_READ) return want(c, EPOLLIN);
                return close_conn(c);
              }
            } else {
              n = ::send(c.fd, p, static_cast<std::size_t>(len), MSG_NOSIGNAL);
              if (n < 0) {
                if (errno == EINTR) continue;
                if (errno == EAGAIN || errno == EWOULDBLOCK) return want(c, EPOLLOUT);
                return close_conn(c);
              }
            }
            c.out_off += static_cast<std::size_t>(n);
          }
          c.out.clear();
          c.out.shrink_to_fit();
          c.out_off = 0;
          if (c.close_after) {
            begin_linger(c);
            continue;
          }
          c.state = State::kReading;
          c.request_started = false;
          if (c.in.capacity() > 64 * 1024 && c.in.empty()) c.in.shrink_to_fit();
          continue;
        }
        case State::kLinger: {
          char buf[kReadChunk];
          for (;;) {
            ssize_t n = ::recv(c.fd, buf, sizeof buf, 0);
            if (n > 0) {
              c.lingered += static_cast<std::size_t>(n);
              if (c.lingered > kMaxLingerBytes) return close_conn(c);
              continue;
            }
            if (n < 0 && errno == EINTR) continue;
            if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return want(c, EPOLLIN);
            return close_conn(c);
          }
        }
      }
    }
  };

  epoll_event events[128];
  for (;;) {
    int n = ::epoll_wait(ep, events, 128, 200);
    std::int64_t now = now_ms();
    for (int i = 0; i < n; ++i) {
      int fd = events[i].data.fd;
      if (fd == wake) {
        std::uint64_t v;
        [[maybe_unused]] auto r = ::read(wake, &v, sizeof v);
        continue;
      }
      if (fd == listen_fd_) {
        if (draining) continue;
        for (;;) {
          int cfd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
          if (cfd < 0) break;
          if (open_.load() >= opts_.max_connections) {
            ::close(cfd);
            continue;
          }
          int one = 1;
          ::setsockopt(cfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
          auto c = std::make_unique<Conn>();
          c->fd = cfd;
          if (ssl_ctx_) {
            c->ssl = SSL_new(ssl_ctx_);
            if (!c->ssl) {
              ERR_clear_error();
              continue;  // Conn's destructor closes the socket
            }
            SSL_set_fd(c->ssl, cfd);
            SSL_set_accept_state(c->ssl);
            c->state = State::kHandshake;
          }
          c->deadline = now + opts_.request_timeout_ms;
          c->events = EPOLLIN;
          epoll_event e{};
          e.events = EPOLLIN;
          e.data.fd = cfd;
          if (::epoll_ctl(ep, EPOLL_CTL_ADD, cfd, &e) != 0) continue;
          open_.fetch_add(1);
          conns.emplace(cfd, std::move(c));
        }
        continue;
      }
      auto it = conns.find(fd);
      if (it == conns.end()) continue;
      Conn& c = *it->second;
      if ((events[i].events & (EPOLLERR)) && c.state != State::kLinger) {
        close_conn(c);
        continue;
      }
      drive(c);
    }
    if (stopping_.load() && !draining) {
      draining = true;
      drain_deadline = now + opts_.drain_timeout_ms;
      ::epoll_ctl(ep, EPOLL_CTL_DEL, listen_fd_, nullptr);
      std::vector<int> idle;
      for (auto& [fd, c] : conns)
        if (!c->request_started && c->state != State::kWriting) idle.push_back(fd);
      for (int fd : idle) close_conn(*conns.at(fd));
    }
    if (draining && (conns.empty() || now > drain_deadline)) break;
    if (now - last_sweep >= 200) {
      last_sweep = now;
      std::vector<int> expired;
      for (auto& [fd, c] : conns)
        if (now > c->deadline) expired.push_back(fd);
      for (int fd : expired) close_conn(*conns.at(fd));
    }
  }
  std::vector<int> rest;
  for (auto& [fd, c] : conns) rest.push_back(fd);
  for (int fd : rest) close_conn(*conns.at(fd));
  ::close(ep);
}

}  // namespace shmguard::server
