// Fuzz target: what a kubelet or the API server sends the monitor and `top` (a pod list, a Summary
// API response). Half the input is read as a pod list, half as a summary; whatever they hold, the
// join never reports more used than mounted and the metrics text stays one sample per line.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "monitor/shm_usage.h"
#include "monitor/tracker.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace shmguard;
  const std::string text(reinterpret_cast<const char*>(data), size);
  const std::size_t half = text.find('\x01') == std::string::npos ? size / 2 : text.find('\x01');
  auto pods = monitor::shm_pods(monitor::parse_pod_list(text.substr(0, half)));
  const auto summary = monitor::parse_summary(half < size ? text.substr(half + 1) : std::string());
  for (const auto& p : pods) monitor::apply_summary(pods, p.node, summary);
  for (const auto& p : pods) {
    if (p.used && (!p.capacity || *p.used > *p.capacity)) std::abort();
    (void)monitor::verdict(p, {});
    (void)monitor::suggestion(p, {});
  }
  monitor::Tracker t;
  t.update(pods, {{"n", true, ""}}, 1);
  const std::string metrics = t.exposition(2);
  // Every line is a comment or `name{labels} value`: a label value never breaks a line.
  std::size_t start = 0;
  while (start < metrics.size()) {
    const std::size_t end = metrics.find('\n', start);
    if (end == std::string::npos) std::abort();
    if (metrics[start] != '#' && metrics.compare(start, 8, "shmguard") != 0) std::abort();
    start = end + 1;
  }
  return 0;
}
