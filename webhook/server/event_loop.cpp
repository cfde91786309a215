// The epoll HTTP server (see event_loop.h). One epoll set shared by every worker thread; each
// connection is registered with EPOLLONESHOT, so its next event goes to one worker, whichever is
// waiting, and no connection stays with a thread. A worker that the kernel deschedules holds up
// the one request it is working on, not every connection it once accepted: at 4 keep-alive
// connections on 2 cores, pinning connections to the worker that accepted them gave p99 of 30-90
// ms in the runs where the connections were split over both workers (docs/performance.md).
//
// Connections live in a fixed table of slots. A slot's word holds its generation and state:
// free, armed (epoll may report it) or busy (one thread holds it). The thread that moves a slot
// from armed to busy is the only one that touches its connection and descriptor until it lets it
// go (epoll already told what to wait for) or closes it; an event for an older generation (a
// closed connection) finds the word changed and is dropped. The timeout sweep takes slots the same
// way; an event that arrives while a slot is held marks it missed, and the holder serves it.
#include "server/event_loop.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <memory>
#include <mutex>
#include <vector>

namespace shmguard::server {
namespace {

std::int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

constexpr int kSweepMs = 200;

// A slot's word: generation << 3 | missed << 2 | state.
constexpr std::uint64_t kFree = 0, kArmed = 1, kBusy = 2, kStateMask = 3, kMissed = 4;
constexpr std::uint64_t word(std::uint32_t gen, std::uint64_t state) { return std::uint64_t{gen} << 3 | state; }
constexpr std::uint32_t gen_of(std::uint64_t w) { return static_cast<std::uint32_t>(w >> 3); }

// What an epoll event names: a slot (index and generation), the listening socket or the wake-up.
constexpr std::uint32_t kListenIndex = 0xFFFFFFFF, kWakeIndex = 0xFFFFFFFE;
constexpr std::uint64_t event_data(std::uint32_t index, std::uint32_t gen) { return std::uint64_t{index} << 32 | gen; }

}  // namespace

struct EventLoopServer::Slot {
  std::atomic<std::uint64_t> word{0};
  std::unique_ptr<Connection> conn;  // touched only by the thread holding the slot (busy)
  std::uint32_t interest = 0;        // what epoll waits for on it
};

// One worker thread: waits on the shared epoll set and works on whatever it reports.
class EventLoopServer::Worker {
 public:
  explicit Worker(EventLoopServer& server) : s_(server) {}

  void run() {
    epoll_event events[64];
    for (;;) {
      const int n = ::epoll_wait(s_.ep_, events, 64, kSweepMs);
      const std::int64_t now = now_ms();
      for (int i = 0; i < n; ++i) dispatch(events[i], now);
      if (s_.stopping_.load() && !saw_stop_) {
        saw_stop_ = true;
        s_.begin_drain(now);
      }
      if (s_.draining_.load() && (s_.open_.load() == 0 || now > s_.drain_deadline_.load())) return take_wake();
      s_.maybe_sweep(now);
    }
  }

 private:
  EventLoopServer& s_;
  bool saw_stop_ = false;
  bool took_wake_ = false;

  // stop() counts one wake-up per worker (a semaphore eventfd): each takes its one (also when it
  // leaves before the event reached it), so the level-triggered event ends with the last.
  void take_wake() {
    if (took_wake_) return;
    std::uint64_t v;
    took_wake_ = ::read(s_.wake_fd_, &v, sizeof v) == sizeof v;
  }

  void dispatch(const epoll_event& ev, std::int64_t now) {
    const auto index = static_cast<std::uint32_t>(ev.data.u64 >> 32);
    if (index == kWakeIndex) return take_wake();
    if (index == kListenIndex) return s_.accept_all(now);
    const auto gen = static_cast<std::uint32_t>(ev.data.u64);
    if (s_.take(s_.slots_[index], gen)) s_.serve(s_.slots_[index], gen, ev.events, now);
  }
};

bool EventLoopServer::take(Slot& slot, std::uint32_t gen) {
  std::uint64_t cur = slot.word.load(std::memory_order_acquire);
  for (;;) {
    if (gen_of(cur) != gen) return false;  // an event for a connection closed since
    const std::uint64_t state = cur & kStateMask;
    if (state == kArmed) {
      if (slot.word.compare_exchange_weak(cur, word(gen, kBusy), std::memory_order_acq_rel)) return true;
    } else if (state == kBusy) {
      // The sweep holds it: leave a mark, and it arms the slot again when it lets go.
      if (slot.word.compare_exchange_weak(cur, cur | kMissed, std::memory_order_acq_rel)) return false;
    } else {
      return false;
    }
  }
}

// The connection's turns while this thread holds its slot: each ends with epoll told what to wait
// for (while still held: whoever takes the slot next sees the descriptor as it was left), then
// the slot let go; an event that came meanwhile is served here, in another turn.
void EventLoopServer::serve(Slot& slot, std::uint32_t gen, std::uint32_t events, std::int64_t now) {
  for (;;) {
    Connection& c = *slot.conn;
    const Phase phase = stopping_.load() ? Phase::kStopping : closing_.load() ? Phase::kClosing : Phase::kServing;
    const Wait w = (events & EPOLLERR) && !c.lingering() ? c.on_error() : c.on_ready(now, phase);
    if (w == Wait::kClose) return close(slot);
    slot.interest = w == Wait::kWrite ? EPOLLOUT : EPOLLIN;
    epoll_event e{};
    e.events = slot.interest | EPOLLONESHOT;
    e.data.u64 = event_data(static_cast<std::uint32_t>(&slot - slots_.get()), gen);
    ::epoll_ctl(ep_, EPOLL_CTL_MOD, c.fd(), &e);
    if (!release(slot, gen)) return;
    events = 0;
  }
}

bool EventLoopServer::release(Slot& slot, std::uint32_t gen) {
  std::uint64_t held = word(gen, kBusy);
  if (slot.word.compare_exchange_strong(held, word(gen, kArmed), std::memory_order_acq_rel)) return false;
  // Marked missed (the one change another thread makes to a held slot): keep holding it for the
  // event the mark stands for. Its one-shot registration is spent, so no other event comes.
  slot.word.store(word(gen, kBusy), std::memory_order_release);
  return true;
}

void EventLoopServer::close(Slot& slot) {
  ::epoll_ctl(ep_, EPOLL_CTL_DEL, slot.conn->fd(), nullptr);
  slot.conn.reset();  // closes the socket
  const std::uint32_t gen = gen_of(slot.word.load(std::memory_order_relaxed));
  slot.word.store(word(gen + 1, kFree), std::memory_order_release);
  {
    std::lock_guard<std::mutex> lock(free_mu_);
    free_.push_back(static_cast<std::uint32_t>(&slot - slots_.get()));
  }
  open_.fetch_sub(1);
}

void EventLoopServer::accept_all(std::int64_t now) {
  while (!draining_.load()) {
    int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) break;
    std::uint32_t index = 0;
    {
      std::lock_guard<std::mutex> lock(free_mu_);
      if (free_.empty()) {  // max_connections open
        ::close(fd);
        continue;
      }
      index = free_.back();
      free_.pop_back();
    }
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    auto transport = ssl_ctx_ ? tls_transport(ssl_ctx_, fd) : plain_transport(fd);
    if (!transport) {
      ::close(fd);
      std::lock_guard<std::mutex> lock(free_mu_);
      free_.push_back(index);
      continue;
    }
    Slot& slot = slots_[index];
    const std::uint32_t gen = gen_of(slot.word.load(std::memory_order_relaxed));
    slot.word.store(word(gen, kBusy), std::memory_order_release);  // held until registered
    slot.conn = std::make_unique<Connection>(fd, std::move(transport), opts_, handler_, on_reject_, now);
    slot.interest = EPOLLIN;
    open_.fetch_add(1);
    epoll_event e{};
    e.events = EPOLLIN | EPOLLONESHOT;
    e.data.u64 = event_data(index, gen);
    ::epoll_ctl(ep_, EPOLL_CTL_ADD, fd, &e);
    if (release(slot, gen)) serve(slot, gen, 0, now);
  }
  // Next connections: one worker at a time accepts them (the listening socket is one-shot too).
  if (!draining_.load()) {
    epoll_event e{};
    e.events = EPOLLIN | EPOLLONESHOT;
    e.data.u64 = event_data(kListenIndex, 0);
    ::epoll_ctl(ep_, EPOLL_CTL_MOD, listen_fd_, &e);  // fails harmlessly once a drain removed it
  }
}

// Every kSweepMs, one worker closes the connections past their deadline (and, once draining, the
// idle ones), taking each slot as an event would.
void EventLoopServer::maybe_sweep(std::int64_t now) {
  std::int64_t last = last_sweep_.load();
  if (now - last < kSweepMs || !last_sweep_.compare_exchange_strong(last, now)) return;
  sweep(now);
}

void EventLoopServer::sweep(std::int64_t now) {
  const bool drain = draining_.load();
  for (std::size_t i = 0; i < slot_count_; ++i) {
    Slot& slot = slots_[i];
    const std::uint64_t w = slot.word.load(std::memory_order_acquire);
    if ((w & kStateMask) != kArmed || !take(slot, gen_of(w))) continue;
    if (slot.conn->expired(now) || (drain && slot.conn->idle(now))) {
      close(slot);
      continue;
    }
    // Still registered as it was; an event that came while the sweep held it is served here.
    if (release(slot, gen_of(w))) serve(slot, gen_of(w), 0, now);
  }
}

// Stop accepting; connections between requests close now, the others may finish.
void EventLoopServer::begin_drain(std::int64_t now) {
  if (draining_.exchange(true)) return;
  drain_deadline_ = now + opts_.drain_timeout_ms;
  ::epoll_ctl(ep_, EPOLL_CTL_DEL, listen_fd_, nullptr);
  sweep(now);
}

EventLoopServer::EventLoopServer(LoopOptions opts, SSL_CTX* ssl_ctx, Handler handler, RejectHook on_reject)
    : opts_(opts), ssl_ctx_(ssl_ctx), handler_(std::move(handler)), on_reject_(std::move(on_reject)) {}

EventLoopServer::~EventLoopServer() {
  stop();
  if (listen_fd_ >= 0) ::close(listen_fd_);
}

Status EventLoopServer::bind(const std::string& address, int port) {
  sockaddr_storage ss{};
  socklen_t len = 0;
  int family = AF_INET;
  if (address.find(':') != std::string::npos) {
    auto* a6 = reinterpret_cast<sockaddr_in6*>(&ss);
    a6->sin6_family = AF_INET6;
    a6->sin6_port = htons(static_cast<std::uint16_t>(port));
    if (inet_pton(AF_INET6, address.c_str(), &a6->sin6_addr) != 1) {
      return Failure{"invalid bind address " + address};
    }
    family = AF_INET6;
    len = sizeof(sockaddr_in6);
  } else {
    auto* a4 = reinterpret_cast<sockaddr_in*>(&ss);
    a4->sin_family = AF_INET;
    a4->sin_port = htons(static_cast<std::uint16_t>(port));
    if (inet_pton(AF_INET, address.c_str(), &a4->sin_addr) != 1) {
      return Failure{"invalid bind address " + address};
    }
    len = sizeof(sockaddr_in);
  }
  listen_fd_ = ::socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (listen_fd_ < 0) return Failure{std::string("socket: ") + std::strerror(errno)};
  int one = 1;
  ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&ss), len) != 0 || ::listen(listen_fd_, 1024) != 0) {
    std::string why = "cannot listen on " + address + ":" + std::to_string(port) + ": " + std::strerror(errno);
    ::close(listen_fd_);
    listen_fd_ = -1;
    return Failure{why};
  }
  sockaddr_storage bound{};
  socklen_t blen = sizeof bound;
  ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&bound), &blen);
  port_ = family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port)
                             : ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  return Ok{};
}

void EventLoopServer::start() {
  const int n = std::max(1, opts_.threads);
  slot_count_ = opts_.max_connections;
  slots_ = std::make_unique<Slot[]>(slot_count_);
  free_.reserve(slot_count_);
  for (std::size_t i = slot_count_; i-- > 0;) free_.push_back(static_cast<std::uint32_t>(i));
  ep_ = ::epoll_create1(EPOLL_CLOEXEC);
  wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC | EFD_SEMAPHORE);
  epoll_event e{};
  e.events = EPOLLIN | EPOLLONESHOT;
  e.data.u64 = event_data(kListenIndex, 0);
  ::epoll_ctl(ep_, EPOLL_CTL_ADD, listen_fd_, &e);
  e.events = EPOLLIN;
  e.data.u64 = event_data(kWakeIndex, 0);
  ::epoll_ctl(ep_, EPOLL_CTL_ADD, wake_fd_, &e);
  for (int i = 0; i < n; ++i) {
    workers_.emplace_back([this] { Worker(*this).run(); });
    const std::string name = std::string(opts_.name).substr(0, 10) + "-" + std::to_string(i);
    ::pthread_setname_np(workers_.back().native_handle(), name.c_str());
  }
}

void EventLoopServer::stop() {
  if (stopping_.exchange(true)) {
    for (auto& t : workers_)
      if (t.joinable()) t.join();
    return;
  }
  if (wake_fd_ >= 0) {
    const std::uint64_t each = workers_.size();  // one wake-up per worker
    [[maybe_unused]] auto r = ::write(wake_fd_, &each, sizeof each);
  }
  for (auto& t : workers_)
    if (t.joinable()) t.join();
  for (std::size_t i = 0; slots_ && i < slot_count_; ++i) slots_[i].conn.reset();  // past the drain deadline
  if (wake_fd_ >= 0) ::close(wake_fd_);
  if (ep_ >= 0) ::close(ep_);
  wake_fd_ = ep_ = -1;
}

}  // namespace shmguard::server
