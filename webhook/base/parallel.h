// Work spread over threads: the offline commands work on a stream's documents in parallel and
// write them in order.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <system_error>
#include <thread>
#include <vector>

namespace shmguard {

// Calls fn(worker, i) for every i in [0, n) on up to `threads` threads, the caller's among them
// (worker 0), each taking the next index when it is done with one; returns when all are done.
// `fn` must not throw. A thread that cannot be started leaves its share to the others.
template <typename Fn>
void parallel_for(std::size_t n, unsigned threads, Fn&& fn) {
  std::atomic<std::size_t> next{0};
  auto work = [&](unsigned worker) {
    for (std::size_t i = next.fetch_add(1); i < n; i = next.fetch_add(1)) fn(worker, i);
  };
  std::vector<std::thread> helpers;
  const auto wanted = static_cast<unsigned>(std::min<std::size_t>(std::max(threads, 1u), n));
  for (unsigned w = 1; w < wanted; ++w) {
    try {
      helpers.emplace_back(work, w);
    } catch (const std::system_error&) {
      break;
    }
  }
  work(0);
  for (auto& h : helpers) h.join();
}

// Threads to use when the user did not say: one per core, at most `cap`.
inline unsigned default_threads(unsigned cap = 8) {
  const unsigned cores = std::thread::hardware_concurrency();
  return std::clamp(cores, 1u, cap);
}

}  // namespace shmguard
