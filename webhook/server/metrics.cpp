// Prometheus text rendering of the webhook's metrics (see metrics.h).
#include "server/metrics.h"

#include <charconv>

#include <cstdio>
#include <memory>

#include "version.h"
#include "base/text.h"

namespace shmguard::server {
namespace {
// The shortest decimal that reads back as `v` (le="0.00025", not 0.00025000000000000001), never in
// exponent form: a bucket is matched by its `le` text, and Prometheus's clients write 0.0001, not 1e-04.
std::string num(double v) {
  char buf[400];  // the longest fixed double (1.8e308) fits
  auto res = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::fixed);
  return std::string(buf, res.ptr);
}
}  // namespace

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), buckets_(new std::atomic<std::uint64_t>[bounds_.size() + 1]) {
  for (std::size_t i = 0; i <= bounds_.size(); ++i) buckets_[i] = 0;
}

void Histogram::observe(double v) {
  std::size_t i = 0;
  while (i < bounds_.size() && v > bounds_[i]) ++i;
  buckets_[i].fetch_add(1, std::memory_order_relaxed);
  count_.fetch_add(1, std::memory_order_relaxed);
  sum_micro_.fetch_add(static_cast<std::uint64_t>(v * 1e6), std::memory_order_relaxed);
}

void Histogram::render(const std::string& name, std::string& out) const {
  std::uint64_t cum = 0;
  for (std::size_t i = 0; i < bounds_.size(); ++i) {
    cum += buckets_[i].load(std::memory_order_relaxed);
    out += name + "_bucket{le=\"" + num(bounds_[i]) + "\"} " + std::to_string(cum) + "\n";
  }
  cum += buckets_[bounds_.size()].load(std::memory_order_relaxed);
  out += name + "_bucket{le=\"+Inf\"} " + std::to_string(cum) + "\n";
  out += name + "_sum " + num(static_cast<double>(sum_micro_.load()) / 1e6) + "\n";
  out += name + "_count " + std::to_string(count_.load()) + "\n";
}

Metrics::Metrics()
    : latency_({0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 1}),
      size_({1073741824.0, 2147483648.0, 4294967296.0, 8589934592.0, 17179869184.0, 34359738368.0,
             68719476736.0}) {}

void Metrics::admission(const std::string& decision, const std::string& reason, double seconds,
                        std::uint64_t injected_bytes) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++requests_[{decision, reason}];
  }
  latency_.observe(seconds);
  if (injected_bytes > 0) size_.observe(static_cast<double>(injected_bytes));
}

void Metrics::http_response(int status) {
  std::lock_guard<std::mutex> lock(mu_);
  ++http_[status];
}

void Metrics::owner_lookup(const std::string& result, bool cached) {
  std::lock_guard<std::mutex> lock(mu_);
  ++owner_lookups_[{result, cached}];
}

void Metrics::tls_handshake_failure(const std::string& reason) {
  std::lock_guard<std::mutex> lock(mu_);
  ++tls_failures_[reason];
}

void Metrics::cert_reload(bool ok) { (ok ? cert_ok_ : cert_failed_).fetch_add(1); }
void Metrics::config_reload(bool ok) { (ok ? config_ok_ : config_failed_).fetch_add(1); }

std::string Metrics::render() const {
  std::string out;
  out += "# HELP shmguard_admissions_total Admission reviews handled, by decision and reason.\n";
  out += "# TYPE shmguard_admissions_total counter\n";
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [k, v] : requests_)
      out += "shmguard_admissions_total{decision=\"" + prometheus_label(k.first) + "\",reason=\"" +
             prometheus_label(k.second) + "\"} " + std::to_string(v) + "\n";
    out += "# HELP shmguard_http_responses_total HTTP responses on the webhook port, by status code.\n";
    out += "# TYPE shmguard_http_responses_total counter\n";
    for (const auto& [code, v] : http_)
      out += "shmguard_http_responses_total{code=\"" + std::to_string(code) + "\"} " + std::to_string(v) + "\n";
    out += "# HELP shmguard_owner_lookups_total JobSet lookups for the shmguard.io/ annotations of its pods, by result "
           "(found, none, not-found, forbidden, error) and source (api, cache).\n";
    out += "# TYPE shmguard_owner_lookups_total counter\n";
    for (const auto& [k, v] : owner_lookups_)
      out += "shmguard_owner_lookups_total{result=\"" + prometheus_label(k.first) + "\",source=\"" +
             (k.second ? "cache" : "api") + "\"} " + std::to_string(v) + "\n";
    out += "# HELP shmguard_tls_handshake_failures_total Failed TLS handshakes on the webhook port, by OpenSSL's reason "
           "(\"tlsv1 alert unknown ca\": the client does not trust the serving certificate).\n";
    out += "# TYPE shmguard_tls_handshake_failures_total counter\n";
    for (const auto& [reason, v] : tls_failures_)
      out += "shmguard_tls_handshake_failures_total{reason=\"" + prometheus_label(reason) + "\"} " + std::to_string(v) + "\n";
  }
  out += "# HELP shmguard_admission_duration_seconds Time to handle one admission review.\n";
  out += "# TYPE shmguard_admission_duration_seconds histogram\n";
  latency_.render("shmguard_admission_duration_seconds", out);
  out += "# HELP shmguard_injected_size_bytes sizeLimit of injected /dev/shm volumes.\n";
  out += "# TYPE shmguard_injected_size_bytes histogram\n";
  size_.render("shmguard_injected_size_bytes", out);
  out += "# HELP shmguard_certificate_expiry_timestamp_seconds notAfter of the serving certificate.\n";
  out += "# TYPE shmguard_certificate_expiry_timestamp_seconds gauge\n";
  out += "shmguard_certificate_expiry_timestamp_seconds " + num(cert_expiry_.load()) + "\n";
  out += "# HELP shmguard_certificate_reloads_total Certificate reloads from disk, by result.\n";
  out += "# TYPE shmguard_certificate_reloads_total counter\n";
  out += "shmguard_certificate_reloads_total{result=\"ok\"} " + std::to_string(cert_ok_.load()) + "\n";
  out += "shmguard_certificate_reloads_total{result=\"failed\"} " + std::to_string(cert_failed_.load()) + "\n";
  out += "# HELP shmguard_config_reloads_total Config reloads from disk, by result.\n";
  out += "# TYPE shmguard_config_reloads_total counter\n";
  out += "shmguard_config_reloads_total{result=\"ok\"} " + std::to_string(config_ok_.load()) + "\n";
  out += "shmguard_config_reloads_total{result=\"failed\"} " + std::to_string(config_failed_.load()) + "\n";
  out += "# HELP shmguard_build_info Build information.\n";
  out += "# TYPE shmguard_build_info gauge\n";
  out += "shmguard_build_info{version=\"" SHMGUARD_VERSION "\"} 1\n";
  return out;
}

}  // namespace shmguard::server
