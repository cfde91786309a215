// The monitor's Events (see events.h).
#include "scrape/events.h"

#include <ctime>
#include <iostream>

#include "base/parallel.h"
#include "kube/list.h"
#include "sizing/quantity.h"

namespace shmguard::scrape {

using nlohmann::json;

namespace {

std::string now_rfc3339() {
  const std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

// A Warning Event on the pod, as `reason` with `message`.
void write_event(const kube::Access& api, int timeout_s, const monitor::PodShm& p, const char* reason,
                 const std::string& message) {
  const json ev = event_for(p, reason, message, now_rfc3339());
  auto r = kube::post(api, "/api/v1/namespaces/" + kube::url_encode(p.namespace_name) + "/events", ev, timeout_s);
  if (!r || (r->status != 201 && r->status != 200))
    std::cerr << ("shmguard monitor: event on " + p.namespace_name + "/" + p.name + ": " +  // one write: threads
                  (r ? kube::error_message(*r) + " (needs `create events`)" : r.error()) + "\n");
}

}  // namespace

json event_for(const monitor::PodShm& p, const char* reason, const std::string& message, const std::string& now) {
  return {{"apiVersion", "v1"}, {"kind", "Event"},
          {"metadata", {{"generateName", p.name + ".shmguard-"}, {"namespace", p.namespace_name}}},
          {"involvedObject", {{"apiVersion", "v1"}, {"kind", "Pod"}, {"namespace", p.namespace_name},
                              {"name", p.name}, {"uid", p.uid}}},
          {"reason", reason}, {"message", message}, {"type", "Warning"},
          {"source", {{"component", "shmguard-monitor"}}},
          {"firstTimestamp", now}, {"lastTimestamp", now}, {"count", 1}};
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

void write_events(const kube::Access& api, int timeout_s, unsigned parallel, const config::Config& cfg,
                  const monitor::Judge& judge, const std::vector<monitor::PodShm>& full,
                  const std::vector<monitor::PodShm>& unprotected, const std::vector<monitor::PodShm>& leftover) {
  parallel_for(full.size(), parallel, [&](unsigned, std::size_t i) {
    write_event(api, timeout_s, full[i], "ShmNearlyFull", nearly_full_message(full[i], cfg));
  });
  parallel_for(unprotected.size(), parallel, [&](unsigned, std::size_t i) {
    const auto& p = unprotected[i];
    write_event(api, timeout_s, p, "ShmUnprotected", monitor::unprotected_message(p.protection, p.namespace_name, judge));
  });
  for (const auto& p : leftover) write_event(api, timeout_s, p, "ShmLeftover", leftover_message(p));
}

}  // namespace shmguard::scrape
