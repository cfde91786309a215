// The monitor's Warning Events on pods: ShmNearlyFull (the first time a pod's /dev/shm reaches
// 90%), ShmUnprotected (a training pod without the /dev/shm shmguard would give it, and why) and
// ShmLeftover (a restarted container's segments still held), each with what to do.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "config/config.h"
#include "kube/access.h"
#include "monitor/protection.h"
#include "monitor/shm_usage.h"

namespace shmguard::scrape {

std::string nearly_full_message(const monitor::PodShm& p, const config::Config& cfg);
std::string leftover_message(const monitor::PodShm& p);

// The Event object, stamped `now` (RFC 3339).
nlohmann::json event_for(const monitor::PodShm& p, const char* reason, const std::string& message, const std::string& now);

// A cycle's Events, POSTed in parallel as the scrapes (500 pods crossing 90% at once are 500
// POSTs), up to `parallel` at once; a refused one is logged, never retried.
void write_events(const kube::Access& api, int timeout_s, unsigned parallel, const config::Config& cfg,
                  const monitor::Judge& judge, const std::vector<monitor::PodShm>& full,
                  const std::vector<monitor::PodShm>& unprotected, const std::vector<monitor::PodShm>& leftover);

}  // namespace shmguard::scrape
