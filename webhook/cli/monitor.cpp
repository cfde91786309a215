// `shmguard monitor` (see monitor.h).
#include "cli/monitor.h"

#include <httplib.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <ctime>
#include <fstream>
#include <iostream>
#include <mutex>
#include <sstream>
#include <thread>

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

int monitor_fail(const std::string& msg) {
  std::cerr << "shmguard monitor: " << msg << "\n";
  return kExitBadInput;
}

// Each node's kubelet: its InternalIP (else Hostname, ExternalIP) and its daemon endpoint port.
Result<std::vector<NodeTarget>> list_nodes(const kube::Access& api, const MonitorArgs& a, const std::string& ca) {
  auto r = kube::get(api, "/api/v1/nodes", a.timeout_s);
  if (!r) return r.failure_part();
  if (r->status != 200) return Failure{"cannot list nodes: " + kube::error_message(*r) + " (needs `list nodes`)"};
  std::vector<NodeTarget> out;
  for (const auto& n : r->body.value("items", json::array())) {
    const std::string name = n.value("metadata", json::object()).value("name", "");
    const json status = n.value("status", json::object());
    std::string address;
    for (const char* type : {"InternalIP", "Hostname", "ExternalIP"}) {
      for (const auto& ad : status.value("addresses", json::array()))
        if (address.empty() && ad.value("type", "") == type) address = ad.value("address", "");
    }
    int port = 10250;
    if (auto ep = status.value("daemonEndpoints", json::object()).value("kubeletEndpoint", json::object()); ep.contains("Port"))
      port = ep["Port"].is_number_integer() ? ep["Port"].get<int>() : port;
    if (name.empty() || address.empty()) continue;
    out.push_back({name, kube::at_kubelet(api, address, port, ca, a.kubelet_insecure_tls)});
  }
  return out;
}

std::string now_rfc3339() {
  const std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

void write_event(const kube::Access& api, const MonitorArgs& a, const monitor::PodShm& p, const config::Config& cfg) {
  // `p` is nearly full, so a suggestion is always there; the fallback only keeps the types honest.
  const auto suggestion = monitor::suggestion(p, cfg.sizing).value_or(sizing::size_for_peak(p.peak, cfg.sizing));
  const std::string msg = "/dev/shm is " + std::to_string(p.peak * 100 / *p.capacity) + "% full (" +
                          sizing::format_quantity(p.peak) + " of " + sizing::format_quantity(*p.capacity) +
                          "); a DataLoader that needs more dies with a bus error. Suggested: shmguard.io/size: " +
                          sizing::format_quantity(suggestion) + " on the pod template (or its batch-size/num-workers/sample-size)";
  const json ev = {{"apiVersion", "v1"}, {"kind", "Event"},
                   {"metadata", {{"generateName", p.name + ".shmguard-"}, {"namespace", p.namespace_name}}},
                   {"involvedObject", {{"apiVersion", "v1"}, {"kind", "Pod"}, {"namespace", p.namespace_name},
                                       {"name", p.name}, {"uid", p.uid}}},
                   {"reason", "ShmNearlyFull"}, {"message", msg}, {"type", "Warning"},
                   {"source", {{"component", "shmguard-monitor"}}},
                   {"firstTimestamp", now_rfc3339()}, {"lastTimestamp", now_rfc3339()}, {"count", 1}};
  auto r = kube::post(api, "/api/v1/namespaces/" + url_encode(p.namespace_name) + "/events", ev, a.timeout_s);
  if (!r || (r->status != 201 && r->status != 200))
    std::cerr << "shmguard monitor: event on " << p.namespace_name << "/" << p.name << ": "
              << (r ? kube::error_message(*r) + " (needs `create events`)" : r.error()) << "\n";
}

double wall_s() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// What the HTTP handlers and the scrape loop share.
struct Shared {
  std::mutex mu;
  monitor::Tracker tracker;
  bool ready = false;  // a cycle was done: /healthz says ok
};

// Nodes, pods, every kubelet's summary, the tracker's update, the Events; one log line.
void one_cycle(const kube::Access& api, const MonitorArgs& a, const config::Config& cfg, const std::string& ca, int cycle,
               Shared& state) {
  const auto t0 = Clock::now();
  auto nodes = list_nodes(api, a, ca);
  auto pods = nodes ? list_shm_pods(api, {true, "", ""}, a.timeout_s) : nodes.failure_part();
  if (!nodes || !pods) {
    std::cerr << "shmguard monitor: cycle " << cycle << ": " << (nodes ? pods.error() : nodes.error()) << "\n";
    return;
  }
  std::vector<NodeTarget> wanted;  // only nodes that run a pod with a /dev/shm
  for (auto& n : *nodes)
    if (std::any_of(pods->begin(), pods->end(), [&](const monitor::PodShm& p) { return p.node == n.name; }))
      wanted.push_back(std::move(n));
  auto scrapes = read_summaries(api, wanted, *pods, a.timeout_s, a.parallel);
  std::size_t failed = 0;
  for (const auto& s : scrapes)
    if (!s.ok) ++failed, std::cerr << "shmguard monitor: node " << s.node << ": " << s.error << "\n";
  std::vector<monitor::PodShm> full;
  {
    std::lock_guard<std::mutex> lock(state.mu);
    state.tracker.update(*pods, scrapes, wall_s());
    full = state.tracker.newly_full();
    state.ready = true;
  }
  if (a.events)
    for (const auto& p : full) write_event(api, a, p, cfg);
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
  std::cerr << "shmguard monitor: cycle " << cycle << ": " << pods->size() << " pods on " << scrapes.size() << " nodes ("
            << failed << " failed) in " << ms << " ms\n";
}

}  // namespace

int run_monitor(const MonitorArgs& a, const config::Config& cfg) {
  if (a.period_s < 1 || a.timeout_s < 1) return monitor_fail("--period and --kubelet-timeout must be at least 1 second");
  auto api = kube::load_access(a.kubeconfig, a.context);
  if (!api) return monitor_fail(api.error());
  std::string ca;
  if (!a.kubelet_ca.empty()) {
    std::ifstream f(a.kubelet_ca);
    std::ostringstream s;
    if (!f || !(s << f.rdbuf())) return monitor_fail(a.kubelet_ca + ": cannot read the kubelet CA");
    ca = s.str();
  }
  const auto colon = a.listen.rfind(':');
  if (colon == std::string::npos) return monitor_fail("--listen " + a.listen + ": want HOST:PORT");
  const std::string host = a.listen.substr(0, colon);
  const int port = std::atoi(a.listen.c_str() + colon + 1);

  Shared state;
  httplib::Server server;
  server.Get("/metrics", [&](const httplib::Request&, httplib::Response& res) {
    std::lock_guard<std::mutex> lock(state.mu);
    res.set_content(state.tracker.exposition(wall_s()), "text/plain; version=0.0.4; charset=utf-8");
  });
  server.Get("/healthz", [&](const httplib::Request&, httplib::Response& res) {
    std::lock_guard<std::mutex> lock(state.mu);
    res.status = state.ready ? 200 : 503;
    res.set_content(state.ready ? "ok\n" : "no cycle done yet\n", "text/plain");
  });
  if (!server.bind_to_port(host.c_str(), port)) return monitor_fail("cannot listen on " + a.listen);
  std::thread http([&] { server.listen_after_bind(); });
  signal(SIGTERM, on_term);
  signal(SIGINT, on_term);
  signal(SIGPIPE, SIG_IGN);

  for (int cycle = 1; !g_stop && (a.cycles == 0 || cycle <= a.cycles); ++cycle) {
    one_cycle(*api, a, cfg, ca, cycle, state);
    if (a.cycles != 0 && cycle == a.cycles) break;
    for (int i = 0; i < a.period_s * 10 && !g_stop; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  server.stop();
  http.join();
  return kExitOk;
}

}  // namespace shmguard::cli
