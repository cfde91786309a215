// `shmguard serve`: the HTTPS webhook listener, the plain metrics/health listener, certificate
// and config reload, and graceful shutdown. Knows HTTP and TLS; never looks at pod fields.
#pragma once

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "admission/review.h"
#include "config/config.h"
#include "server/cert_store.h"
#include "server/event_loop.h"
#include "server/metrics.h"
#include "server/owner_lookup.h"


namespace shmguard::server {

struct ServeOptions {
  std::string cert_file;
  std::string key_file;
  std::string config_file;  // empty: built-in defaults
  std::string bind_address = "0.0.0.0";
  int port = 8443;          // 0 picks a free port (logged)
  int metrics_port = 9090;  // 0 picks a free port (logged); -1 disables
  std::string tls_min_version = "1.2";
  LoopOptions loop{.threads = 0};    // the webhook port's event loop; threads 0: one per core
  int reload_interval_ms = 1000;     // how often cert/config files are checked
  int shutdown_delay_ms = 1000;      // readiness false -> stop accepting
  // The owner lookup's way to the API server: this kubeconfig, else (in a pod) the service account;
  // neither: no lookups (logged at start).
  std::string kubeconfig;
};

class WebhookServer {
 public:
  explicit WebhookServer(ServeOptions opts);
  ~WebhookServer();

  // Loads certificate and config, binds both ports; the failure says which and why.
  Status start();
  // Blocks until shutdown() completes the drain.
  void wait();
  // Readiness goes false, new work is refused after the delay, in-flight requests finish.
  void shutdown();

  int port() const { return port_; }
  int metrics_port() const { return metrics_port_; }

 private:
  void reload_loop();
  void check_reload();
  std::shared_ptr<const config::Config> config() const;
  Status setup_tls();
  void setup_owner_lookup();
  void tls_failed(const TlsFailure& why);
  // A port's routes: the first row with the request's path and method (or HEAD, for a row that
  // answers it too) answers it; a path in no row is a 404 (`not_found`), a path with other methods
  // only a 405 ("use <method>").
  using Handler = void (WebhookServer::*)(const HttpRequest&, HttpResponse&);
  struct Route {
    const char* method;
    const char* path;
    Handler handler;
    bool head_too = false;  // HEAD is answered as this GET (the body left out by the HTTP layer)
  };
  void route(const Route* routes, std::size_t n, const char* not_found, const HttpRequest& req, HttpResponse& res);
  void handle_https(const HttpRequest& req, HttpResponse& res);
  void handle_http(const HttpRequest& req, HttpResponse& res);
  void healthz(const HttpRequest& req, HttpResponse& res);
  void readyz(const HttpRequest& req, HttpResponse& res);
  void metrics(const HttpRequest& req, HttpResponse& res);
  void mutate(const HttpRequest& req, HttpResponse& res);

  ServeOptions opts_;
  CertStore certs_;
  Metrics metrics_;
  std::unique_ptr<OwnerLookup> owners_;  // null: no API access
  mutable std::mutex config_mu_;
  std::shared_ptr<const config::Config> config_;
  FileStamp config_stamp_;

  SSL_CTX* ssl_ctx_ = nullptr;
  std::unique_ptr<EventLoopServer> https_;
  std::unique_ptr<EventLoopServer> http_;
  std::thread reload_thread_;
  int port_ = 0;
  int metrics_port_ = 0;
  std::atomic<bool> ready_{false};
  std::atomic<std::int64_t> last_tls_log_ms_{-1000000};
  std::atomic<bool> stopping_{false};
  bool https_started_ = false;
  std::mutex stop_mu_;
  std::condition_variable stop_cv_;
};

}  // namespace shmguard::server
