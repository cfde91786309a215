// A monitor's metrics read back (see monitor_check.h).
#include "scrape/monitor_check.h"

namespace shmguard::scrape {

MonitorSeen seen_in_metrics(const std::string& metrics, const std::string& ns, const std::string& pod) {
  MonitorSeen seen;
  for (auto& smp : monitor::parse_exposition(metrics)) {
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

}  // namespace shmguard::scrape
