// `shmguard serve`: the admission webhook, until SIGTERM.
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>

#include <memory>

#include "cli/shared.h"
#include "server/log.h"
#include "server/server.h"

namespace shmguard::cli {
namespace {

int run_serve(server::ServeOptions opts, const std::string& log_level) {
  const auto lvl = server::parse_log_level(log_level);
  if (!lvl) return fail("--log-level must be " + server::log_level_names());
  server::set_log_level(*lvl);
  // Many idle keep-alive connections are fine, but each needs a descriptor.
  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
  ::signal(SIGPIPE, SIG_IGN);
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);  // inherited by every thread started below

  server::WebhookServer srv(opts);
  if (auto started = srv.start(); !started) {
    server::log(server::Level::kError, "cannot start", {{"error", started.error()}});
    return fail(started.error(), kExitCannotStart);
  }
  int sig = 0;
  sigwait(&set, &sig);
  server::log(server::Level::kInfo, "signal received", {{"signal", sig == SIGTERM ? "SIGTERM" : "SIGINT"}});
  srv.shutdown();
  srv.wait();
  return kExitOk;
}

}  // namespace

void add_serve(CLI::App& app, Outcome& out) {
  auto a = std::make_shared<server::ServeOptions>();
  auto log_level = std::make_shared<std::string>("info");
  auto* c = app.add_subcommand("serve", "Run the admission webhook (HTTPS) and the metrics listener");
  set_usage(*c, {.input = "a PEM serving certificate and key (re-read when they change, the Secret volume's symlink swap "
                         "included) and an optional YAML config (--config, re-read); on --port, POST /mutate takes "
                         "an AdmissionReview (admission.k8s.io/v1 or v1beta1) as JSON",
                .output = "the AdmissionReview response (a JSON Patch, warnings) for the request's apiVersion and uid; "
                          "GET /healthz and /readyz on both ports; Prometheus text at /metrics on --metrics-port; "
                          "one JSON log line per event on stderr",
                .exits = {{kExitOk, "stopped by SIGTERM or SIGINT, after draining (--shutdown-delay-ms)"},
                          {kExitCannotStart, "cannot start (the certificate, the config, the port)"},
                          {kExitBadInput, "bad flags"}}});
  c->add_option("--tls-cert-file", a->cert_file, "PEM serving certificate (chain)")->required();
  c->add_option("--tls-private-key-file", a->key_file, "PEM private key")->required();
  c->add_option("--config", a->config_file, "YAML config file (re-read on change)");
  c->add_option("--kubeconfig", a->kubeconfig,
                "the API server for the owner lookup (a JobSet's shmguard.io/ annotations); in a pod the service account is used");
  c->add_option("--port", a->port, "HTTPS port for /mutate, /healthz, /readyz (0: any)")->capture_default_str();
  c->add_option("--metrics-port", a->metrics_port, "plain HTTP port for /metrics, /healthz, /readyz (-1: off)")
      ->capture_default_str();
  c->add_option("--bind-address", a->bind_address, "address to listen on")->capture_default_str();
  c->add_option("--tls-min-version", a->tls_min_version, "1.2 or 1.3")->capture_default_str();
  c->add_option("--log-level", *log_level, server::log_level_names())->capture_default_str();
  c->add_option("--threads", a->loop.threads, "event-loop threads (0: one per core)")->capture_default_str();
  c->add_option("--shutdown-delay-ms", a->shutdown_delay_ms, "how long to keep serving after SIGTERM with readiness false")
      ->capture_default_str();
  c->add_option("--reload-interval-ms", a->reload_interval_ms, "how often certificate and config files are checked")
      ->capture_default_str();
  c->add_option("--idle-timeout-ms", a->loop.idle_timeout_ms, "how long a keep-alive connection may wait between requests")
      ->capture_default_str();
  c->add_option("--max-body-bytes", a->loop.max_body_bytes, "largest request body (larger: 413)")->capture_default_str();
  c->add_option("--request-timeout-ms", a->loop.request_timeout_ms, "deadline for the TLS handshake and a whole request")
      ->capture_default_str();
  c->callback([a, log_level, &out] { out.code = run_serve(*a, *log_level); });
}

}  // namespace shmguard::cli
