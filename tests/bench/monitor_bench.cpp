// The monitor's work per cycle over a fleet of 200 nodes x 50 pods (10,000 pods with a /dev/shm):
// parse the pod list and every node's Summary API JSON, join them, update the tracker and write
// the metrics text. The network (200 TLS reads, in parallel) is not in it. BM_MonitorCycle10kPods*
// list and judge every pod each cycle (the release before the watch); BM_MonitorCycle10kPodsWatched
// is the cycle on the pods a watch keeps (the engine ran at each pod's event, once), and
// BM_MonitorWatchEvent one MODIFIED event's parse, engine run and store update.
#include <benchmark/benchmark.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "monitor/pod_store.h"
#include "monitor/shm_usage.h"
#include "monitor/tracker.h"

namespace {

using nlohmann::json;
using namespace shmguard;

constexpr int kNodes = 200, kPodsPerNode = 50;

std::string pod_list() {
  json items = json::array();
  for (int n = 0; n < kNodes; ++n)
    for (int p = 0; p < kPodsPerNode; ++p) {
      const std::string name = "train-" + std::to_string(n) + "-" + std::to_string(p);
      items.push_back(
          {{"metadata", {{"name", name}, {"namespace", "ml-" + std::to_string(p % 10)}, {"uid", "uid-" + name},
                         {"labels", {{"jobset.sigs.k8s.io/jobset-name", "js-" + std::to_string(p)}}},
                         {"ownerReferences", {{{"kind", "Job"}, {"name", "j"}, {"controller", true}}}}}},
           {"spec", {{"nodeName", "node-" + std::to_string(n)},
                     {"containers", {{{"name", "train"}, {"image", "ghcr.io/acme/train:1"},
                                      {"volumeMounts", {{{"name", "shmguard-dshm"}, {"mountPath", "/dev/shm"}},
                                                        {{"name", "data"}, {"mountPath", "/data"}}}}}}},
                     {"volumes", {{{"name", "data"}, {"emptyDir", json::object()}},
                                  {{"name", "shmguard-dshm"}, {"emptyDir", {{"medium", "Memory"}, {"sizeLimit", "8Gi"}}}}}}}},
           {"status", {{"phase", "Running"}}}});
    }
  return json{{"kind", "PodList"}, {"items", items}}.dump();
}

std::vector<std::string> summaries(int cycle) {
  std::vector<std::string> out;
  for (int n = 0; n < kNodes; ++n) {
    json pods = json::array();
    for (int p = 0; p < kPodsPerNode; ++p) {
      const std::string name = "train-" + std::to_string(n) + "-" + std::to_string(p);
      const std::uint64_t cap = 8ULL << 30, used = (static_cast<std::uint64_t>(p + cycle) % 50) << 27;
      pods.push_back({{"podRef", {{"name", name}, {"namespace", "ml-" + std::to_string(p % 10)}, {"uid", "uid-" + name}}},
                      {"cpu", {{"usageNanoCores", 123456789}}},
                      {"memory", {{"workingSetBytes", 1234567890}}},
                      {"volume", {{{"name", "data"}, {"capacityBytes", 1ULL << 40}, {"availableBytes", 1ULL << 39}, {"usedBytes", 1}},
                                  {{"name", "shmguard-dshm"}, {"capacityBytes", cap}, {"availableBytes", cap - used},
                                   {"usedBytes", 0}}}}});
    }
    out.push_back(json{{"node", {{"nodeName", "node-" + std::to_string(n)}}}, {"pods", pods}}.dump());
  }
  return out;
}

// The rest of a cycle, shared by both: the pods joined with every node's summary, tracked at
// `now`, and the metrics text written.
std::string join_and_track(std::vector<monitor::PodShm>& pods, const std::vector<std::string>& texts,
                           monitor::Tracker& tracker, double now) {
  const auto index = monitor::index_pods(pods);
  std::vector<monitor::NodeScrape> nodes;
  for (int n = 0; n < kNodes; ++n) {
    monitor::apply_summary(pods, index, "node-" + std::to_string(n), monitor::parse_summary(texts[static_cast<std::size_t>(n)]));
    nodes.push_back({"node-" + std::to_string(n), true, ""});
  }
  tracker.update(pods, nodes, now);
  return tracker.exposition(now);
}

// `judged`: every pod also judged by the engine (protection.h), as the monitor and top do.
void cycle(benchmark::State& state, bool judged) {
  const std::string list = pod_list();
  const std::vector<std::string> texts = summaries(0);
  const config::Config cfg;
  monitor::Judge judge;
  judge.cfg = &cfg;
  judge.webhook.name = "shmguard-ml-system";
  judge.webhook.created = "2026-01-01T00:00:00Z";
  monitor::Tracker tracker;
  double now = 0;
  std::size_t bytes = 0;
  for (auto _ : state) {
    auto pods = monitor::running_pods(monitor::parse_pod_list(list), judged ? &judge : nullptr);
    const std::string text = join_and_track(pods, texts, tracker, now += 30);
    bytes = text.size();
    benchmark::DoNotOptimize(text.data());
  }
  state.counters["pods"] = static_cast<double>(tracker.pods());
  state.counters["metrics_bytes"] = static_cast<double>(bytes);
  state.counters["input_MB"] =
      static_cast<double>(list.size() + texts.size() * texts[0].size()) / 1e6;
}
// The cycle on the pods a watch keeps: judged against this cycle's webhook view (cheap), joined
// with the summaries, tracked, written out.
void BM_MonitorCycle10kPodsWatched(benchmark::State& state) {
  const std::string list = pod_list();
  const std::vector<std::string> texts = summaries(0);
  const config::Config cfg;
  monitor::Judge judge;
  judge.cfg = &cfg;
  judge.webhook.name = "shmguard-ml-system";
  judge.webhook.created = "2026-01-01T00:00:00Z";
  monitor::PodStore store(&cfg);
  auto listing = store.start_listing();
  listing.add_page(monitor::parse_pod_list(list), &cfg);
  store.finish_listing(std::move(listing), "1");
  monitor::Tracker tracker;
  double now = 0;
  for (auto _ : state) {
    std::vector<monitor::PodShm> pods;
    for (const auto& w : store.kept())
      if (auto p = monitor::judged_pod(w, &judge)) pods.push_back(std::move(*p));
    const std::string text = join_and_track(pods, texts, tracker, now += 30);
    benchmark::DoNotOptimize(text.data());
  }
  state.counters["pods"] = static_cast<double>(tracker.pods());
}

void BM_MonitorWatchEvent(benchmark::State& state) {
  const json list = json::parse(pod_list());
  const std::string event = json{{"type", "MODIFIED"}, {"object", list["items"][0]}}.dump();
  const config::Config cfg;
  monitor::PodStore store(&cfg);
  for (auto _ : state) benchmark::DoNotOptimize(store.apply(monitor::parse_pod_list(event)));
  state.counters["event_bytes"] = static_cast<double>(event.size());
}

void BM_MonitorCycle10kPods(benchmark::State& state) { cycle(state, false); }
void BM_MonitorCycle10kPodsJudged(benchmark::State& state) { cycle(state, true); }
BENCHMARK(BM_MonitorCycle10kPods)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_MonitorCycle10kPodsJudged)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_MonitorCycle10kPodsWatched)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_MonitorWatchEvent)->Unit(benchmark::kMicrosecond);

}  // namespace
