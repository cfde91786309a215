// `shmguard monitor`: its flags, and `--check` (the chart's `helm test`); the loop itself is
// scrape/loop.h.
#include <httplib.h>

#include <chrono>
#include <iostream>
#include <memory>
#include <sstream>
#include <thread>

#include "cli/exit_codes.h"
#include "cli/shared.h"
#include "scrape/loop.h"
#include "scrape/monitor_check.h"
#include "sizing/quantity.h"

namespace shmguard::cli {
namespace {

// `shmguard monitor --check URL`: asks a running monitor for its metrics until it has done a cycle
// and, with `expect_pod`, reports that pod's /dev/shm (so the pod list, the kubelet's
// authentication and authorization of the monitor's token, and the summary all worked). Exit 0
// with what it saw; 1 when the time runs out, naming what was missing and each node's failed
// scrapes.
struct MonitorCheckArgs {
  std::string url;         // http://HOST:PORT of the monitor's listener
  std::string expect_pod;  // NAMESPACE/NAME, or ""
  int timeout_s = 180;
};

scrape::MonitorSeen look(httplib::Client& cli, const std::string& ns, const std::string& pod) {
  auto res = cli.Get("/metrics");
  scrape::MonitorSeen seen;
  if (!res) return seen.error = httplib::to_string(res.error()), seen;
  if (res->status != 200) return seen.error = "HTTP " + std::to_string(res->status), seen;
  return scrape::seen_in_metrics(res->body, ns, pod);
}

std::string bytes(const std::optional<monitor::Sample>& s) {
  return s ? sizing::format_quantity(static_cast<std::uint64_t>(s->value)) : "?";
}

int run_monitor_check(const MonitorCheckArgs& a) {
  const std::string prefix = "http://";
  if (a.url.compare(0, prefix.size(), prefix) != 0) return fail("monitor", "--check " + a.url + ": want http://HOST:PORT");
  const std::string ns = a.expect_pod.substr(0, a.expect_pod.find('/'));
  const std::string pod = a.expect_pod.find('/') == std::string::npos ? "" : a.expect_pod.substr(a.expect_pod.find('/') + 1);
  if (!a.expect_pod.empty() && (ns.empty() || pod.empty())) return fail("monitor", "--expect-pod " + a.expect_pod + ": want NAMESPACE/NAME");
  httplib::Client cli(a.url.substr(0, a.url.find('/', prefix.size())));
  cli.set_connection_timeout(5);
  cli.set_read_timeout(10);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(a.timeout_s);
  scrape::MonitorSeen seen;
  for (;;) {
    seen = look(cli, ns, pod);
    if (seen.cycles >= 1 && (pod.empty() || seen.size)) break;
    if (std::chrono::steady_clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::seconds(2));
  }
  std::ostringstream nodes;
  for (const auto& [name, v] : seen.nodes)
    nodes << "\n  node " << name << ": " << static_cast<std::uint64_t>(v.first) << " failed scrapes, "
          << (v.second < 0 ? std::string("never a good one (the monitor's log says why)")
                           : "last good one " + std::to_string(static_cast<long>(v.second)) + "s ago");
  if (seen.cycles < 1) {
    std::cerr << "shmguard monitor --check: " << a.url << " did no cycle in " << a.timeout_s << "s"
              << (seen.error.empty() ? "" : ": " + seen.error) << nodes.str() << "\n";
    return kExitFindings;
  }
  if (!pod.empty() && !seen.size) {
    std::cerr << "shmguard monitor --check: after " << static_cast<std::uint64_t>(seen.cycles) << " cycles the monitor at "
              << a.url << " has no /dev/shm figures for " << a.expect_pod << " (the kubelet reports a volume about a "
              << "minute after the pod starts)" << nodes.str() << "\n";
    return kExitFindings;
  }
  std::cout << "shmguard monitor at " << a.url << ": " << static_cast<std::uint64_t>(seen.cycles) << " cycles";
  if (!pod.empty())
    std::cout << "; " << a.expect_pod << ": /dev/shm " << bytes(seen.used) << " used of " << bytes(seen.size) << " (peak "
              << bytes(seen.peak) << ")";
  std::cout << nodes.str() << "\n";
  return kExitOk;
}

int run_loop(const scrape::LoopOptions& a, const std::string& config_file) {
  auto cfg = load_config(config_file);
  if (!cfg) return fail(cfg.error());
  const Status ran = scrape::run_monitor(a, *cfg);
  return ran ? kExitOk : fail("monitor", ran.error());
}

}  // namespace

void add_monitor(CLI::App& app, Outcome& out) {
  auto a = std::make_shared<scrape::LoopOptions>();
  auto check_args = std::make_shared<MonitorCheckArgs>();
  auto config = std::make_shared<std::string>();
  auto* c = app.add_subcommand("monitor", "Scrape every kubelet's /dev/shm use on a period; serve Prometheus metrics; warn at 90% with an Event");
  set_usage(*c, {.input = "the API server (in-cluster or --kubeconfig): a pod list and watch, the nodes, the namespaces' "
                         "labels, shmguard's MutatingWebhookConfiguration; each kubelet's Summary API; --config: "
                         "the webhook's config",
                .output = "Prometheus text at http://--listen/metrics, and /healthz; Warning Events ShmNearlyFull, "
                          "ShmUnprotected and ShmLeftover on the pods; a log on stderr. With --check: one line, what "
                          "the monitor reported",
                .exits = {{kExitOk, "stopped by SIGTERM (or after --cycles); with --check: the monitor did a cycle "
                                    "(and reported --expect-pod)"},
                          {kExitFindings, "with --check: not within --check-timeout"},
                          {kExitBadInput, "bad flags, kubeconfig or config, or --listen cannot be bound"}}});
  c->add_option("--kubeconfig", a->kubeconfig, "kubeconfig file (default: in-cluster)");
  c->add_option("--context", a->context, "kubeconfig context");
  c->add_option("--listen", a->listen, "HOST:PORT for /metrics and /healthz")->capture_default_str();
  c->add_option("--period", a->period_s, "seconds between scrape cycles")->capture_default_str();
  c->add_option("--kubelet-timeout", a->timeout_s, "seconds per kubelet (and API request)")->capture_default_str();
  c->add_option("--parallel", a->parallel, "kubelets read at once")->capture_default_str();
  c->add_option("--kubelet-ca", a->kubelet_ca, "PEM CA of the kubelets' serving certificates (default: the API server's CA)")->check(CLI::ExistingFile);
  c->add_flag("--kubelet-insecure-tls", a->kubelet_insecure_tls, "do not verify the kubelets' serving certificates");
  c->add_flag("!--no-events", a->events, "do not write the 90% and unprotected Events");
  c->add_option("--webhook-configuration", a->webhook_configuration,
      "shmguard's MutatingWebhookConfiguration, to say why a pod is unprotected (default: the one labelled "
      "app.kubernetes.io/name=shmguard)");
  c->add_option("--cycles", a->cycles, "stop after this many cycles (0: until SIGTERM)")->capture_default_str();
  c->add_option("--node-name", a->node_name,
      "DaemonSet mode: watch only this node's pods (fieldSelector spec.nodeName) and read only its kubelet");
  c->add_option("--kubelet-address", a->kubelet_address,
      "with --node-name: the kubelet's address (the downward API's status.hostIP; default: the Node's, "
      "which needs `get nodes`)");
  c->add_option("--kubelet-port", a->kubelet_port, "with --kubelet-address: the kubelet's port")->capture_default_str();
  c->add_option("--node-refresh", a->node_refresh_s,
      "seconds after which the node list is read again (and whenever a pod runs on a node it does not name)")
      ->capture_default_str();
  c->add_option("--watch-timeout", a->watch_timeout_s,
      "the pod watch's timeoutSeconds: the API server ends it then and the monitor watches again")->capture_default_str();
  c->add_option("--config", *config, "YAML config file (headroom and min, for the suggestion)");
  auto* check = c->add_option("--check", check_args->url,
      "instead of monitoring: ask the monitor at http://HOST:PORT until it has done a cycle "
      "(what `helm test` runs)");
  c->add_option("--expect-pod", check_args->expect_pod,
      "with --check: also until it reports this pod's /dev/shm (NAMESPACE/NAME)")->needs(check);
  c->add_option("--check-timeout", check_args->timeout_s, "with --check: seconds to keep asking")
      ->needs(check)->capture_default_str();
  c->callback([a, check_args, config, &out] {
    if (!check_args->url.empty()) {
      out.code = run_monitor_check(*check_args);
      return;
    }
    out.code = run_loop(*a, *config);
  });
}

}  // namespace shmguard::cli
