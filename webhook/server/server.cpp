// The webhook server (see server.h). The data path is:
// bytes -> admission::handle_review (AdmissionReview -> pod -> inject -> patch) -> bytes.
#include "server/server.h"

#include <openssl/err.h>

#include <chrono>
#include <cstdlib>
#include <iterator>

#include "admission/response.h"
#include "admission/review.h"
#include "base/reason.h"
#include "base/text.h"
#include "server/log.h"
#include "server/record.h"

namespace shmguard::server {
namespace {

using Clock = std::chrono::steady_clock;

// TLS 1.2 suites: ECDHE key exchange with AEAD ciphers only. TLS 1.3 suites are all AEAD.
constexpr const char* kTls12Ciphers =
    "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:"
    "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:"
    "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305";

bool json_content_type(const std::string* ct) {
  if (!ct) return false;
  const std::string lower = lowercase(*ct);
  return trim_end(std::string_view(lower).substr(0, lower.find(';'))) == "application/json";
}

// The HTTP form of an outcome: a request refused as no review is a 4xx with the reason as text
// (415 for its content type, else 400), anything else a 200 with the response review.
void reply(admission::AdmissionOutcome& out, HttpResponse& res) {
  if (out.decision == admission::Decision::kRejected) {
    res.status = out.reason == Reason::kContentType ? 415 : 400;
    res.body = out.error + "\n";
    return;
  }
  res.content_type = "application/json";
  res.body = std::move(out.body);
}

}  // namespace

WebhookServer::WebhookServer(ServeOptions opts)
    : opts_(std::move(opts)), certs_(opts_.cert_file, opts_.key_file) {}

WebhookServer::~WebhookServer() {
  shutdown();
  wait();
  if (ssl_ctx_) SSL_CTX_free(ssl_ctx_);
}

std::shared_ptr<const config::Config> WebhookServer::config() const {
  std::lock_guard<std::mutex> lock(config_mu_);
  return config_;
}

Status WebhookServer::setup_tls() {
  ssl_ctx_ = SSL_CTX_new(TLS_server_method());
  if (!ssl_ctx_) return Failure{"SSL_CTX_new: " + openssl_error()};
  int min = opts_.tls_min_version == "1.3" ? TLS1_3_VERSION : TLS1_2_VERSION;
  SSL_CTX_set_min_proto_version(ssl_ctx_, min);
  SSL_CTX_set_options(ssl_ctx_, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION |
                                    SSL_OP_CIPHER_SERVER_PREFERENCE);
  SSL_CTX_set_mode(ssl_ctx_, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  if (SSL_CTX_set_cipher_list(ssl_ctx_, kTls12Ciphers) != 1) return Failure{"cipher list: " + openssl_error()};
  // Only HTTP/1.1 is spoken; no ALPN callback means h2 is never negotiated.
  SSL_CTX_set_session_cache_mode(ssl_ctx_, SSL_SESS_CACHE_SERVER);
  certs_.attach(ssl_ctx_);
  return Ok{};
}

// Counted always; logged at most once a second, so a flood of bad clients cannot flood the log.
void WebhookServer::tls_failed(const TlsFailure& why) {
  metrics_.tls_handshake_failure(why.reason);
  const std::int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                                  std::chrono::steady_clock::now().time_since_epoch()).count();
  std::int64_t last = last_tls_log_ms_.load();
  if (now_ms - last < 1000 || !last_tls_log_ms_.compare_exchange_strong(last, now_ms)) return;
  log(Level::kWarn, "TLS handshake failed", {{"reason", why.reason}, {"error", why.detail}});
}

void WebhookServer::setup_owner_lookup() {
  const bool in_pod = std::getenv("KUBERNETES_SERVICE_HOST") != nullptr;
  if (opts_.kubeconfig.empty() && !in_pod) {
    log(Level::kInfo, "owner lookup off: no --kubeconfig and not in a pod (a JobSet's annotations are not read)");
    return;
  }
  OwnerLookup::AccessSource source = [kc = opts_.kubeconfig] { return kube::load_access(kc, ""); };
  if (auto a = source(); !a) {
    log(Level::kWarn, "owner lookup off: no access to the API server", {{"error", a.error()}});
    return;
  }
  owners_ = std::make_unique<OwnerLookup>(std::move(source));
  log(Level::kInfo, "owner lookup on: a JobSet's shmguard.io/ annotations size its pods that carry none");
}

Status WebhookServer::start() {
  if (opts_.tls_min_version != "1.2" && opts_.tls_min_version != "1.3") {
    return Failure{"--tls-min-version must be 1.2 or 1.3"};
  }
  if (auto loaded = certs_.load(); !loaded) {
    return Failure{"loading the serving certificate: " + loaded.error()};
  }
  auto pair = certs_.current();
  metrics_.set_cert_expiry(static_cast<double>(pair->not_after));
  log(Level::kInfo, "certificate loaded", {{"subject", pair->subject}, {"not_after", pair->not_after}});

  if (opts_.config_file.empty()) {
    config_ = std::make_shared<const config::Config>();
  } else {
    config_stamp_ = stamp_of(opts_.config_file);
    auto r = config::load_config_file(opts_.config_file);
    if (!r.ok()) return Failure{r.error()};
    config_ = std::make_shared<const config::Config>(std::move(*r));
  }
  if (auto tls = setup_tls(); !tls) return tls;
  setup_owner_lookup();

  LoopOptions lo = opts_.loop;
  if (lo.threads <= 0) lo.threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  lo.name = "https";
  lo.on_tls_failure = [this](const TlsFailure& why) { tls_failed(why); };
  auto reject = [this](int status) {
    metrics_.http_response(status);
    count_refusal(metrics_, http_reason(status));
  };
  https_ = std::make_unique<EventLoopServer>(
      lo, ssl_ctx_, [this](const HttpRequest& q, HttpResponse& s) { handle_https(q, s); }, reject);
  if (auto b = https_->bind(opts_.bind_address, opts_.port); !b) return b;
  port_ = https_->port();
  if (opts_.metrics_port >= 0) {
    LoopOptions mo = lo;
    mo.threads = 1;
    mo.name = "metrics";
    mo.max_body_bytes = 64 * 1024;
    mo.max_connections = 256;
    http_ = std::make_unique<EventLoopServer>(mo, nullptr,
                                              [this](const HttpRequest& q, HttpResponse& s) { handle_http(q, s); });
    if (auto b = http_->bind(opts_.bind_address, opts_.metrics_port); !b) return b;
    metrics_port_ = http_->port();
    http_->start();
  }
  https_->start();
  https_started_ = true;
  reload_thread_ = std::thread([this] { reload_loop(); });
  ready_ = true;
  log(Level::kInfo, "serving",
      {{"port", port_}, {"metrics_port", metrics_port_}, {"tls_min_version", opts_.tls_min_version},
       {"threads", lo.threads}});
  return Ok{};
}

void WebhookServer::route(const Route* routes, std::size_t n, const char* not_found, const HttpRequest& req,
                          HttpResponse& res) {
  const char* allowed = nullptr;
  for (const Route* r = routes; r != routes + n; ++r) {
    if (req.path != r->path) continue;
    if (req.method == r->method || (r->head_too && req.method == "HEAD")) return (this->*r->handler)(req, res);
    if (!allowed) allowed = r->method;
  }
  res.status = allowed ? 405 : 404;
  res.body = allowed ? std::string("use ") + allowed + "\n" : not_found;
}

// The webhook port: the API server's reviews, and health for whoever asks there.
void WebhookServer::handle_https(const HttpRequest& req, HttpResponse& res) {
  static constexpr Route kRoutes[] = {
      {"POST", "/mutate", &WebhookServer::mutate},
      {"GET", "/healthz", &WebhookServer::healthz},
      {"GET", "/readyz", &WebhookServer::readyz},
  };
  route(kRoutes, std::size(kRoutes), "not found: POST /mutate\n", req, res);
  metrics_.http_response(res.status);
}

// The plain port: probes and Prometheus, GET or HEAD.
void WebhookServer::handle_http(const HttpRequest& req, HttpResponse& res) {
  static constexpr Route kRoutes[] = {
      {"GET", "/metrics", &WebhookServer::metrics, true},
      {"GET", "/healthz", &WebhookServer::healthz, true},
      {"GET", "/readyz", &WebhookServer::readyz, true},
  };
  route(kRoutes, std::size(kRoutes), "not found\n", req, res);
}

void WebhookServer::healthz(const HttpRequest&, HttpResponse& res) { res.body = "ok\n"; }

void WebhookServer::readyz(const HttpRequest&, HttpResponse& res) {
  if (ready_) {
    res.body = "ok\n";
  } else {
    res.status = 503;
    res.body = "shutting down\n";
  }
}

void WebhookServer::metrics(const HttpRequest&, HttpResponse& res) {
  res.content_type = "text/plain; version=0.0.4";
  res.body = metrics_.render();
}

// POST /mutate: the review answered (admission/response.h), counted and logged (record.h).
void WebhookServer::mutate(const HttpRequest& req, HttpResponse& res) {
  auto start = Clock::now();
  if (!json_content_type(req.header("content-type"))) {
    auto out = admission::refused(Reason::kContentType, "Content-Type must be application/json");
    count_refusal(metrics_, out.reason);
    return reply(out, res);
  }
  auto cfg = config();
  admission::OwnerLookup lookup;
  if (owners_ && cfg->owner_lookup.enabled)
    lookup = [this, &cfg](const std::string& ns, const std::string& jobset) {
      return owners_->lookup(ns, jobset, cfg->owner_lookup);
    };
  auto out = admission::handle_review(req.body, *cfg, lookup);
  record_admission(metrics_, out, std::chrono::duration<double>(Clock::now() - start).count());
  reply(out, res);
}

void WebhookServer::check_reload() {
  if (certs_.changed()) {
    if (auto loaded = certs_.load(); loaded) {
      auto pair = certs_.current();
      metrics_.cert_reload(true);
      metrics_.set_cert_expiry(static_cast<double>(pair->not_after));
      log(Level::kInfo, "certificate reloaded", {{"subject", pair->subject}, {"not_after", pair->not_after}});
    } else {
      metrics_.cert_reload(false);
      log(Level::kError, "certificate reload failed; keeping the previous certificate", {{"error", loaded.error()}});
    }
  }
  if (!opts_.config_file.empty()) {
    auto st = stamp_of(opts_.config_file);
    if (!(st == config_stamp_)) {
      config_stamp_ = st;
      auto r = config::load_config_file(opts_.config_file);
      if (r.ok()) {
        std::lock_guard<std::mutex> lock(config_mu_);
        config_ = std::make_shared<const config::Config>(std::move(*r));
        metrics_.config_reload(true);
        log(Level::kInfo, "config reloaded", {{"file", opts_.config_file}});
      } else {
        metrics_.config_reload(false);
        log(Level::kError, "config reload failed; keeping the previous config", {{"error", r.error()}});
      }
    }
  }
}

void WebhookServer::reload_loop() {
  std::unique_lock<std::mutex> lock(stop_mu_);
  while (!stopping_) {
    stop_cv_.wait_for(lock, std::chrono::milliseconds(opts_.reload_interval_ms));
    if (stopping_) break;
    lock.unlock();
    check_reload();
    lock.lock();
  }
}

void WebhookServer::shutdown() {
  if (stopping_.exchange(true)) return;
  ready_ = false;
  {
    std::lock_guard<std::mutex> lock(stop_mu_);
  }
  stop_cv_.notify_all();
  if (!https_ || !https_started_) return;  // start() failed: nothing to drain, exit at once
  log(Level::kInfo, "shutting down: readiness false, draining", {{"delay_ms", opts_.shutdown_delay_ms}});
  // Keep serving while endpoints controllers and kube-proxy notice the readiness change, closing
  // each connection after its response: a kept-alive connection would otherwise carry the API
  // server's requests to this pod until it stops (kube-proxy's rules only steer new connections),
  // and a request that meets the closing socket admits its pod unchanged.
  https_->close_after_responses();
  if (opts_.shutdown_delay_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(opts_.shutdown_delay_ms));
  https_->stop();
  if (http_) http_->stop();
  log(Level::kInfo, "stopped");
}

void WebhookServer::wait() {
  if (reload_thread_.joinable()) reload_thread_.join();
}

}  // namespace shmguard::server
