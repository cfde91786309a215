// The monitor's memory and metrics (see tracker.h).
#include "monitor/tracker.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <unordered_set>

#include "base/text.h"

namespace shmguard::monitor {
namespace {

std::string key(const PodShm& p) { return p.uid.empty() ? p.namespace_name + "/" + p.name : p.uid; }

std::string pod_labels(const PodShm& p) {
  return "{namespace=\"" + prometheus_label(p.namespace_name) + "\",pod=\"" + prometheus_label(p.name) + "\",owner_kind=\"" +
         prometheus_label(p.owner_kind) + "\",owner_name=\"" + prometheus_label(p.owner_name) + "\"}";
}

void family(std::string& out, const char* name, const char* type, const char* help) {
  out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
}

std::string seconds(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", v);
  return buf;
}

}  // namespace

namespace {

// `{a="x",b="y\"z"}` from `i` (at the brace) into `labels`; false when malformed.
bool parse_labels(const std::string& line, std::size_t& i, std::map<std::string, std::string>& labels) {
  ++i;
  while (i < line.size() && line[i] != '}') {
    const auto eq = line.find('=', i);
    if (eq == std::string::npos || eq + 1 >= line.size() || line[eq + 1] != '"') return false;
    std::string name = line.substr(i, eq - i), value;
    for (i = eq + 2; i < line.size() && line[i] != '"'; ++i) {
      if (line[i] == '\\' && i + 1 < line.size()) value += line[++i] == 'n' ? '\n' : line[i];
      else value += line[i];
    }
    if (i >= line.size()) return false;
    labels[name] = std::move(value);
    if (++i < line.size() && line[i] == ',') ++i;
  }
  if (i >= line.size()) return false;
  ++i;
  return true;
}

}  // namespace

std::vector<Sample> parse_exposition(const std::string& text) {
  std::vector<Sample> out;
  std::size_t start = 0;
  while (start < text.size()) {
    auto end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(start, end - start);
    start = end + 1;
    if (line.empty() || line[0] == '#') continue;
    Sample s;
    std::size_t i = line.find_first_of("{ ");
    if (i == std::string::npos) continue;
    s.name = line.substr(0, i);
    if (line[i] == '{' && !parse_labels(line, i, s.labels)) continue;
    char* num_end = nullptr;
    const char* num = line.c_str() + i;
    s.value = std::strtod(num, &num_end);
    if (num_end == num) continue;
    out.push_back(std::move(s));
  }
  return out;
}

void Tracker::check_leftover(const PodShm& cur, bool fresh, bool first_sight) {
  Leftover& l = leftovers_[key(cur)];
  if (first_sight || cur.restarts > l.restarts) {
    l.pending = cur.restarts > l.restarts;
    l.restarts = cur.restarts;
  }
  // Figures from this cycle's summary, taken after the container ended ("" : the kubelet gave no time).
  const bool after = fresh && cur.capacity && (cur.stats_time.empty() || cur.stats_time >= cur.restart_finished);
  if (!l.pending || !after) return;
  l.pending = false;
  l.bytes = cur.du_bytes;
  if (leftover_worth_telling(cur.du_bytes, *cur.capacity)) newly_leftover_.push_back(cur);
}

void Tracker::update(std::vector<PodShm> pods, const std::vector<NodeScrape>& nodes, double now_s) {
  ++cycles_;
  newly_full_.clear();
  newly_unprotected_.clear();
  newly_leftover_.clear();
  // Updated in place, each pod moved in as it is read: a second map of every pod beside the kept
  // one was 7 MiB at 10,000 pods, at the monitor's peak.
  std::unordered_set<std::string> live;
  live.reserve(pods.size());
  for (auto& p : pods) {
    PodShm cur = std::move(p);
    p = PodShm();  // the moved-from shell's buffers go now, not with the vector
    std::string k = key(cur);
    if (!live.insert(k).second) continue;  // a pod twice in one cycle: its first record counts
    const bool fresh = cur.capacity.has_value();
    auto old = pods_.find(k);
    const bool first_sight = old == pods_.end();
    if (!first_sight) {
      cur.peak = std::max(cur.peak, old->second.peak);
      if (!cur.capacity) {  // no figures this time (its node did not answer): keep the last ones
        cur.capacity = old->second.capacity;
        cur.used = old->second.used;
      }
    }
    Warned& w = warned_[k];
    if (nearly_full(cur) && !w.full) {
      w.full = true;
      newly_full_.push_back(cur);
    }
    if (cur.protection.reason != Unprotected::kNo && !w.unprotected) {
      w.unprotected = true;
      newly_unprotected_.push_back(cur);
    }
    if (!cur.volume.empty()) check_leftover(cur, fresh, first_sight);
    if (first_sight) pods_.emplace(std::move(k), std::move(cur));
    else old->second = std::move(cur);
  }
  auto gone = [&](auto& m) {
    for (auto it = m.begin(); it != m.end();) it = live.count(it->first) ? std::next(it) : m.erase(it);
  };
  gone(pods_);
  gone(warned_);
  gone(leftovers_);
  for (const auto& n : nodes) {
    Node& s = nodes_[n.node];
    if (n.ok) s.last_good_s = now_s;
    else ++s.errors;
  }
}

void Tracker::unprotected(std::string& out) const {
  family(out, "shmguard_pod_unprotected", "gauge",
         "1 for a running training pod without the /dev/shm shmguard would give it; reason says why.");
  std::map<std::pair<std::string, std::string>, std::uint64_t> by_namespace;
  for (const auto& [k, p] : pods_) {
    if (p.protection.reason == Unprotected::kNo) continue;
    const std::string reason = unprotected_row(p.protection.reason).name;
    std::string labels = pod_labels(p);
    labels.insert(labels.size() - 1, ",reason=\"" + reason + "\"");
    out += "shmguard_pod_unprotected" + labels + " 1\n";
    ++by_namespace[{p.namespace_name, reason}];
  }
  family(out, "shmguard_unprotected_pods", "gauge", "Running training pods without the /dev/shm shmguard would give them.");
  for (const auto& [nr, n] : by_namespace)
    out += "shmguard_unprotected_pods{namespace=\"" + prometheus_label(nr.first) + "\",reason=\"" + nr.second + "\"} " +
           std::to_string(n) + "\n";
}

std::string Tracker::exposition(double now_s) const {
  std::string out;
  out.reserve(256 + pods_.size() * 3 * 160);
  family(out, "shmguard_shm_used_bytes", "gauge", "Bytes in use in the pod's /dev/shm (capacity - available of its tmpfs).");
  for (const auto& [k, p] : pods_)
    if (p.used) out += "shmguard_shm_used_bytes" + pod_labels(p) + " " + std::to_string(*p.used) + "\n";
  family(out, "shmguard_shm_size_bytes", "gauge", "Size of the tmpfs the kubelet mounted at the pod's /dev/shm.");
  for (const auto& [k, p] : pods_)
    if (p.capacity) out += "shmguard_shm_size_bytes" + pod_labels(p) + " " + std::to_string(*p.capacity) + "\n";
  family(out, "shmguard_shm_peak_bytes", "gauge", "Most bytes seen in use in the pod's /dev/shm while it lives.");
  for (const auto& [k, p] : pods_)
    if (p.capacity) out += "shmguard_shm_peak_bytes" + pod_labels(p) + " " + std::to_string(p.peak) + "\n";
  family(out, "shmguard_shm_leftover_bytes", "gauge",
         "Bytes of files in the pod's /dev/shm (the kubelet's du) at the first figures after its last container restart: "
         "what the dead process left behind.");
  for (const auto& [k, p] : pods_)
    if (auto l = leftovers_.find(k); l != leftovers_.end() && l->second.bytes)
      out += "shmguard_shm_leftover_bytes" + pod_labels(p) + " " + std::to_string(*l->second.bytes) + "\n";
  unprotected(out);
  family(out, "shmguard_node_scrape_errors_total", "counter", "Summary API scrapes of the node that failed.");
  for (const auto& [n, s] : nodes_)
    out += "shmguard_node_scrape_errors_total{node=\"" + prometheus_label(n) + "\"} " + std::to_string(s.errors) + "\n";
  family(out, "shmguard_node_last_good_scrape_age_seconds", "gauge",
         "Seconds since the node's Summary API last answered (absent: never).");
  for (const auto& [n, s] : nodes_)
    if (s.last_good_s >= 0)
      out += "shmguard_node_last_good_scrape_age_seconds{node=\"" + prometheus_label(n) + "\"} " + seconds(now_s - s.last_good_s) + "\n";
  family(out, "shmguard_monitor_cycles_total", "counter", "Scrape cycles done.");
  out += "shmguard_monitor_cycles_total " + std::to_string(cycles_) + "\n";
  return out;
}

}  // namespace shmguard::monitor
