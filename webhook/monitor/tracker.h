// What `shmguard monitor` remembers between scrapes and exports: each live pod's last use and its
// peak while it lives, each node's scrape health, as Prometheus text (exposition format 0.0.4).
// Pure: scrape results in, metrics text and the pods to warn about out.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "monitor/shm_usage.h"

namespace shmguard::monitor {

struct NodeScrape {
  std::string node;
  bool ok = false;
  std::string error;  // why not, for the log
};

class Tracker {
 public:
  // One scrape cycle at `now_s` (seconds, any epoch): `pods` are the live pods with what the
  // summaries said. Pods missing from `pods` are gone: their series disappear.
  // Taken by value: the monitor moves its cycle's pods in (50,000 of them are 30 MB a copy).
  void update(std::vector<PodShm> pods, const std::vector<NodeScrape>& nodes, double now_s);

  // Pods whose use first reached 90% of their mounted size in the last update (each pod once in
  // its life): the monitor writes an Event on each.
  const std::vector<PodShm>& newly_full() const { return newly_full_; }

  // Pods first seen unprotected (protection.h) in the last update, each once in its life: the
  // monitor writes an Event on each.
  const std::vector<PodShm>& newly_unprotected() const { return newly_unprotected_; }

  // Pods whose container restarted and whose /dev/shm still held files from the dead process at
  // the first figures the kubelet took after it ended (leftover_worth_telling): once per restart.
  const std::vector<PodShm>& newly_leftover() const { return newly_leftover_; }

  std::string exposition(double now_s) const;

  std::size_t pods() const { return pods_.size(); }

 private:
  void unprotected(std::string& out) const;  // its two families
  // `fresh`: `cur`'s figures are this cycle's (its node answered).
  void check_leftover(const PodShm& cur, bool fresh, bool first_sight);

  struct Leftover {
    std::uint64_t restarts = 0;          // the restarts already judged
    bool pending = false;                // a restart waits for figures taken after it
    std::optional<std::uint64_t> bytes;  // what the last judged restart left (du)
  };
  std::map<std::string, Leftover> leftovers_;  // by uid

  struct Node {
    double last_good_s = -1;
    std::uint64_t errors = 0;
  };
  std::map<std::string, PodShm> pods_;  // by uid (namespace/name when there is none)
  struct Warned {
    bool full = false, unprotected = false;
  };
  std::map<std::string, Warned> warned_;  // by uid: which Events were written
  std::map<std::string, Node> nodes_;
  std::vector<PodShm> newly_full_, newly_unprotected_, newly_leftover_;
  std::uint64_t cycles_ = 0;
};

// One sample line of an exposition read back (`monitor --check`, the tests): comments and lines
// that are not samples are skipped; label values are unescaped.
struct Sample {
  std::string name;
  std::map<std::string, std::string> labels;
  double value = 0;
};
std::vector<Sample> parse_exposition(const std::string& text);

}  // namespace shmguard::monitor
