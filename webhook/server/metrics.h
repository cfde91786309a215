// Prometheus metrics for the webhook: counters and histograms, rendered in the text format.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace shmguard::server {

class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void observe(double v);
  // Appends the _bucket/_sum/_count series of `name` to `out`.
  void render(const std::string& name, std::string& out) const;

 private:
  std::vector<double> bounds_;
  std::unique_ptr<std::atomic<std::uint64_t>[]> buckets_;  // one per bound, plus +Inf
  std::atomic<std::uint64_t> count_{0};
  std::atomic<std::uint64_t> sum_micro_{0};  // sum x 1e6, kept integral for atomic adds
};

class Metrics {
 public:
  Metrics();
  void admission(const std::string& decision, const std::string& reason, double seconds,
                 std::uint64_t injected_bytes);
  void http_response(int status);
  // One owner lookup (a JobSet pod's hints): its result, answered by the API server or the cache.
  void owner_lookup(const std::string& result, bool cached);
  // A client's TLS handshake failed on the webhook port, in OpenSSL's words.
  void tls_handshake_failure(const std::string& reason);
  void cert_reload(bool ok);
  void config_reload(bool ok);
  void set_cert_expiry(double unix_seconds) { cert_expiry_.store(unix_seconds); }
  std::string render() const;

 private:
  mutable std::mutex mu_;
  std::map<std::pair<std::string, std::string>, std::uint64_t> requests_;
  std::map<int, std::uint64_t> http_;
  std::map<std::pair<std::string, bool>, std::uint64_t> owner_lookups_;
  std::map<std::string, std::uint64_t> tls_failures_;  // OpenSSL's reasons: a closed set
  Histogram latency_;
  Histogram size_;
  std::atomic<std::uint64_t> cert_ok_{0}, cert_failed_{0}, config_ok_{0}, config_failed_{0};
  std::atomic<double> cert_expiry_{0};
};

}  // namespace shmguard::server
