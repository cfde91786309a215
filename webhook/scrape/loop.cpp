// `shmguard monitor` (see monitor.h).
#include "cli/monitor.h"

#include <httplib.h>
#include <memory>
#include <signal.h>
#include <sys/resource.h>

#include <atomic>
#include <chrono>
#include <ctime>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <mutex>
#include <sstream>
#include <thread>
#include <unordered_set>

#include "base/parallel.h"
#include "base/text.h"
#include "cli/command.h"
#include "cli/exit_codes.h"
#include "cli/kube_stats.h"
#include "monitor/tracker.h"
#include "sizing/quantity.h"

namespace shmguard::cli {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

std::atomic<bool> g_stop{false};
void on_term(int) { g_stop = true; }

std::string now_rfc3339() {
  const std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

// A Warning Event on the pod, as `reason` with `message`.
void write_event(const kube::Access& api, const MonitorArgs& a, const monitor::PodShm& p, const char* reason,
                 const std::string& message) {
  const json ev = {{"apiVersion", "v1"}, {"kind", "Event"},
                   {"metadata", {{"generateName", p.name + ".shmguard-"}, {"namespace", p.namespace_name}}},
                   {"involvedObject", {{"apiVersion", "v1"}, {"kind", "Pod"}, {"namespace", p.namespace_name},
                                       {"name", p.name}, {"uid", p.uid}}},
                   {"reason", reason}, {"message", message}, {"type", "Warning"},
                   {"source", {{"component", "shmguard-monitor"}}},
                   {"firstTimestamp", now_rfc3339()}, {"lastTimestamp", now_rfc3339()}, {"count", 1}};
  auto r = kube::post(api, "/api/v1/namespaces/" + url_encode(p.namespace_name) + "/events", ev, a.timeout_s);
  if (!r || (r->status != 201 && r->status != 200))
    std::cerr << ("shmguard monitor: event on " + p.namespace_name + "/" + p.name + ": " +  // one write: threads
                  (r ? kube::error_message(*r) + " (needs `create events`)" : r.error()) + "\n");
}

std::string nearly_full_message(const monitor::PodShm& p, const config::Config& cfg) {
  // `p` is nearly full, so a suggestion is always there; the fallback only keeps the types honest.
  const auto suggestion = monitor::suggestion(p, cfg.sizing).value_or(sizing::size_for_peak(p.peak, cfg.sizing));
  return "/dev/shm is " + std::to_string(p.peak * 100 / *p.capacity) + "% full (" + sizing::format_quantity(p.peak) +
         " of " + sizing::format_quantity(*p.capacity) +
         "); a DataLoader that needs more dies with a bus error. Suggested: shmguard.io/size: " +
         sizing::format_quantity(suggestion) + " on the pod template (or its batch-size/num-workers/sample-size)";
}

std::string leftover_message(const monitor::PodShm& p) {
  return "container " + p.restarted_container + " restarted (exit code " + std::to_string(p.restart_exit_code) +
         (p.restart_finished.empty() ? "" : " at " + p.restart_finished) + ") and its /dev/shm still holds " +
         sizing::format_quantity(p.du_bytes) + " of files (" + sizing::format_quantity(p.used.value_or(p.du_bytes)) +
         " in use of " + sizing::format_quantity(p.capacity.value_or(0)) +
         "): segments the dead process left behind live as long as the pod, count against its memory limit and "
         "leave the next run less room; remove them when the container starts (e.g. rm -f /dev/shm/nccl-* /dev/shm/torch_*), "
         "or recreate the pod";
}

// CPU time of the whole process (the watcher's thread too), in milliseconds.
long cpu_ms() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return (u.ru_utime.tv_sec + u.ru_stime.tv_sec) * 1000L + (u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1000;
}

double wall_s() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// What the HTTP handlers and the scrape loop share.
struct Shared {
  std::mutex mu;
  monitor::Tracker tracker;
  std::string watch_text;  // the watch's metrics at the last cycle
  long cpu_ms_at_last = 0;  // the process's CPU at the end of the last cycle
  bool ready = false;  // a cycle was done: /healthz says ok
};

// Where the kubelets are: in Deployment mode the node list, read again after --node-refresh or
// when a pod runs on a node it does not name; in DaemonSet mode the one kubelet of --node-name.
class Kubelets {
 public:
  Kubelets(const kube::Access& api, const MonitorArgs& a, std::string ca) : api_(api), a_(a), ca_(std::move(ca)) {}

  Result<std::vector<NodeTarget>> for_pods(const std::vector<monitor::PodShm>& pods) {
    if (!a_.node_name.empty()) return own();
    const auto now = Clock::now();
    bool stale = !read_ || now - read_at_ > std::chrono::seconds(a_.node_refresh_s);
    for (const auto& p : pods)
      if (!stale && !p.volume.empty() && !p.node.empty() && !known(p.node)) stale = true;
    if (stale) {
      auto nodes = list_kubelets(api_, a_.timeout_s, ca_, a_.kubelet_insecure_tls);
      if (!nodes) return nodes.failure_part();
      nodes_ = std::move(*nodes);
      read_ = true;
      read_at_ = now;
      ++lists_;
    }
    return nodes_;
  }
  std::uint64_t lists() const { return lists_; }

 private:
  bool known(const std::string& node) const {
    return std::any_of(nodes_.begin(), nodes_.end(), [&](const NodeTarget& n) { return n.name == node; });
  }
  Result<std::vector<NodeTarget>> own() {
    if (read_) return nodes_;
    std::string address = a_.kubelet_address;
    int port = a_.kubelet_port;
    if (address.empty()) {  // needs `get nodes`: the chart gives the downward API's status.hostIP instead
      auto r = kube::get(api_, "/api/v1/nodes/" + url_encode(a_.node_name), a_.timeout_s, true);
      if (!r) return r.failure_part();
      if (r->status != 200)
        return Failure{"cannot read node " + a_.node_name + ": " + kube::error_message(*r) + " (give --kubelet-address)"};
      const auto found = monitor::kubelet_addresses({{"items", {monitor::parse_node_list(r->text)}}});
      if (found.empty()) return Failure{"node " + a_.node_name + " has no address"};
      address = found[0].address;
      port = found[0].port;
    }
    nodes_ = {{a_.node_name, kube::at_kubelet(api_, address, port, ca_.empty() ? api_.ca_pem : ca_, a_.kubelet_insecure_tls)}};
    read_ = true;
    return nodes_;
  }

  const kube::Access& api_;
  const MonitorArgs& a_;
  const std::string ca_;
  std::vector<NodeTarget> nodes_;
  bool read_ = false;
  Clock::time_point read_at_;
  std::uint64_t lists_ = 0;
};

// The watch's own figures, beside the tracker's (exposition format).
std::string watch_exposition(const PodWatcher::Snapshot& s, std::size_t kept, std::uint64_t node_lists) {
  std::string out;
  auto counter = [&](const char* name, const char* help, std::uint64_t v, const char* type = "counter") {
    out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n" + name + " " +
           std::to_string(v) + "\n";
  };
  out += "# HELP shmguard_monitor_watch_events_total Pod watch events applied, by type.\n"
         "# TYPE shmguard_monitor_watch_events_total counter\n";
  for (const auto& [type, n] : {std::pair<const char*, std::uint64_t>{"ADDED", s.counts.added}, {"MODIFIED", s.counts.modified},
                                {"DELETED", s.counts.deleted}, {"BOOKMARK", s.counts.bookmarks}, {"ERROR", s.counts.errors}})
    out += std::string("shmguard_monitor_watch_events_total{type=\"") + type + "\"} " + std::to_string(n) + "\n";
  counter("shmguard_monitor_pod_lists_total", "Full lists of the pods (the first, and after 410 Gone).", s.counts.relists);
  counter("shmguard_monitor_node_lists_total", "Lists of the nodes (Deployment mode).", node_lists);
  counter("shmguard_monitor_api_read_bytes_total", "Bytes read from the API server by the pod lists and watches.", s.api_bytes);
  counter("shmguard_monitor_pods_kept", "Pods the monitor keeps from its watch.", kept, "gauge");
  return out;
}

// The cycle's Events: in parallel as the scrapes (500 pods crossing 90% at once are 500 POSTs).
void write_events(const kube::Access& api, const MonitorArgs& a, const config::Config& cfg, const monitor::Judge& judge,
                  const std::vector<monitor::PodShm>& full, const std::vector<monitor::PodShm>& unprotected,
                  const std::vector<monitor::PodShm>& leftover) {
  parallel_for(full.size(), a.parallel, [&](unsigned, std::size_t i) {
    write_event(api, a, full[i], "ShmNearlyFull", nearly_full_message(full[i], cfg));
  });
  parallel_for(unprotected.size(), a.parallel, [&](unsigned, std::size_t i) {
    const auto& p = unprotected[i];
    write_event(api, a, p, "ShmUnprotected", monitor::unprotected_message(p.protection, p.namespace_name, judge));
  });
  for (const auto& p : leftover) write_event(api, a, p, "ShmLeftover", leftover_message(p));
}

// The kept pods, every kubelet's summary, the tracker's update, the Events; one log line.
void one_cycle(const kube::Access& api, const MonitorArgs& a, const config::Config& cfg, Kubelets& kubelets,
               const PodWatcher& watcher, int cycle, Shared& state) {
  const auto t0 = Clock::now();
  // The webhook configuration and the namespaces say why a pod was missed: read only when the
  // engine found one (at its event), so a cycle of protected pods asks the API server nothing.
  monitor::Judge judge;
  judge.cfg = &cfg;
  bool loaded = false;
  auto load = [&] {
    judge = load_judge(api, cfg, a.webhook_configuration, {true, "", ""}, a.timeout_s);
    loaded = true;
    if (!judge.webhook.error.empty()) std::cerr << "shmguard monitor: cycle " << cycle << ": " << judge.webhook.error << "\n";
  };
  if (watcher.any_missing()) load();
  PodWatcher::Snapshot snap = watcher.snapshot(judge);
  if (snap.any_missing && !loaded) load(), snap = watcher.snapshot(judge);  // one came in meanwhile
  std::vector<monitor::PodShm>& pods = snap.pods;
  const std::size_t kept = snap.kept;
  auto nodes = kubelets.for_pods(pods);
  if (!nodes) {
    std::cerr << "shmguard monitor: cycle " << cycle << ": " << nodes.error() << "\n";
    return;
  }
  std::vector<NodeTarget> wanted;  // only nodes that run a pod with a /dev/shm
  {
    std::unordered_set<std::string> with_shm;
    for (const auto& p : pods)
      if (!p.volume.empty()) with_shm.insert(p.node);
    for (const auto& n : *nodes)
      if (with_shm.count(n.name)) wanted.push_back(n);
  }
  auto scrapes = read_summaries(api, wanted, pods, a.timeout_s, a.parallel);
  std::size_t failed = 0;
  for (const auto& s : scrapes)
    if (!s.ok) ++failed, std::cerr << "shmguard monitor: node " << s.node << ": " << s.error << "\n";
  const auto n_unprotected = std::count_if(pods.begin(), pods.end(), [](const monitor::PodShm& p) {
    return p.protection.reason != monitor::Unprotected::kNo;
  });
  const std::size_t n_pods = pods.size();
  std::vector<monitor::PodShm> full, unprotected, leftover;
  {
    std::lock_guard<std::mutex> lock(state.mu);
    state.tracker.update(std::move(pods), scrapes, wall_s());
    full = state.tracker.newly_full();
    unprotected = state.tracker.newly_unprotected();
    leftover = state.tracker.newly_leftover();
    state.watch_text = watch_exposition(snap, kept, kubelets.lists());
    state.ready = true;
  }
  if (a.events) write_events(api, a, cfg, judge, full, unprotected, leftover);

  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
  const long cpu = cpu_ms();
  const long cpu_since = cpu - state.cpu_ms_at_last;
  state.cpu_ms_at_last = cpu;
  std::cerr << "shmguard monitor: cycle " << cycle << ": " << n_pods - n_unprotected << " pods with a /dev/shm and "
            << n_unprotected << " unprotected, " << scrapes.size() << " nodes (" << failed << " failed) in " << ms
            << " ms, cpu " << cpu_since << " ms since the last; watch: " << snap.counts.relists << " lists, " << snap.counts.added + snap.counts.modified + snap.counts.deleted
            << " events, " << snap.api_bytes << " bytes read\n";
}

// What a monitor's metrics say, for --check.
struct Seen {
  double cycles = -1;                      // -1: no answer yet
  std::optional<monitor::Sample> size, used, peak;
  std::map<std::string, std::pair<double, double>> nodes;  // errors, last good age (-1: never)
  std::string error;                       // the last transport/HTTP failure
};

Seen look(httplib::Client& cli, const std::string& ns, const std::string& pod) {
  Seen seen;
  auto res = cli.Get("/metrics");
  if (!res) return seen.error = httplib::to_string(res.error()), seen;
  if (res->status != 200) return seen.error = "HTTP " + std::to_string(res->status), seen;
  for (auto& smp : monitor::parse_exposition(res->body)) {
    const bool ours = !pod.empty() && smp.labels["namespace"] == ns && smp.labels["pod"] == pod;
    if (smp.name == "shmguard_monitor_cycles_total") seen.cycles = smp.value;
    else if (ours && smp.name == "shmguard_shm_size_bytes") seen.size = smp;
    else if (ours && smp.name == "shmguard_shm_used_bytes") seen.used = smp;
    else if (ours && smp.name == "shmguard_shm_peak_bytes") seen.peak = smp;
    else if (smp.name == "shmguard_node_scrape_errors_total") seen.nodes.try_emplace(smp.labels["node"], 0, -1).first->second.first = smp.value;
    else if (smp.name == "shmguard_node_last_good_scrape_age_seconds") seen.nodes.try_emplace(smp.labels["node"], 0, -1).first->second.second = smp.value;
  }
  return seen;
}

std::string bytes(const std::optional<monitor::Sample>& s) {
  return s ? sizing::format_quantity(static_cast<std::uint64_t>(s->value)) : "?";
}

}  // namespace

int run_monitor_check(const MonitorCheckArgs& a) {
  const std::string prefix = "http://";
  if (a.url.compare(0, prefix.size(), prefix) != 0) return fail("monitor", "--check " + a.url + ": want http://HOST:PORT");
  const std::string ns = a.expect_pod.substr(0, a.expect_pod.find('/'));
  const std::string pod = a.expect_pod.find('/') == std::string::npos ? "" : a.expect_pod.substr(a.expect_pod.find('/') + 1);
  if (!a.expect_pod.empty() && (ns.empty() || pod.empty())) return fail("monitor", "--expect-pod " + a.expect_pod + ": want NAMESPACE/NAME");
  httplib::Client cli(a.url.substr(0, a.url.find('/', prefix.size())));
  cli.set_connection_timeout(5);
  cli.set_read_timeout(10);
  const auto deadline = Clock::now() + std::chrono::seconds(a.timeout_s);
  Seen seen;
  for (;;) {
    seen = look(cli, ns, pod);
    if (seen.cycles >= 1 && (pod.empty() || seen.size)) break;
    if (Clock::now() >= deadline) break;
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

int run_monitor(const MonitorArgs& a, const config::Config& cfg) {
  if (a.period_s < 1 || a.timeout_s < 1 || a.watch_timeout_s < 1 || a.node_refresh_s < 1)
    return fail("monitor", "--period, --kubelet-timeout, --watch-timeout and --node-refresh must be at least 1 second");
  auto api = kube::load_access(a.kubeconfig, a.context);
  if (!api) return fail("monitor", api.error());
  std::string ca;
  if (!a.kubelet_ca.empty()) {
    auto text = read_file(a.kubelet_ca);
    if (!text) return fail("monitor", text.error() + " (--kubelet-ca)");
    ca = std::move(*text);
  }
  const auto colon = a.listen.rfind(':');
  if (colon == std::string::npos) return fail("monitor", "--listen " + a.listen + ": want HOST:PORT");
  const std::string host = a.listen.substr(0, colon);
  const int port = std::atoi(a.listen.c_str() + colon + 1);

  Shared state;
  httplib::Server server;
  server.Get("/metrics", [&](const httplib::Request&, httplib::Response& res) {
    std::lock_guard<std::mutex> lock(state.mu);
    res.set_content(state.tracker.exposition(wall_s()) + state.watch_text, "text/plain; version=0.0.4; charset=utf-8");
  });
  server.Get("/healthz", [&](const httplib::Request&, httplib::Response& res) {
    std::lock_guard<std::mutex> lock(state.mu);
    res.status = state.ready ? 200 : 503;
    res.set_content(state.ready ? "ok\n" : "no cycle done yet\n", "text/plain");
  });
  if (!server.bind_to_port(host.c_str(), port)) return fail("monitor", "cannot listen on " + a.listen);
  std::thread http([&] { server.listen_after_bind(); });
  signal(SIGTERM, on_term);
  signal(SIGINT, on_term);
  signal(SIGPIPE, SIG_IGN);

  PodWatchOptions wo;
  if (!a.node_name.empty()) wo.field_selector = "spec.nodeName=" + a.node_name + "," + wo.field_selector;
  wo.request_timeout_s = std::max(a.timeout_s, 10);
  wo.watch_timeout_s = a.watch_timeout_s;
  PodWatcher watcher(*api, wo, &cfg);
  watcher.start();
  Kubelets kubelets(*api, a, ca);
  // The first cycle waits for the first list (as an informer's HasSynced), then each runs on the kept pods.
  for (int waited = 1; !g_stop; ++waited) {
    const Status synced = watcher.wait_synced(1);
    if (synced) break;
    if (waited % 30 == 0) std::cerr << "shmguard monitor: waiting for the first list of pods: " << synced.error() << "\n";
  }
  for (int cycle = 1; !g_stop && (a.cycles == 0 || cycle <= a.cycles); ++cycle) {
    one_cycle(*api, a, cfg, kubelets, watcher, cycle, state);
    if (a.cycles != 0 && cycle == a.cycles) break;
    for (int i = 0; i < a.period_s * 10 && !g_stop; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  watcher.stop();
  server.stop();
  http.join();
  return kExitOk;
}

void add_monitor(CLI::App& app, Outcome& out) {
  auto a = std::make_shared<MonitorArgs>();
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
    auto cfg = load_config(*config);
    out.code = cfg ? run_monitor(*a, *cfg) : fail(cfg.error());
  });
}

}  // namespace shmguard::cli
