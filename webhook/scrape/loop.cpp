// The monitor's loop (see loop.h).
#include "scrape/loop.h"

#include <httplib.h>
#include <signal.h>
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <mutex>
#include <thread>

#include "base/text.h"
#include "monitor/allocator.h"
#include "monitor/tracker.h"
#include "scrape/events.h"
#include "scrape/kubelets.h"
#include "scrape/pod_watcher.h"
#include "scrape/reads.h"

namespace shmguard::scrape {
namespace {

using Clock = std::chrono::steady_clock;

std::atomic<bool> g_stop{false};
void on_term(int) { g_stop = true; }

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

// The kept pods, every kubelet's summary, the tracker's update, the Events; one log line.
void one_cycle(const kube::Access& api, const LoopOptions& a, const config::Config& cfg, Kubelets& kubelets,
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
  auto scrapes = read_summaries(summary_reader(api, a.timeout_s), nodes_with_shm(*nodes, pods), pods, a.parallel);
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
  if (a.events) write_events(api, a.timeout_s, a.parallel, cfg, judge, full, unprotected, leftover);

  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
  const long cpu = cpu_ms();
  const long cpu_since = cpu - state.cpu_ms_at_last;
  state.cpu_ms_at_last = cpu;
  std::cerr << "shmguard monitor: cycle " << cycle << ": " << n_pods - n_unprotected << " pods with a /dev/shm and "
            << n_unprotected << " unprotected, " << scrapes.size() << " nodes (" << failed << " failed) in " << ms
            << " ms, cpu " << cpu_since << " ms since the last; watch: " << snap.counts.relists << " lists, " << snap.counts.added + snap.counts.modified + snap.counts.deleted
            << " events, " << snap.api_bytes << " bytes read\n";
}

}  // namespace

Status run_monitor(const LoopOptions& a, const config::Config& cfg) {
  if (a.period_s < 1 || a.timeout_s < 1 || a.watch_timeout_s < 1 || a.node_refresh_s < 1)
    return Failure{"--period, --kubelet-timeout, --watch-timeout and --node-refresh must be at least 1 second"};
  auto api = kube::load_access(a.kubeconfig, a.context);
  if (!api) return api.failure_part();
  std::string ca;
  if (!a.kubelet_ca.empty()) {
    auto text = read_file(a.kubelet_ca);
    if (!text) return Failure{text.error() + " (--kubelet-ca)"};
    ca = std::move(*text);
  }
  const auto colon = a.listen.rfind(':');
  if (colon == std::string::npos) return Failure{"--listen " + a.listen + ": want HOST:PORT"};
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
  if (!server.bind_to_port(host.c_str(), port)) return Failure{"cannot listen on " + a.listen};
  std::thread http([&] { server.listen_after_bind(); });
  signal(SIGTERM, on_term);
  signal(SIGINT, on_term);
  signal(SIGPIPE, SIG_IGN);

  monitor::cap_thread_caches(4u << 20);  // the summary readers' freed bodies, reusable across threads
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
  return Ok{};
}

}  // namespace shmguard::scrape
