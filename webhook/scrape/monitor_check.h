// What a running monitor's /metrics say, read back for `shmguard monitor --check` (the chart's
// `helm test`): whether it has done a cycle, the figures of one pod, and each node's scrape health.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <utility>

#include "monitor/tracker.h"

namespace shmguard::scrape {

struct MonitorSeen {
  double cycles = -1;                      // -1: no answer yet
  std::optional<monitor::Sample> size, used, peak;  // of the pod asked about
  std::map<std::string, std::pair<double, double>> nodes;  // errors, last good age (-1: never)
  std::string error;                       // the last transport/HTTP failure
};

// The metrics text read for the pod `ns`/`pod` ("" : none).
MonitorSeen seen_in_metrics(const std::string& metrics, const std::string& ns, const std::string& pod);

}  // namespace shmguard::scrape
